# Sourced by the set-up scripts.

# Runs a command as root (through sudo when not root).
as_root() {
  if [ "$(id -u)" -ne 0 ]; then sudo "$@"; else "$@"; fi
}

# Whether Debian package P is installed. A package installed for two
# architectures (libgtest-dev and libgtest-dev:arm64, test-arm64.sh) is
# ambiguous to dpkg -s without its architecture.
package_installed() {
  dpkg -s "$1" >/dev/null 2>&1 ||
    { [[ $1 != *:* ]] && dpkg -s "$1:$(dpkg --print-architecture)" >/dev/null 2>&1; }
}

# install_packages P...: installs the Debian packages among P that are not
# installed yet.
install_packages() {
  local missing=() p
  for p in "$@"; do
    package_installed "$p" || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  printf '[setup] installing: %s\n' "${missing[*]}" >&2
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}
