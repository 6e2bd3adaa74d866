#!/usr/bin/env bash
# An example's command line is checked before anything runs: --help prints the usage and exits 0;
# a misspelt option, an option without its value and a bad count exit 2 with a message naming
# them (none of them may start the long default run).
exe=$1
fail() { echo "FAIL: $exe $*"; exit 1; }
expect() {  # expect CODE TEXT ARGS...: exit status CODE, TEXT in stdout + stderr
  local code=$1 text=$2; shift 2
  out=$(timeout 20 "$exe" "$@" 2>&1); rc=$?
  [ "$rc" = "$code" ] || fail "$*: exit $rc, expected $code (output: $out)"
  [[ "$out" == *"$text"* ]] || fail "$*: no '$text' in: $out"
}
expect 0 "usage: $exe [--" --help
expect 2 "unknown option '--sedes'" --sedes 1
expect 2 "unknown option 'seeds'" seeds 1
expect 2 "--steps: expected a value after it" --seeds 1 --steps
expect 2 "--seeds: expected a positive integer, found 'x'" --seeds x
echo "ok: $exe"
