#!/usr/bin/env bash
# Networks of dafuse-train's command line, compiled into programs of their own (jit.cpp): the
# cache folder's checks (private, owned), a network compiled once and run from the cache, from a
# --network file too; programs others could have written refused, a damaged one compiled again
# while a second run waits; a killed run's compiler killed with it; the optimizer and schedule
# of such a network. Two real compiles (about 20 CPU-s each); the rest uses stand-in compilers.
# Usage: network_test.sh PATH/TO/dafuse-train SHARED_DATA_DIR
source "$(dirname "$0")/common.sh"

digits=(--source "$shipped/mnist_images.npy" --source-labels "$shipped/mnist_labels.npy"
        --target "$shipped/usps_images.npy" --target-labels "$shipped/usps_labels.npy"
        --steps 60 --eval-every 30 --seed 4 --quiet)
# The cache is private (issue 46). Without DAFUSE_TRAIN_CACHE, XDG_CACHE_HOME and HOME there is
# no shared fallback (a /tmp folder another user could fill); a folder others can write, or
# another user owns, is refused before anything is compiled or run.
out=$(env -u DAFUSE_TRAIN_CACHE -u XDG_CACHE_HOME -u HOME timeout 120 "$exe" "${net[@]}" \
      "${digits[@]}" 2>&1)
rc=$?
if [ $rc -ne 1 ] || ! grep -qF "set DAFUSE_TRAIN_CACHE to a folder of your own" <<<"$out"; then
  echo "FAIL: no cache folder set: expected status 1 and the way out, got $rc:"
  sed 's/^/  | /' <<<"$out" | head -5
  failures=$((failures + 1))
fi
mkdir -m 0777 "$work/open-cache"
export DAFUSE_TRAIN_CACHE=$work/open-cache
expect 1 "expected no write permission for group or others, found mode 0777" -- "${net[@]}" \
  "${digits[@]}"
if [ "$(id -u)" -eq 0 ] && id nobody >/dev/null 2>&1; then
  mkdir -m 0700 "$work/their-cache"
  chown nobody "$work/their-cache"
  export DAFUSE_TRAIN_CACHE=$work/their-cache
  expect 1 "expected it to be owned by you (uid 0), found uid $(id -u nobody)" -- "${net[@]}" \
    "${digits[@]}"
fi
export DAFUSE_TRAIN_CACHE=$work/cache
# A run.hpp left in the cache folder is not compiled in place of dafuse-train's own: the
# generated unit includes its headers by absolute path.
mkdir -m 0700 "$work/cache"
printf '#error a run.hpp in the cache folder was compiled\n' >"$work/cache/run.hpp"
expect 0 "dafuse-train: compiling this network's step (once; cached in $work/cache)" -- \
  "${net[@]}" "${digits[@]}" --json "$work/custom.json" --curves "$work/custom"
# The unit holds the network's registry entry only; the rest of dafuse-train is prebuilt
# (dafuse-train-cli.o) and linked, not compiled again for each network (issue 47).
unit=$(ls "$work/cache"/network-*.cpp 2>/dev/null | head -n 1)
if [ -z "$unit" ] || ! grep -q 'registry.hpp"$' "$unit" || grep -q 'main\.cpp"$' "$unit"; then
  echo "FAIL: the generated unit is not a registry entry alone:"
  sed 's/^/  | /' "${unit:-/dev/null}" | head -12
  failures=$((failures + 1))
fi
# A batch whose step cannot fit is refused by the compiled program too (issue 46).
expect 2 "--batch: expected at most about" -- "${net[@]}" "${digits[@]}" --batch 1000000000 \
  --steps 1
# The plot of a network of the command line is titled with its description, not "custom".
grep -qF "dafuse-train 256-64 tanh, 10 classes" "$work/custom.svg" ||
  { echo "FAIL: the custom network's plot is not titled with its description";
    failures=$((failures + 1)); }
rm -f "$work/cache/run.hpp"
first=$("$exe" "${net[@]}" "${digits[@]}" 2>&1)
if grep -q "compiling" <<<"$first" || ! grep -q "model custom: 60 steps" <<<"$first"; then
  echo "FAIL: the second run of a network did not run from the cache:"
  sed 's/^/  | /' <<<"$first" | head -20
  failures=$((failures + 1))
fi
grep -q '"description": "256-64 tanh, 10 classes (64-32-10 leaky_relu(0.1)), 64-16-1 sigmoid discriminator; fp32, none clip, dann"' \
  "$work/custom.json" || { echo "FAIL: the JSON does not describe the network";
                             grep -o '"model": {[^}]*}' "$work/custom.json";
                             failures=$((failures + 1)); }
