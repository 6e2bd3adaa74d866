#!/usr/bin/env bash
# A GCC build without -fopenmp says once that its steps run on one thread (config.hpp); with
# -fopenmp, or DAFUSE_SERIAL defined, it says nothing. Usage: openmp_notice.sh -- COMPILER FLAGS...
# (the flags of a user's unit; -fopenmp among them is dropped for the first case).
set -u
[ "${1:-}" = "--" ] && shift
flags=()
for f in "$@"; do [ "$f" = "-fopenmp" ] || flags+=("$f"); done
if ! "${flags[0]}" --version 2>/dev/null | grep -qi "gcc\|g++\|free software foundation"; then
  echo "skipped: only GCC prints the notice (clang would make it a warning)"
  exit 77
fi
unit=$(mktemp --suffix=.cpp)
trap 'rm -f "$unit"' EXIT
printf '#include <dafuse/config.hpp>\nint main() { return 0; }\n' >"$unit"
notice="dafuse: built without OpenMP, so every step runs on one thread"
failures=0
out=$("${flags[@]}" -fsyntax-only "$unit" 2>&1)
grep -qF "$notice" <<<"$out" || { echo "FAIL: no notice without -fopenmp:"; echo "$out"; failures=1; }
out=$("${flags[@]}" -fopenmp -fsyntax-only "$unit" 2>&1)
grep -qF "dafuse:" <<<"$out" && { echo "FAIL: a notice with -fopenmp:"; echo "$out"; failures=1; }
out=$("${flags[@]}" -DDAFUSE_SERIAL -fsyntax-only "$unit" 2>&1)
grep -qF "dafuse:" <<<"$out" && { echo "FAIL: a notice with DAFUSE_SERIAL:"; echo "$out"; failures=1; }
[ $failures -eq 0 ] && echo "the OpenMP notice: printed without -fopenmp only"
exit $failures
