# Shared by scripts/demo and scripts/test: install what the build needs, then configure.
# Debian packages are installed with apt-get when missing (as root), or the command to run is
# printed. Thrust comes from the CUDA toolkit's CCCL when it is there, else from libthrust-dev.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

# ensure_packages [EXTRA...]: the build's packages, and any a script needs besides them.
ensure_packages() {
  local wanted=(meson ninja-build g++ pkg-config cmake libeigen3-dev doctest-dev "$@")
  local cuda=${CUDA_PATH:-/usr/local/cuda}
  [ -d "$cuda/include/cccl/thrust" ] || wanted+=(libthrust-dev)
  local missing=()
  for p in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -eq 0 ]; then
    echo "dafuse: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "dafuse: missing Debian packages; run as root:"
    echo "  apt-get install -y ${missing[*]}"
    exit 1
  fi
}

# configure BUILD_DIR [meson options...]: set up once, reconfigure when options change.
configure() {
  local dir=$1; shift
  if [ -f "$dir/build.ninja" ]; then
    meson configure "$dir" "$@" >/dev/null
  else
    meson setup "$dir" "$@"
  fi
}