printf '# the same network as a file\nfeatures = 256,64:tanh\nclassifier = 64,32,10:leaky_relu=0.1\ndiscriminator = 64,16,1:sigmoid\n' \
  >"$work/custom.net"
from_file=$("$exe" --network "$work/custom.net" "${digits[@]}" 2>&1)
if [ "$(grep -v compiling <<<"$from_file" | grep '^target accuracy')" != \
     "$(grep '^target accuracy' <<<"$first")" ] || grep -q compiling <<<"$from_file"; then
  echo "FAIL: the network from a file is not the same cached program and run:"
  sed 's/^/  | /' <<<"$from_file" | head -20
  failures=$((failures + 1))
fi
[ "$(ls "$work/cache" | grep -c '^network-[0-9a-f]*$')" -eq 1 ] ||
  { echo "FAIL: the cache holds other than one program:"; ls "$work/cache";
    failures=$((failures + 1)); }
# A program others could have written, or another user's, is refused, not run.
program=$work/cache/$(ls "$work/cache" | grep '^network-[0-9a-f]*$' | head -n 1)
chmod g+w "$program"
expect 1 "refused to run this compiled network: expected no write permission for group or others" \
  -- "${net[@]}" "${digits[@]}"
chmod g-w "$program"
if [ "$(id -u)" -eq 0 ] && id nobody >/dev/null 2>&1; then
  chown nobody "$program"
  expect 1 "refused to run this compiled network: expected it to be owned by you" -- \
    "${net[@]}" "${digits[@]}"
  chown 0 "$program"
fi
# The attack of issue 46 itself, by a real second user: `nobody` makes a cache folder and plants
# a program under this network's key there; a root run pointed at that folder refuses it and
# never runs the program. Needs root (to act as nobody) and setpriv.
if [ "$(id -u)" -ne 0 ]; then
  echo "skipped: the planted-program test needs root to act as another user (runs as uid $(id -u))"
elif ! command -v setpriv >/dev/null || ! id nobody >/dev/null 2>&1; then
  echo "skipped: the planted-program test needs setpriv and a user 'nobody'"
else
  chmod 0711 "$work"
  mkdir -m 1777 "$work/shared"
  as_nobody=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
  "${as_nobody[@]}" sh -c 'umask 022 && mkdir "$1/cache" &&
    printf "#!/bin/sh\nid -u >%s/ran\n" "$1" >"$1/cache/$2" && chmod 0755 "$1/cache/$2"' \
    sh "$work/shared" "$(basename "$program")"
  if [ "$(stat -c %U "$work/shared/cache/$(basename "$program")" 2>/dev/null)" != nobody ]; then
    echo "FAIL: nobody could not plant a program for the planted-program test"
    failures=$((failures + 1))
  fi
  DAFUSE_TRAIN_CACHE=$work/shared/cache expect 1 \
    "expected it to be owned by you (uid 0), found uid $(id -u nobody)" -- "${net[@]}" "${digits[@]}"
  # nobody's own run of the network, with root's cache: refused too (not nobody's folder).
  out=$(DAFUSE_TRAIN_CACHE=$work/cache timeout 120 "${as_nobody[@]}" "$exe" "${net[@]}" \
        --source "$shipped/mnist_images.npy" --source-labels "$shipped/mnist_labels.npy" \
        --target "$shipped/usps_images.npy" --steps 5 --quiet 2>&1)
  rc=$?
  if [ -e "$work/shared/ran" ] || [ $rc -eq 0 ]; then
    echo "FAIL: a program another user planted ran, or nobody used root's cache (status $rc):"
    sed 's/^/  | /' <<<"$out" | head -5
    failures=$((failures + 1))
  fi
  chmod 0700 "$work"
fi
# A damaged program (truncated) is discarded, saying so, and compiled again; a second run of the
# network started meanwhile waits for that compile (a lock) and runs the new program. The
# compiler here is a stand-in that copies the program compiled above, after a pause long enough
# for the second run to find the compile under way (its programs have a key of their own).
cp "$program" "$work/compiled-program"
cat >"$work/copycc" <<'CC'
#!/bin/sh
out=; prev=
for a; do [ "$prev" = -o ] && out=$a; prev=$a; done
sleep 3
cp "$(dirname "$0")/compiled-program" "$out"
CC
chmod +x "$work/copycc"
export DAFUSE_TRAIN_CXX=$work/copycc
expect 0 "model custom: 60 steps" -- "${net[@]}" "${digits[@]}"
copied=""
for p in $(ls "$work/cache" | grep '^network-[0-9a-f]*$'); do
  [ "$work/cache/$p" = "$program" ] || copied=$work/cache/$p
