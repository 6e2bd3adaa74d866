#!/usr/bin/env bash
# Usage: cpu_check.sh PROGRAM.cpp -- COMPILER [FLAGS...]
# Builds PROGRAM (a main that includes dafuse.hpp) twice: for this CPU (-march=native), which
# must run and exit 0; and with one x86 extension this CPU lacks added, which must exit 1 before
# main with the dafuse: message naming that extension. Skips (77) on a CPU that has every
# extension tried, or that is not x86.
set -u
program=$1; shift 2
flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null) || { echo "skip: no /proc/cpuinfo"; exit 77; }
missing=""
# -m option : the extension's name in /proc/cpuinfo and in the dafuse: message
for pair in avx512fp16:avx512_fp16 avxvnni:avx_vnni avx512bf16:avx512_bf16 avx512vnni:avx512_vnni \
            avx512f:avx512f avx2:avx2; do
  if ! grep -qw "${pair#*:}" <<<"$flags"; then missing=$pair; break; fi
done
[ -n "$missing" ] || { echo "skip: this CPU has every extension tried"; exit 77; }
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
"$@" -march=native -O0 "$program" -o "$dir/native" || exit 1
"$dir/native" || { echo "FAIL: built for this CPU, the program exits with $?"; exit 1; }
"$@" -march=native "-m${missing%%:*}" -O0 "$program" -o "$dir/newer" || exit 1
out=$("$dir/newer" 2>&1); status=$?
if [ $status -ne 1 ] || ! grep -q "dafuse: this program was compiled for CPU instructions.*${missing#*:}" <<<"$out"
then
  echo "FAIL: built with -m${missing%%:*}, status $status, output:"; echo "$out"; exit 1
fi
if grep -q "main ran" <<<"$out"; then echo "FAIL: main ran before the check"; exit 1; fi
echo "ok: -m${missing%%:*} stops before main: $out"
