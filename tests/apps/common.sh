# The helpers dafuse-train's test scripts share (sourced by dafuse_train_test.sh and
# network_test.sh): their arguments, a private work folder, expect, the shipped digits, the
# network of one's own and the summary line.
set -uo pipefail
exe=$1
data=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
# A network compiled by mistake lands here, never in the user's own cache.
export XDG_CACHE_HOME=$work/xdg-cache
shipped=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/data/jda_mnist_usps
# A network of one's own on the command line (the CLI's refusals and the compiled-network checks).
net=(--features 256,64:tanh --classifier 64,32,10:leaky_relu=0.1 --discriminator 64,16,1:sigmoid)

# expect STATUS TEXT -- ARGS...: the run exits with STATUS and its output contains TEXT.
expect() {
  local status=$1 text=$2
  shift 3
  local out rc
  # Bounded: a run that blocks (a FIFO read, a lock) fails as status 124 instead of hanging.
  out=$(timeout 120 "$exe" "$@" 2>&1)
  rc=$?
  if [ "$rc" -ne "$status" ] || ! grep -qF -- "$text" <<<"$out"; then
    echo "FAIL: dafuse-train $*"
    echo "  expected status $status and '$text', got status $rc:"
    sed 's/^/  | /' <<<"$out" | head -20
    failures=$((failures + 1))
  fi
}

# finish: the summary line, and the status (1 if any check failed).
finish() {
  if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed"
    exit 1
  fi
  echo "all $1 checks passed"
}
