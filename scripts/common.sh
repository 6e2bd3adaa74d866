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

# ---- scripts/test --isa ------------------------------------------------------------------------

# isa_note ISA: says what the run will test on this CPU (an x86 instruction set the CPU lacks
# leaves the kernel tests skipped, status 77, not failed).
isa_note() {
  local want=""
  case "$1" in
    avx2) want="avx2 fma" ;;
    avx512) want="avx512f avx512bw avx512vl avx512dq avx512_bf16" ;;
    aarch64) echo "scripts/test --isa aarch64: cross-compiled, run under qemu-aarch64"; return ;;
  esac
  local flags lacking=()
  flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
  for f in $want; do grep -qw "$f" <<<"$flags" || lacking+=("$f"); done
  if [ ${#lacking[@]} -gt 0 ]; then
    echo "scripts/test --isa $1: this CPU lacks ${lacking[*]}: the tests built for it skip"
  fi
}

# write_aarch64_cross_file DIR: a Meson cross file (in DIR-cross/) for Debian's aarch64 cross compiler, whose
# programs Meson runs under qemu-aarch64; prints its path. Eigen and doctest are header-only: the
# host's copies serve (doctest through a folder of its own, not all of /usr/include).
write_aarch64_cross_file() {
  local cross="$root/$1-cross" headers="$root/$1-cross/include"
  mkdir -p "$headers"
  ln -sfn /usr/include/doctest "$headers/doctest"
  cat >"$cross/cross.ini" <<CROSS
[binaries]
cpp = 'aarch64-linux-gnu-g++'
strip = 'aarch64-linux-gnu-strip'
pkgconfig = 'pkg-config'
exe_wrapper = ['qemu-aarch64', '-L', '/usr/aarch64-linux-gnu']

[properties]
pkg_config_libdir = ['/usr/share/pkgconfig']

[built-in options]
cpp_args = ['-isystem', '$headers']

[host_machine]
system = 'linux'
cpu_family = 'aarch64'
cpu = 'aarch64'
endian = 'little'
CROSS
  echo "$cross/cross.ini"
}

# unit_tests DIR ISA: the names of the tests the run covers. On x86, the 'kernels' suite: the
# unit tests built for the chosen instruction set (the others are the default build's). Under
# qemu (aarch64), where everything is built for Arm: the unit suite's compiled tests (no script
# that runs a program of this build itself), less the training-heavy parts.
unit_tests() {
  python3 - "$1" "$2" <<'PY'
import json, os, subprocess, sys
build, isa = os.path.realpath(sys.argv[1]), sys.argv[2]
tests = json.loads(subprocess.check_output(["meson", "introspect", "--tests", build]))
emulated_skip = {"step", "step_combinations", "step_allocation", "train"}
for t in tests:
    suites = {s.split(":")[-1] for s in t["suite"]}  # introspection says "dafuse:unit"
    if ("unit" if isa == "aarch64" else "kernels") not in suites:
        continue
    compiled = os.path.realpath(os.path.join(build, t["cmd"][0])).startswith(build + os.sep)
    if isa == "aarch64" and (not compiled or t["name"] in emulated_skip):
        continue
    print(t["name"])
PY
}

# suite_tests DIR SUITE: the names of a suite's tests.
suite_tests() {
  meson introspect --tests "$1" | python3 -c '
import json, sys
for t in json.load(sys.stdin):
    if sys.argv[1] in {s.split(":")[-1] for s in t["suite"]}:
        print(t["name"])' "$2"
}

# built_by_tests DIR NAME...: the build's outputs those tests run or read (Ninja targets).
built_by_tests() {
  python3 - "$@" <<'PY'
import json, os, subprocess, sys
build, names = os.path.realpath(sys.argv[1]), set(sys.argv[2:])
introspect = lambda what: json.loads(subprocess.check_output(["meson", "introspect", what, build]))
outputs = {os.path.realpath(f) for t in introspect("--targets") for f in t["filename"]}
for t in introspect("--tests"):
    if t["name"] in names:
        for part in t["cmd"]:
            path = os.path.realpath(os.path.join(build, part))  # relative: to the build
            if path in outputs:
                print(os.path.relpath(path, build))
PY
}
