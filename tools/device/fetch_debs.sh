#!/usr/bin/env bash
# Run HERE (not on the GPU machine): downloads the Debian packages the H200 image lacks
# into .deps/debs (git-ignored), for a device run with carry [".deps"] that starts with
#   mkdir -p /tmp/deps && for f in .deps/debs/*.deb; do dpkg -x $f /tmp/deps; done
#   PARLEY_DEPS_PREFIX=/tmp/deps tools/device/build_and_test.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .deps/debs
cd .deps/debs
apt-get download libkissfft-dev libkissfft-float131 libpcre2-dev libutf8proc-dev libutf8proc2
ls -la
