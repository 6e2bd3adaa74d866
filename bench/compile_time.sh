#!/usr/bin/env bash
# Usage: bench/compile_time.sh [COMPILER...]   (default: g++; e.g. bench/compile_time.sh g++ clang++)
# What a user's edit–compile loop costs: CPU seconds (user + system, so a busy machine moves them
# little) and peak memory of
#   umbrella             parsing dafuse.hpp alone (-fsyntax-only)
#   one step -O2         bench/compile_time/one_step.cpp, one train_step type and fit, to an
#                        object; it includes only the headers it uses
#   ... + umbrella       the same with dafuse.hpp included first (-include)
#   ... + umbrella, PCH  the same with dafuse.hpp precompiled (built once, its cost shown apart):
#                        what CMake's target_precompile_headers and Meson's cpp_pch do
#   one step -O3         the same at -O3 (what the examples and dafuse-train build at)
#   dafuse-train         every translation unit of apps/dafuse_train at -O3, one after another
# each with -std=c++20 -fopenmp -march=native and the include paths of the build (Eigen, Thrust),
# the median of 3 runs (1 for dafuse-train). Results: docs/benchmarks.md, "Compile time".
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
compilers=("$@"); [ ${#compilers[@]} -gt 0 ] || compilers=(g++)
cccl=${CUDA_PATH:-/usr/local/cuda}/include/cccl
if [ -f "$cccl/thrust/version.h" ]; then thrust=(-isystem "$cccl"); else thrust=(); fi
flags=(-std=c++20 -fopenmp -march=native -I "$root/include" -isystem /usr/include/eigen3
       "${thrust[@]}" -DTHRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_OMP)
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT

# One compilation: prints "CPU_SECONDS MAX_RSS_MB".
measure() {
  /usr/bin/time -f '%U %S %M' -o "$out/time" "$@" >/dev/null 2>"$out/err" || {
    cat "$out/err" >&2; exit 1; }
  awk '{printf "%.2f %.0f\n", $1 + $2, $3 / 1024}' "$out/time"
}
# The median of 3 measurements of one command (by CPU seconds).
median3() {
  for _ in 1 2 3; do measure "$@"; done | sort -n | sed -n 2p
}
# Preprocessed lines of a file (and any flags after it): what the front end reads.
lines() { "$1" "${flags[@]}" "${@:3}" -E "$2" | wc -l; }

printf '| compiler | case | CPU s | peak MB | preprocessed lines |\n|---|---|---|---|---|\n'
for cxx in "${compilers[@]}"; do
  name="$cxx $("$cxx" -dumpversion)"
  read -r s m < <(median3 "$cxx" "${flags[@]}" -fsyntax-only "$root/bench/compile_time/umbrella.cpp")
  printf '| %s | umbrella (-fsyntax-only) | %s | %s | %s |\n' "$name" "$s" "$m" \
    "$(lines "$cxx" "$root/bench/compile_time/umbrella.cpp")"
  step=$root/bench/compile_time/one_step.cpp
  read -r s m < <(median3 "$cxx" "${flags[@]}" -O2 -c "$step" -o "$out/one_step.o")
  printf '| %s | one step -O2 | %s | %s | %s |\n' "$name" "$s" "$m" "$(lines "$cxx" "$step")"
  read -r s m < <(median3 "$cxx" "${flags[@]}" -O2 -include dafuse/dafuse.hpp -c "$step" \
                    -o "$out/one_step.o")
  printf '| %s | one step -O2 + umbrella | %s | %s | %s |\n' "$name" "$s" "$m" \
    "$(lines "$cxx" "$step" -include dafuse/dafuse.hpp)"
  # The precompiled umbrella: GCC reads <dir>/dafuse/dafuse.hpp.gch in place of the header when
  # <dir> comes first on the include path; clang takes -include-pch.
  mkdir -p "$out/pch/dafuse"
  if "$cxx" --version | grep -q clang; then
    read -r s m < <(measure "$cxx" "${flags[@]}" -O2 -x c++-header "$root/include/dafuse/dafuse.hpp" \
                      -o "$out/pch/dafuse.pch")
    use_pch=(-include-pch "$out/pch/dafuse.pch")
  else
    read -r s m < <(measure "$cxx" "${flags[@]}" -O2 -x c++-header "$root/include/dafuse/dafuse.hpp" \
                      -o "$out/pch/dafuse/dafuse.hpp.gch")
    use_pch=(-I "$out/pch" -include dafuse/dafuse.hpp -Winvalid-pch)
  fi
  printf '| %s | precompiling dafuse.hpp at -O2 (once) | %s | %s | |\n' "$name" "$s" "$m"
  read -r s m < <(median3 "$cxx" "${use_pch[@]}" "${flags[@]}" -O2 -c "$step" -o "$out/one_step.o")
  printf '| %s | one step -O2 + umbrella, PCH | %s | %s | |\n' "$name" "$s" "$m"
  read -r s m < <(median3 "$cxx" "${flags[@]}" -O3 -c "$step" -o "$out/one_step.o")
  printf '| %s | one step -O3 | %s | %s | |\n' "$name" "$s" "$m"
  total=0; peak=0
  # jit.cpp reads the paths and flags Meson configures; any values compile the same code.
  for v in CXX CXXFLAGS SOURCE_INCLUDE SOURCE_APP INSTALLED_INCLUDE INSTALLED_APP INSTALLED_BIN; do
    echo "#define DAFUSE_TRAIN_$v \"\""
  done >"$out/jit_config.hpp"
  for tu in "$root"/apps/dafuse_train/*.cpp; do
    read -r s m < <(measure "$cxx" "${flags[@]}" -I "$out" -O3 -c "$tu" -o "$out/tu.o")
    total=$(awk -v a="$total" -v b="$s" 'BEGIN {printf "%.2f", a + b}')
    [ "$m" -gt "$peak" ] && peak=$m
  done
  printf '| %s | dafuse-train, %d TUs -O3 | %s | %s (largest TU) | |\n' "$name" \
    "$(ls "$root"/apps/dafuse_train/*.cpp | wc -l)" "$total" "$peak"
done
