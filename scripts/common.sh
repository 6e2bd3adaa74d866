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

# ensure_torch_venv DIR [PACKAGES...]: sets torch_python to a python3 whose torch is 2.x or later
# (torch.compile), from the virtual environment DIR (created and filled from PyPI only when it has
# no such torch yet, with PACKAGES besides torch and numpy), else to Debian's /usr/bin/python3
# (python3-torch 1.13, no torch.compile), saying why. PyPI's x86_64 torch is a CUDA build: it
# does not import without its nvidia-* packages, so the whole set comes (about 5.4 GB, a minute
# on this machine's link); the CPU step uses none of it. DAFUSE_TORCH=debian skips the venv.
torch_python="" torch_note=""
ensure_torch_venv() {
  local dir=$1; shift
  local check='import sys, torch; sys.exit(0 if int(torch.__version__.split(".")[0]) >= 2 else 1)'
  torch_python=/usr/bin/python3 torch_note=""
  if [ "${DAFUSE_TORCH:-}" = debian ]; then
    torch_note="DAFUSE_TORCH=debian: Debian's torch (no torch.compile)"
    return 0
  fi
  if ! "$dir/bin/python" -c "$check" 2>/dev/null; then
    local log="$dir.install.log" start=$SECONDS
    echo "dafuse: installing PyTorch 2 from PyPI into $dir (CUDA build with its nvidia-*"
    echo "        packages, about 5.4 GB; only this once; log in $log)"
    mkdir -p "$(dirname "$dir")"
    if { [ -x "$dir/bin/pip" ] || /usr/bin/python3 -m venv "$dir"; } >"$log" 2>&1 &&
       "$dir/bin/pip" install --no-cache-dir --disable-pip-version-check torch numpy "$@" \
         >>"$log" 2>&1 &&
       "$dir/bin/python" -c "$check" >>"$log" 2>&1; then
      echo "dafuse: installed $("$dir/bin/python" -c 'import torch; print("torch", torch.__version__)')" \
           "in $((SECONDS - start)) s, $(du -sh "$dir" | cut -f1)"
    else
      torch_note="PyTorch 2 could not be installed into $dir ($(tail -n 1 "$log")):"
      torch_note+=" Debian's torch instead (no torch.compile)"
      echo "note: $torch_note"
      return 0
    fi
  fi
  torch_python="$dir/bin/python"
}
