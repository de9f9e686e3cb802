# Sourced by the set-up scripts: install_missing PKG... installs the Debian packages that
# are not installed yet (apt-get update first), and nothing when all are there.
install_missing() {
  local sudo="" missing=() p
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
}
