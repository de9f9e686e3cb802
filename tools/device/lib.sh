# Sourced by the one-call device scripts (spec_gpu.sh, live_gpu.sh) after they set STAGES:
# unpacks .deps/debs into /tmp/deps, sets BUILD_DIR, LD_LIBRARY_PATH and P (the parley
# binary), defines has STAGE (is it in $STAGES) and in_time LABEL (false, saying so, once
# DEADLINE seconds have passed since sourcing), and builds parley when $P is missing
# (exiting with the log's tail if the build fails).
export PATH="/usr/local/cuda/bin:$PATH"
mkdir -p "$OUT" /tmp/deps
for f in .deps/debs/*.deb; do dpkg -x "$f" /tmp/deps; done
export PARLEY_DEPS_PREFIX=/tmp/deps BUILD_DIR=${BUILD_DIR:-/tmp/build-gpu}
export LD_LIBRARY_PATH="/tmp/deps/usr/lib/$(gcc -print-multiarch):/tmp/deps/usr/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
P=$BUILD_DIR/parley
has() { [[ " $STAGES " == *" $1 "* ]]; }
T_START=$(date +%s)
in_time() { (( $(date +%s) - T_START < ${DEADLINE:-100000} )) || { echo "skipped (deadline): $*"; return 1; }; }
if [[ ! -x $P ]]; then
  t0=$(date +%s)
  PARLEY_CLI=ON PARLEY_BUILD_ONLY=1 PARLEY_TARGETS=parley PARLEY_JOBS=${PARLEY_JOBS:-14} \
    tools/device/build_and_test.sh >"$OUT/build.log" 2>&1
  echo "parley build: rc $? in $(($(date +%s) - t0)) s"
  [[ -x $P ]] || { tail -30 "$OUT/build.log"; exit 1; }
fi
