#!/usr/bin/env bash
# Usage: check.sh FILE -- COMPILER [FLAGS...]
# FILE must compile cleanly as it is, and fail to compile with -DDAFUSE_COMPILE_FAIL with a
# diagnostic containing the text of its "// expect: " line.
set -u
file=$1; shift
[ "$1" = "--" ] && shift
expect=$(sed -n 's|^// expect: ||p' "$file" | head -n 1)
if [ -z "$expect" ]; then echo "FAIL: $file has no '// expect: ' line"; exit 1; fi
if ! out=$("$@" -fsyntax-only "$file" 2>&1); then
  echo "FAIL: $file does not compile without DAFUSE_COMPILE_FAIL:"; echo "$out" | head -n 30; exit 1
fi
if out=$("$@" -fsyntax-only -DDAFUSE_COMPILE_FAIL "$file" 2>&1); then
  echo "FAIL: $file compiled with DAFUSE_COMPILE_FAIL"; exit 1
fi
if ! grep -qF -- "$expect" <<<"$out"; then
  echo "FAIL: $file failed, but without the message: $expect"; echo "$out" | head -n 30; exit 1
fi
echo "ok: $file fails with: $expect"
