#!/usr/bin/env bash
# Two dafuse trees side by side with PyTorch: each configuration on the first tree's dann_bench,
# then the second's, then PyTorch's side once, in turn, ROUNDS rounds; bench/compare.py then
# prints each tree's table against the same PyTorch runs. For "did this change cost speed":
# both builds run in the same minute, which a host whose speed drifts needs.
#   bench/side_by_side.sh FIRST_ROOT SECOND_ROOT OUT_DIR [ROUNDS]
# Each root is a checkout with build/bench/dann_bench built (meson compile -C build
# bench/dann_bench); OUT_DIR gets every run's JSON and log, and first.json / second.json.
# Run it twice with the roots swapped: the later of two runs of a configuration can be slower.
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: bench/side_by_side.sh FIRST_ROOT SECOND_ROOT OUT_DIR [ROUNDS]"
  exit 2
fi
first=$1 second=$2 out=$3 rounds=${4:-3}
if ! [[ "$rounds" =~ ^[1-9][0-9]*$ ]]; then
  echo "bench/side_by_side.sh: ROUNDS takes a count of at least 1, not '$rounds'"
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
for root in "$first" "$second"; do
  if [ ! -x "$root/build/bench/dann_bench" ]; then
    echo "bench/side_by_side.sh: $root/build/bench/dann_bench: not built (meson compile -C build bench/dann_bench)"
    exit 2
  fi
done
mkdir -p "$out"
export OMP_NUM_THREADS=2
one=() two=() torch=()
run() {  # run NAME DIR COMMAND...: its JSON in $out/NAME.$r.$config.json, its log beside it
  local stem="$out/$1.$r.$config" dir=$2
  shift 2
  if ! (cd "$dir" && "$@" --configs "$config" --json "$stem.json" >"$stem.log" 2>&1); then
    cat "$stem.log"
    echo "bench/side_by_side.sh: $* failed on $config (round $r)"
    exit 1
  fi
}
for ((r = 1; r <= rounds; r++)); do
  for config in moons digits-mlp office-head amazon; do
    start=$(date +%s)
    run first "$first" build/bench/dann_bench
    run second "$second" build/bench/dann_bench
    run torch "$here/.." bash bench/pytorch/run.sh --threads 2
    one+=("$out/first.$r.$config.json")
    two+=("$out/second.$r.$config.json")
    torch+=("$out/torch.$r.$config.json")
    echo "round $r/$rounds  $config: $(($(date +%s) - start)) s"
  done
done
echo "=== $first"
python3 "$here/compare.py" "${one[@]}" "${torch[@]}" --json "$out/first.json"
echo "=== $second"
python3 "$here/compare.py" "${two[@]}" "${torch[@]}" --json "$out/second.json"