done
[ -n "$copied" ] || { echo "FAIL: the stand-in compiler's program is not in the cache";
                      failures=$((failures + 1)); }
truncate -s 4096 "$copied"
"$exe" "${net[@]}" "${digits[@]}" >"$work/damaged.out" 2>&1 &
damaged_run=$!
for _ in $(seq 100); do
  ls "$work/cache" | grep -q '^network-[0-9a-f]*\.[0-9]*\.cpp$' && break
  sleep 0.1
done
waiting=$(timeout 120 "$exe" "${net[@]}" "${digits[@]}" 2>&1)
wait $damaged_run
damaged_rc=$?
if [ $damaged_rc -ne 0 ] || ! grep -qF "damaged (its checksum is crc32" "$work/damaged.out" ||
   ! grep -qF "compiling this network's step" "$work/damaged.out"; then
  echo "FAIL: a truncated program was not discarded and compiled again (status $damaged_rc):"
  sed 's/^/  | /' "$work/damaged.out" | head -8
  failures=$((failures + 1))
fi
if ! grep -qF "another dafuse-train is compiling this network; waiting" <<<"$waiting" ||
   grep -q "compiling this network's step" <<<"$waiting" ||
   ! grep -q "model custom: 60 steps" <<<"$waiting"; then
  echo "FAIL: a run beside the compile did not wait for it and run its program:"
  sed 's/^/  | /' <<<"$waiting" | head -8
  failures=$((failures + 1))
fi
unset DAFUSE_TRAIN_CXX
# A killed dafuse-train takes its compiler with it (the whole process group: here a stand-in
# compiler's child), and the next compile of that network removes the killed one's files. A
# compiler's failure shows its first error line.
printf '%s\n' '#!/bin/sh' \
  "if [ -f '$work/hang' ]; then sleep 300 & echo \$! >'$work/compiler.pid'; wait; fi" \
  'echo "fake.cpp:1:1: error: the stand-in compiler refuses" >&2' 'exit 1' >"$work/fakecc"
chmod +x "$work/fakecc"
touch "$work/hang"
DAFUSE_TRAIN_CXX=$work/fakecc "$exe" "${net[@]}" "${digits[@]}" >/dev/null 2>&1 &
killed=$!
for _ in $(seq 100); do
  [ -s "$work/compiler.pid" ] && break
  sleep 0.1
done
kill -KILL $killed
wait $killed 2>/dev/null
sleep 0.5
# (A killed process left to an init that does not reap is a zombie, state Z: not running.)
if [ ! -s "$work/compiler.pid" ] ||
   ps -o stat= -p "$(cat "$work/compiler.pid")" 2>/dev/null | grep -qv '^Z'; then
  echo "FAIL: the compiler of a killed dafuse-train still runs (or never started)"
  failures=$((failures + 1))
fi
rm -f "$work/hang"
export DAFUSE_TRAIN_CXX=$work/fakecc
expect 1 "exited with 1: fake.cpp:1:1: error: the stand-in compiler refuses" -- "${net[@]}" \
  "${digits[@]}"
unset DAFUSE_TRAIN_CXX
if ls "$work/cache" | grep -q "\.$killed\(\.cpp\|\.log\)\?$"; then
  echo "FAIL: the killed run's files are still in the cache:"
  ls "$work/cache"
  failures=$((failures + 1))
fi
# The optimizer, schedule and weight decay of a network of one's own (issue 47): an unknown one
# is refused before compiling; Adam with a constant schedule compiles, trains and says so.
expect 2 "--optim: expected one of sgd, adam, adamw, found 'rmsprop'" -- "${net[@]}" \
  --optim rmsprop "${digits[@]}"
expect 2 "--schedule: expected one of ganin, tllib, constant, found 'cosine'" -- "${net[@]}" \
  --schedule cosine "${digits[@]}"
expect 2 "--weight-decay" -- "${net[@]}" --weight-decay -1 "${digits[@]}"
export DAFUSE_TRAIN_CACHE=$work/optim-cache
expect 0 "model custom: 60 steps" -- --features 256,32 --classifier 32,10 --optim adam \
  --schedule constant --lr 0.001 --weight-decay 0.01 "${digits[@]}" --json "$work/adam.json"
grep -qF '"weight_decay": 0.01' "$work/adam.json" &&
  grep -qF 'dann, adam, constant schedule"' "$work/adam.json" ||
  { echo "FAIL: the JSON does not say Adam, the constant schedule and the weight decay";
    grep -o '"description": "[^"]*"' "$work/adam.json"; failures=$((failures + 1)); }
unset DAFUSE_TRAIN_CACHE

finish "compiled-network"
