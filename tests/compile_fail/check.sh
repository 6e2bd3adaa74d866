#!/usr/bin/env bash
# Usage: check.sh FILE -- COMPILER [FLAGS...]
#        check.sh --clean FILE... -- COMPILER [FLAGS...]
# The first form: FILE fails to compile with -DDAFUSE_COMPILE_FAIL, with a diagnostic containing
# the text of its "// expect: " line (and, given a "// errors: N" line, at most N errors). The second: every FILE compiles cleanly as it is, all in one
# translation unit (each inside a namespace of its own, after every header the cases include,
# which #pragma once then keeps out of the namespaces), so the headers are parsed once for all
# the cases rather than once per case.
set -u
if [ "$1" = "--clean" ]; then
  shift
  files=()
  while [ "$1" != "--" ]; do files+=("$1"); shift; done
  shift
  tu=$(mktemp --suffix=.cpp)
  trap 'rm -f "$tu"' EXIT
  {
    grep -h '^#include' "${files[@]}" | sort -u
    for f in "${files[@]}"; do
      echo "namespace case_$(basename "$f" .cpp) {"
      echo "#include \"$(cd "$(dirname "$f")" && pwd)/$(basename "$f")\""
      echo "}"
    done
  } >"$tu"
  if ! out=$("$@" -iquote "$(cd "$(dirname "${files[0]}")" && pwd)" -fsyntax-only "$tu" 2>&1); then
    echo "FAIL: a case does not compile without DAFUSE_COMPILE_FAIL:"; echo "$out" | head -n 30
    exit 1
  fi
  echo "ok: ${#files[@]} cases compile without DAFUSE_COMPILE_FAIL"
  exit 0
fi
file=$1; shift
[ "$1" = "--" ] && shift
expect=$(sed -n 's|^// expect: ||p' "$file" | head -n 1)
if [ -z "$expect" ]; then echo "FAIL: $file has no '// expect: ' line"; exit 1; fi
if out=$("$@" -fsyntax-only -DDAFUSE_COMPILE_FAIL "$file" 2>&1); then
  echo "FAIL: $file compiled with DAFUSE_COMPILE_FAIL"; exit 1
fi
if ! grep -qF -- "$expect" <<<"$out"; then
  echo "FAIL: $file failed, but without the message: $expect"; echo "$out" | head -n 30; exit 1
fi
# "// errors: N": the failure is at most N errors (a failed check must not cascade; GCC reports
# every failed static_assert of a class, clang the first).
errors=$(sed -n 's|^// errors: ||p' "$file" | head -n 1)
if [ -n "$errors" ]; then
  found=$(grep -c 'error:' <<<"$out")
  if [ "$found" -gt "$errors" ]; then
    echo "FAIL: $file failed with $found errors, expected at most $errors:"; grep 'error:' <<<"$out"
    exit 1
  fi
fi
echo "ok: $file fails with: $expect${errors:+ (${found} error(s))}"
