#!/usr/bin/env bash
# tools/check_includes.py catches each rule's violation: on a copy of the headers with one bad
# include added at a time, it exits 1 and names the edge; the real headers pass (include_graph).
# Usage: check_includes_test.sh CHECK_INCLUDES_PY INCLUDE_DIR
set -uo pipefail
tool=$1
include=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

# expect_refused HEADER INCLUDE MESSAGE: HEADER (under dafuse/) with `#include <dafuse/INCLUDE>`
# added is refused with MESSAGE.
expect_refused() {
  rm -rf "$work/include"
  cp -r "$include" "$work/include"
  printf '#include <dafuse/%s>\n' "$2" >>"$work/include/dafuse/$1"
  if python3 "$tool" "$work/include" >"$work/out" 2>&1; then
    echo "FAIL: $1 including $2 was accepted"
    failures=$((failures + 1))
  elif ! grep -qF "$3" "$work/out"; then
    echo "FAIL: $1 including $2: expected \"$3\" in:"
    cat "$work/out"
    failures=$((failures + 1))
  fi
}

expect_refused train/fit.hpp backend/host/gemm.hpp \
  "train/fit.hpp -> backend/host/gemm.hpp: above backend/, include only"
expect_refused step/train_step.hpp backend/device/functors.hpp \
  "step/train_step.hpp -> backend/device/functors.hpp: above backend/, include only"
expect_refused backend/host/update.hpp backend/device/primitives.hpp \
  "backend/host/update.hpp -> backend/device/primitives.hpp: backend/host/ may not include backend/device/"
expect_refused backend/device/functors.hpp backend/host/simd.hpp \
  "backend/device/functors.hpp -> backend/host/simd.hpp: backend/device/ may not include backend/host/"
expect_refused core/buffer.hpp nn/dense.hpp "core/buffer.hpp -> nn/dense.hpp: core (rank 1) may not include nn"

# An exception that no longer reaches into backend/ must leave the list.
rm -rf "$work/include"
cp -r "$include" "$work/include"
sed -i '/#include <dafuse\/backend\/host\//d' "$work/include/dafuse/step/model.hpp"
if python3 "$tool" "$work/include" >"$work/out" 2>&1 ||
  ! grep -qF "step/model.hpp: no longer reaches into backend/" "$work/out"; then
  echo "FAIL: a stale exception was not reported:"
  cat "$work/out"
  failures=$((failures + 1))
fi

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all include rule checks passed"
