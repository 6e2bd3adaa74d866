#!/usr/bin/env bash
# dafuse-train's command line: --help and --list, every refused command line (exit 2) and bad
# data (exit 1) with a message naming the option or file, then a short real run whose JSON,
# curves, trace and checkpoints are checked, a resume from its checkpoint (after --stop-after
# and after a signal), signals (exit 128 + signal), a run that diverges (exit 3), the row
# counts, selection without held-out rows, the versioned JSON, the plot's marker and panels, and
# a target test set. Networks of the command line compiled and cached: network_test.sh.
# Usage: dafuse_train_test.sh PATH/TO/dafuse-train SHARED_DATA_DIR
source "$(dirname "$0")/common.sh"

expect 0 "usage: dafuse-train" -- --help
expect 0 "digits-dann-bf16" -- --help
expect 0 "amazon-source-only" -- --list
expect 0 "kernels chosen: " -- --version  # "when compiled", or (-Dcpu=portable) at start-up
expect 0 "fp32 products: " -- --version
expect 2 "unknown option '--stpes'" -- --stpes 10
expect 2 "--steps: expected an integer >= 1, found 'ten'" -- --steps ten
expect 2 "--lr: expected a finite number > 0, found 'nan'" -- --lr nan
# Negative values are refused, never silently replaced by the model's defaults.
expect 2 "--lr: expected a finite number > 0, found '-0.1'" -- --lr -0.1
expect 2 "--momentum: expected a finite number >= 0, found '-0.5'" -- --momentum -0.5
expect 2 "--lambda-max: expected a finite number >= 0, found '-1'" -- --lambda-max -1
expect 2 "--max-grad-norm: expected a finite number > 0, found '0'" -- --max-grad-norm 0
expect 2 "--seed: expected a value after it" -- --seed
expect 2 "--model: expected a model name" -- --source a.npy --target b.npy
expect 2 "--validator: expected one of source_accuracy, entropy, im, snd, dev, pad, bnm, mano, ensv, found \"best\"" \
  -- --validator best
expect 2 "--validation-fraction: expected a fraction in [0, 1)" -- --model moons-dann \
  --source a.npy --target b.npy --validation-fraction 1
expect 2 "--target-test-labels: expected --target-test" -- --model moons-dann --source a.npy \
  --target b.npy --target-test-labels c.npy
expect 2 "unexpected argument 'stray'" -- stray
expect 2 "--model: expected one of digits-dann" -- --model nope --source a.npy --target b.npy
expect 2 "--source-labels: expected the source labels" -- --model moons-dann --source a.npy \
  --target b.npy
expect 1 "missing.npy" -- --model moons-dann --source "$work/missing.npy" \
  --source-labels "$work/missing_labels.npy" --target "$work/missing.npy"
printf 'not an array' >"$work/text.npy"
expect 1 "$work/text.npy" -- --model moons-dann --source "$work/text.npy" \
  --source-labels "$work/text.npy" --target "$work/text.npy"
expect 1 "expected a CSR prefix" -- --model amazon-dann --source "$work/text.npy" \
  --target "$work/text.npy"

# Networks of any width: refused descriptions (exit 2, nothing compiled). Compiling and caching
# them: network_test.sh.
expect 2 "--features: expected widths W0,W1,... (integers in [1, 1000000])" -- \
  --features 256,abc --classifier 64,10 --source a.npy --target b.npy
# Bounds checked before anything is compiled: depth, and parameters that cannot fit in memory.
expect 2 "--features: expected at most 64 layers (65 widths), found 65" -- \
  --features "256$(printf ',8%.0s' $(seq 65))" --classifier 8,10 --source a.npy --target b.npy
expect 2 "parameters (with their gradients and momentum, 12 bytes each) fit this machine's memory" \
  -- --features 1000000,1000000 --classifier 1000000,10 --source a.npy --target b.npy
expect 2 "--features activation: expected one of identity, relu, leaky_relu, sigmoid, tanh, found 'swish'" \
  -- --features 256,64:swish --classifier 64,10 --source a.npy --target b.npy
expect 2 "--classifier: expected the input width 64 (G_f's output), found 32" -- \
  --features 256,64 --classifier 32,10 --source a.npy --target b.npy
expect 2 "--classifier: expected at least 2 classes" -- --features 256,64 --classifier 64,1 \
  --source a.npy --target b.npy
expect 2 "--discriminator: expected one output (the domain logit), found 2" -- \
  --features 256,64 --classifier 64,10 --discriminator 64,2 --source a.npy --target b.npy
expect 2 "--discriminator: expected the input width 640 (G_f's output × the classes" -- \
  --features 256,64 --classifier 64,10 --discriminator 64,1 --head cdan --source a.npy \
  --target b.npy
expect 2 "--classifier: a single layer has no hidden layer to activate" -- \
  --features 256,64 --classifier 64,10:tanh --source a.npy --target b.npy
expect 2 "--head: expected one of dann, source_only, cdan, cdan_e, coral, mmd, mmd_linear, mcc, cdan_e+mcc, mdd, found 'jan'" -- \
  --features 256,64 --classifier 64,10 --head jan --source a.npy --target b.npy
expect 2 "--discriminator: expected 10 outputs (mdd's G_d is the adversarial classifier" -- \
  --features 256,64 --classifier 64,10 --discriminator 64,1 --head mdd --source a.npy \
  --target b.npy
expect 2 "--features: expected leaky_relu=SLOPE with a finite SLOPE > 0" -- \
  --features 256,64:leaky_relu=-1 --classifier 64,10 --source a.npy --target b.npy
expect 2 "--model: expected either a registry model or a network" -- --model digits-dann \
  "${net[@]}" --source a.npy --target b.npy
expect 2 "--sparse, --precision, --clip, --head, --optim and --schedule: expected with a network of your own" -- \
  --model digits-dann --precision bf16 --source a.npy --target b.npy
printf 'features = 256,64\nwidth = 3\n' >"$work/bad.net"
expect 2 "$work/bad.net:2: expected a key features, classifier" -- --network "$work/bad.net" \
  --source a.npy --target b.npy
# Two outputs to one file are refused before training, naming both options (issue 46).
expect 2 "--save-model and --predictions: expected different files, found both 'out.x'" -- \
  --model digits-dann --source a.npy --target b.npy --save-model out.x --predictions ./out.x
expect 2 "--checkpoint and --json: expected different files" -- --model digits-dann \
  --source a.npy --target b.npy --checkpoint run.ckpt --json run.ckpt
# --network reads a regular file of at most 64 KiB: a FIFO is refused at once (not waited on),
# /dev/zero and a folder by name, a huge file by its size (issue 46).
mkfifo "$work/net.fifo"
expect 2 "--network $work/net.fifo: cannot read: it is a FIFO" -- --network "$work/net.fifo" \
  --source a.npy --target b.npy
expect 2 "--network /dev/zero: cannot read: it is a character device" -- --network /dev/zero \
  --source a.npy --target b.npy
expect 2 "--network $work: cannot open for reading: it is a directory" -- --network "$work" \
  --source a.npy --target b.npy
head -c 70000 /dev/zero | tr '\0' '#' >"$work/huge.net"
expect 2 "expected a description of at most 65536 bytes, found 70000" -- \
  --network "$work/huge.net" --source a.npy --target b.npy

# --sweep: bad grids and options a grid cannot share are refused, naming the option (exit 2).
expect 2 "--sweep: expected KEY=V1,V2,... with KEY lambda_max, lr or seeds" -- --model digits-dann \
  --source a.npy --target b.npy --validator entropy --sweep momentum=0.9
expect 2 "--sweep: expected KEY=V1,V2,..." -- --sweep lr
expect 2 "--sweep lr: expected a comma-separated list of values, found none" -- --sweep lr=
expect 2 "--sweep lr: expected a comma-separated list of values, found an empty value in '0.1,,0.2'" \
  -- --sweep lr=0.1,,0.2
expect 2 "--sweep lr: expected a finite number > 0, found '-0.1'" -- --sweep lr=0.01,-0.1
expect 2 "--sweep lambda_max: expected a finite number >= 0, found 'x'" -- --sweep lambda_max=1,x
expect 2 "--sweep seeds: expected an integer >= 0, found '1.5'" -- --sweep seeds=1,1.5
expect 2 "--sweep lr: expected distinct values, found 0.010 twice" -- --sweep lr=0.01,0.010
expect 2 "--sweep lr: expected once, found a second list '0.1'" -- --sweep lr=0.01 --sweep lr=0.1
expect 2 "--validator: expected with --sweep (the label-free validator that chooses the configuration: source_accuracy, entropy, im, snd, dev, pad, bnm, mano, ensv or reverse)" \
  -- --model digits-dann --source a.npy --target b.npy --sweep lr=0.01,0.03
expect 2 "--checkpoint: not with --sweep" -- --model digits-dann --source a.npy --target b.npy \
  --sweep lr=0.01,0.03 --validator entropy --checkpoint x.ckpt
expect 2 "--eval-every: not with --sweep" -- --model digits-dann --source a.npy --target b.npy \
  --sweep lr=0.01,0.03 --validator entropy --eval-every 10
expect 2 "--sweep-parallel: expected with --sweep" -- --model digits-dann --source a.npy \
  --target b.npy --sweep-parallel 2
expect 2 "--sweep-parallel: expected an integer >= 1, found '0'" -- --sweep-parallel 0

# A sweep on the digits shipped in data/: the validator's choice and the oracle's, labelled; the
# same grid one training at a time gives the same table (each training is one thread either way).
sweep=(--model digits-dann --source "$shipped/mnist_images.npy"
       --source-labels "$shipped/mnist_labels.npy" --target "$shipped/usps_images.npy"
       --target-labels "$shipped/usps_labels.npy" --steps 40 --validation-fraction 0
       --validator im --sweep lambda_max=0,1 --sweep seeds=1,2 --quiet)
expect 0 "selected by im (label-free): lambda_max" -- "${sweep[@]}" --json "$work/sweep.json"
parallel=$("$exe" "${sweep[@]}" --threads 1 2>&1)
serial=$("$exe" "${sweep[@]}" --sweep-parallel 1 2>&1)
if ! grep -q "^oracle (chosen with target labels" <<<"$parallel" ||
    ! grep -q "1 at a time on 1 thread(s) each" <<<"$serial" ||
    [ "$(grep '^|' <<<"$parallel")" != "$(grep '^|' <<<"$serial")" ] ||
    [ "$(grep -c '^| [01] | 0.03 |' <<<"$parallel")" -ne 2 ]; then
  echo "FAIL: a sweep's table, choices or plan:"
  sed 's/^/  | /' <<<"$parallel$serial" | head -30
  failures=$((failures + 1))
fi
if command -v python3 >/dev/null; then
  python3 - "$work/sweep.json" <<'PY' || failures=$((failures + 1))
import json, sys
j = json.load(open(sys.argv[1]))
problems = []
if j["mode"] != "sweep" or j["selected_by"] != "im": problems.append("mode or validator")
if j["selected_with_target_labels"] is not False or j["oracle_uses_target_labels"] is not True:
    problems.append("labels of the choices")
if len(j["runs"]) != 4 or len(j["configurations"]) != 2: problems.append("sizes")
if j["plan"]["concurrent"] * j["plan"]["threads_per_training"] > j["plan"]["processors"]:
    problems.append("oversubscribed plan %r" % j["plan"])
best = max(range(2), key=lambda c: j["configurations"][c]["score"])
if j["selected"]["configuration"] != best: problems.append("the selection is not the best IM")
oracle = max(range(2), key=lambda c: j["configurations"][c]["target_accuracy_oracle"])
if j["oracle"]["configuration"] != oracle: problems.append("the oracle is not the best accuracy")
for c in range(2):
    runs = [r for r in j["runs"] if r["configuration"] == c]
    mean = sum(r["score"] for r in runs) / len(runs)
    if abs(mean - j["configurations"][c]["score"]) > 1e-9 * abs(mean): problems.append("mean")
for p in problems: print("FAIL: sweep JSON:", p)
sys.exit(1 if problems else 0)
PY
fi
# EnsV scores a grid's trainings against their ensemble once all have finished: refused without
# --sweep (as selector or among --validators); with it, each run's score is its agreement with
# the ensemble, a fraction of the kept rows, and the choice is the best mean over the seeds.
expect 2 "--validator ensv: expected with --sweep (ensv scores each training of a grid by its agreement" \
  -- --model digits-dann --source a.npy --target b.npy --validator ensv
expect 2 "--validators ensv: expected with --sweep" -- --model digits-dann --source a.npy \
  --target b.npy --validators entropy,ensv
expect 0 "selected by ensv (label-free): lambda_max" -- --model digits-dann \
  --source "$shipped/mnist_images.npy" --source-labels "$shipped/mnist_labels.npy" \
  --target "$shipped/usps_images.npy" --target-labels "$shipped/usps_labels.npy" --steps 40 \
  --validation-fraction 0 --validator ensv --validators im --sweep lambda_max=0.1,1 \
  --sweep seeds=1,2 --quiet --json "$work/ensv.json"
if command -v python3 >/dev/null; then
  python3 - "$work/ensv.json" <<'PY' || failures=$((failures + 1))
import json, sys
j = json.load(open(sys.argv[1]))
problems = []
if j["selected_by"] != "ensv" or j["config"]["validator"] != "ensv": problems.append("name")
kept = j["kept_predictions"]
# The shipped USPS has 1800 rows (< --validator-rows 2000): 4 bytes x 10 classes x 1800 rows each.
if kept != {"trainings": 4, "classes": 10, "rows": 1800, "bytes_per_training": 72000,
            "bytes": 288000}: problems.append("kept predictions %r" % kept)
for r in j["runs"]:
    s = r["scores"]
    if s["ensv"] != r["score"] or not 0 <= r["score"] <= 1: problems.append("run %r" % r)
    if abs(r["score"] * 1800 - round(r["score"] * 1800)) > 1e-6: problems.append("not k/1800")
    if s["im"] is None or s["entropy"] is not None: problems.append("scores %r" % s)
for c in range(2):
    runs = [r for r in j["runs"] if r["configuration"] == c]
    mean = sum(r["score"] for r in runs) / len(runs)
    conf = j["configurations"][c]
    if abs(mean - conf["score"]) > 1e-9 or conf["scores"]["ensv"] != conf["score"]:
        problems.append("mean of configuration %d" % c)
best = max(range(2), key=lambda c: j["configurations"][c]["score"])  # the first of equals
if j["selected"]["configuration"] != best: problems.append("the choice is not the best mean")
for p in problems: print("FAIL: ensv sweep JSON:", p)
sys.exit(1 if problems else 0)
PY
fi
# A training that diverges is left out of the ensemble; the other is chosen.
expect 0 "ensv: the ensemble of 1 training(s)' predictions on 1800 target rows (72000 bytes kept); 1 left out (diverged or not finite)" \
  -- --model digits-dann --source "$shipped/mnist_images.npy" \
  --source-labels "$shipped/mnist_labels.npy" --target "$shipped/usps_images.npy" --steps 100 \
  --validation-fraction 0 --sweep lr=0.03,1e6 --validator ensv --quiet
# Reverse validation chooses among a grid's configurations (a reverse training per run), not
# among one run's evaluations; each run's score is a source accuracy in [0, 1].
expect 2 "--validator reverse: expected with --sweep (reverse validation trains a reverse model" \
  -- --model digits-dann --source a.npy --target b.npy --validator reverse
expect 0 "selected by reverse (label-free): lambda_max" -- --model digits-dann \
  --source "$shipped/mnist_images.npy" --source-labels "$shipped/mnist_labels.npy" \
  --target "$shipped/usps_images.npy" --target-labels "$shipped/usps_labels.npy" --steps 40 \
  --validator reverse --sweep lambda_max=0,1 --quiet --json "$work/reverse.json"
if command -v python3 >/dev/null; then
  python3 - "$work/reverse.json" <<'PY' || failures=$((failures + 1))
import json, sys
j = json.load(open(sys.argv[1]))
problems = []
if j["selected_by"] != "reverse" or j["config"]["validator"] != "reverse": problems.append("name")
scores = [r["score"] for r in j["runs"]]
if len(scores) != 2 or not all(0 <= x <= 1 for x in scores): problems.append("scores %r" % scores)
best = max(range(2), key=lambda c: j["configurations"][c]["score"])
if j["selected"]["configuration"] != best: problems.append("the choice is not the best score")
for p in problems: print("FAIL: reverse validation sweep JSON:", p)
sys.exit(1 if problems else 0)
PY
fi
# The CNN entries: listed with their image shape; data of another shape refused before it is read
# (exit 1, naming the file and the shapes expected), even when it has the width; then short runs
# on the shipped digits ([N, 16, 16]) and on [N, 16, 16, 1] images.
# npy FILE SHAPE [DESCR]: an NPY file of zeros of SHAPE, a Python tuple such as "(4, 256)", and
# dtype DESCR (default '<f4'; the digits after the kind are the element's bytes).
npy() {
  local descr=${3:-<f4}
  local header="{'descr': '$descr', 'fortran_order': False, 'shape': $2, }"
  local length=$(( (10 + ${#header} + 1 + 63) / 64 * 64 - 10 ))
  local count=$(( $(tr -d '() ' <<<"$2" | sed 's/,$//; s/,/*/g') ))
  {
    printf '\x93NUMPY\x01\x00'
    printf "\\$(printf %03o $((length % 256)))\\$(printf %03o $((length / 256)))"
    printf '%-*s\n' $((length - 1)) "$header"
    head -c $((${descr:2} * count)) /dev/zero
  } >"$1"
}
npy "$work/flat.npy" "(4, 256)"
# Data that does not fit a network of the command line is refused before anything is compiled
# (issue 47), from the options and the NPY headers and labels: the cache folder is never created,
# a stand-in compiler that leaves a mark never runs, and each refusal takes under 5 s (milliseconds
# on a quiet machine).
printf '%s\n' '#!/bin/sh' "touch '$work/compiled'" 'exit 1' >"$work/markcc"
chmod +x "$work/markcc"
npy "$work/float_labels.npy" "(2000,)" "<f4"
npy "$work/short_labels.npy" "(1999,)" "<i4"
npy "$work/labels4.npy" "(4,)" "<i4"
npy "$work/rgb4.npy" "(4, 16, 16, 3)"
export DAFUSE_TRAIN_CACHE=$work/precheck-cache DAFUSE_TRAIN_CXX=$work/markcc
refused() {  # refused STATUS TEXT -- ARGS...: as expect, and quickly, compiling nothing
  local start=$SECONDS
  expect "$@"
  if [ $((SECONDS - start)) -ge 5 ] || [ -e "$work/compiled" ] || [ -e "$DAFUSE_TRAIN_CACHE" ]; then
    echo "FAIL: a mistake took $((SECONDS - start)) s or compiled something: ${*:4}"
    failures=$((failures + 1))
  fi
  rm -rf "$work/compiled" "$DAFUSE_TRAIN_CACHE"
}
fit=(--source "$shipped/mnist_images.npy" --source-labels "$shipped/mnist_labels.npy"
     --target "$shipped/usps_images.npy" --target-labels "$shipped/usps_labels.npy")
refused 1 "mnist_images.npy: feature width: expected 255 (--features 255,64: the network reads rows of 255 features), found 256 (source features of shape (2000, 16, 16))" \
  -- --features 255,64 --classifier 64,10 "${fit[@]}"
refused 1 "mnist_labels.npy: labels[" -- --features 256,64 --classifier 64,9 "${fit[@]}"
refused 1 "expected a class in [0, 9) (--classifier 64,9: 9 classes; the labels of" -- \
  --features 256,64 --classifier 64,9 "${fit[@]}"
refused 1 "float_labels.npy: descr: expected an integer type" -- --features 256,64 \
  --classifier 64,10 --source "$shipped/mnist_images.npy" --source-labels "$work/float_labels.npy" \
  --target "$shipped/usps_images.npy"
refused 1 "short_labels.npy: shape: expected [2000] to match" -- --features 256,64 \
  --classifier 64,10 --source "$shipped/mnist_images.npy" --source-labels "$work/short_labels.npy" \
  --target "$shipped/usps_images.npy"
refused 1 "rgb4.npy: feature width: expected 256 (--features 256,64" -- --features 256,64 \
  --classifier 64,10 "${fit[@]}" --target-test "$work/rgb4.npy" --target-test-labels "$work/labels4.npy"
refused 1 "$work/missing.npy: cannot open" -- --features 256,64 --classifier 64,10 \
  --source "$shipped/mnist_images.npy" --source-labels "$shipped/mnist_labels.npy" \
  --target "$work/missing.npy"
refused 2 "--source-labels: expected the source labels" -- --features 256,64 --classifier 64,10 \
  --source "$shipped/mnist_images.npy" --target "$shipped/usps_images.npy"
unset DAFUSE_TRAIN_CACHE DAFUSE_TRAIN_CXX
npy "$work/rgb.npy" "(4, 16, 16, 3)"
npy "$work/wide.npy" "(4, 8, 32)"
npy "$work/nhwc.npy" "(40, 16, 16, 1)"
cnn=(--source "$shipped/mnist_images.npy" --source-labels "$shipped/mnist_labels.npy" --quiet)
expect 0 "input 16x16x1 images (NPY [N, H, W(, C)])" -- --list
expect 1 "$work/flat.npy: shape: expected images (N, 16, 16) or (N, 16, 16, 1) (model digits-cnn-dann reads 16 x 16 x 1 images, channels last), found (4, 256)" \
  -- --model digits-cnn-dann --source "$work/flat.npy" --source-labels "$shipped/mnist_labels.npy" \
  --target "$shipped/usps_images.npy"
expect 1 "$work/rgb.npy: shape: expected images (N, 16, 16) or (N, 16, 16, 1)" -- \
  --model digits-cnn-source-only "${cnn[@]}" --target "$work/rgb.npy"
expect 1 "$work/wide.npy: shape: expected images (N, 16, 16) or (N, 16, 16, 1)" -- \
  --model digits-cnn-dann "${cnn[@]}" --target "$shipped/usps_images.npy" \
  --target-test "$work/wide.npy" --target-test-labels "$shipped/usps_labels.npy"
expect 0 "model digits-cnn-dann: 20 steps" -- --model digits-cnn-dann "${cnn[@]}" \
  --target "$shipped/usps_images.npy" --target-labels "$shipped/usps_labels.npy" --steps 20 \
  --seed 2 --json "$work/cnn.json" --predictions "$work/cnn_classes.npy"
grep -q '"width": 256, "image": \[16, 16, 1\]' "$work/cnn.json" ||
  { echo "FAIL: the CNN's JSON does not give its image shape"; failures=$((failures + 1)); }
[ "$(stat -c %s "$work/cnn_classes.npy" 2>/dev/null)" = $((128 + 4 * 1800)) ] ||
  { echo "FAIL: the CNN's predictions are not 1800 int32 classes"; failures=$((failures + 1)); }
expect 0 "model digits-cnn-source-only: 10 steps" -- --model digits-cnn-source-only "${cnn[@]}" \
  --target "$work/nhwc.npy" --steps 10
# MDD's G_d is the adversarial classifier f' (10 logits): the registry entry and --head mdd train.
expect 0 "model digits-mdd: 40 steps" -- --model digits-mdd "${cnn[@]}" \
  --target "$shipped/usps_images.npy" --target-labels "$shipped/usps_labels.npy" --steps 40

# NumPy's defaults (issue 47): np.save of float64 features and int64 labels trains as it is,
# saying so in one line a file, to the same checkpoint as the float32 + int32 files; float labels,
# an int64 label beyond int32 and a dtype no loader reads are refused with the numpy call that
# fixes them. retype SRC DST DESCR rewrites an NPY file in another dtype (Python without numpy).
retype() {
  python3 - "$@" <<'PY'
import array, ast, sys
src, dst, descr = sys.argv[1:]
data = open(src, "rb").read()
length = int.from_bytes(data[8:10], "little")
head = ast.literal_eval(data[10:10 + length].decode())
codes = {"<f4": "f", "<f8": "d", "<i4": "i", "<i8": "q", "<u2": "H", "|u1": "B"}
values = array.array(codes[head["descr"]], data[10 + length:]).tolist()
if descr[1] not in "f":
    values = [int(v) for v in values]
out = array.array(codes[descr], values)
text = "{'descr': '%s', 'fortran_order': False, 'shape': %r, }" % (descr, head["shape"])
text += " " * ((64 - (10 + len(text) + 1) % 64) % 64) + "\n"
open(dst, "wb").write(b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text.encode()
                      + out.tobytes())
PY
}
if command -v python3 >/dev/null; then
  retype "$shipped/mnist_images.npy" "$work/x64.npy" "<f8"
  retype "$shipped/mnist_labels.npy" "$work/y64.npy" "<i8"
  retype "$shipped/usps_images.npy" "$work/t64.npy" "<f8"
  numpy_run=(--model digits-dann --target-labels "$shipped/usps_labels.npy" --steps 20 --seed 6)
  out=$(timeout 120 "$exe" "${numpy_run[@]}" --source "$work/x64.npy" --source-labels \
        "$work/y64.npy" --target "$work/t64.npy" --quiet --checkpoint "$work/f64.ckpt" 2>&1)
  rc=$?
  for line in "$work/x64.npy: float64 converted to float32" \
              "$work/y64.npy: int64 converted to int32" "$work/t64.npy: float64 converted to float32" \
              "model digits-dann: 20 steps"; do
    if [ $rc -ne 0 ] || ! grep -qF -- "$line" <<<"$out"; then
      echo "FAIL: float64 features and int64 labels: expected status 0 and '$line', got $rc:"
      sed 's/^/  | /' <<<"$out" | head -10
      failures=$((failures + 1))
    fi
  done
  timeout 120 "$exe" "${numpy_run[@]}" --source "$shipped/mnist_images.npy" --source-labels \
    "$shipped/mnist_labels.npy" --target "$shipped/usps_images.npy" --quiet \
    --checkpoint "$work/f32.ckpt" >/dev/null 2>&1
  cmp -s "$work/f32.ckpt" "$work/f64.ckpt" ||
    { echo "FAIL: float64 + int64 files train otherwise than float32 + int32"; failures=$((failures + 1)); }
  npy "$work/y_f8.npy" "(2000,)" "<f8"
  expect 1 "$work/y_f8.npy: descr: expected an integer type ('|i1' to '<i8', '|u1' to '<u8'), found '<f8' (float64): labels must be integers; convert with y.astype(np.int32)" \
    -- "${numpy_run[@]}" --source "$work/x64.npy" --source-labels "$work/y_f8.npy" \
    --target "$work/t64.npy"
  python3 -c 'import sys; d = bytearray(open(sys.argv[1], "rb").read()); d[-8 * 1990:-8 * 1989] = (2**33).to_bytes(8, "little"); open(sys.argv[2], "wb").write(d)' \
    "$work/y64.npy" "$work/y_big.npy"
  expect 1 "$work/y_big.npy: labels[10]: expected a value in int32's range [-2147483648, 2147483647], found 8589934592" \
    -- "${numpy_run[@]}" --source "$work/x64.npy" --source-labels "$work/y_big.npy" \
    --target "$work/t64.npy"
  npy "$work/x_c8.npy" "(2000, 256)" "<c8"
  expect 1 "$work/x_c8.npy: descr: expected a float or integer type ('<f4', '<f8', '|i1' to '<i8', '|u1' to '<u8'; '>' for big-endian), found '<c8' (complex); convert with x.astype(np.float32)" \
    -- "${numpy_run[@]}" --source "$work/x_c8.npy" --source-labels "$work/y64.npy" \
    --target "$work/t64.npy"
fi

# The model you save is the model you scored (issue 47): the accuracy the run prints beside
# --save-model and --predictions is the saved model's. The predictions file, scored here against
# the test labels, equals the printed figure, the predictions line's and the JSON's saved_model.
# Seed 2 selects step 150 of 300 on this machine, so both models are printed, labelled.
if command -v python3 >/dev/null; then
  timeout 120 "$exe" --model digits-dann --source "$shipped/mnist_images.npy" \
    --source-labels "$shipped/mnist_labels.npy" --target "$shipped/usps_images.npy" \
    --target-test "$shipped/usps_images.npy" --target-test-labels "$shipped/usps_labels.npy" \
    --steps 300 --eval-every 50 --seed 2 --quiet --save-model "$work/saved.npz" \
    --predictions "$work/saved_classes.npy" --json "$work/saved.json" >"$work/saved.out" 2>&1
  python3 - "$?" "$work/saved.out" "$work/saved_classes.npy" "$shipped/usps_labels.npy" \
    "$work/saved.json" <<'PY' ||
import array, json, re, sys
status, out = sys.argv[1], open(sys.argv[2]).read()
def npy(path):
    data = open(path, "rb").read()
    length = int.from_bytes(data[8:10], "little")
    assert b"'<i4'" in data[10:10 + length], path
    return array.array("i", data[10 + length:])
problems = []
try:
    predicted, labels = npy(sys.argv[3]), npy(sys.argv[4])
    accuracy = sum(p == y for p, y in zip(predicted, labels)) / len(labels)
    saved = json.load(open(sys.argv[5]))["result"]["saved_model"]
except (OSError, ValueError, KeyError, AssertionError) as e:
    problems.append("status %s, %r" % (status, e))
else:
    if status != "0": problems.append("status " + status)
    if len(predicted) != len(labels): problems.append("%d predictions" % len(predicted))
    line = re.search(r"^target test accuracy: (?:selected model )?([0-9.]+) %", out, re.M)
    if not line or line.group(1) != "%.2f" % (100 * accuracy):
        problems.append("printed %s %%, the predictions score %.4f %%"
                        % (line and line.group(1), 100 * accuracy))
    step = re.search(r"^model file: .*\(the selected model, step ([0-9]+)\)", out, re.M)
    if not step or int(step.group(1)) != saved["step"] or saved["model"] != "selected":
        problems.append("the saved model's step: %r, JSON %r" % (step and step.group(1), saved))
    if "; %.2f %% correct)" % (100 * accuracy) not in out: problems.append("predictions line")
    if saved["step"] != 300 and not re.search(r"^target test accuracy: selected model .*, last step "
                                              r"[0-9.]+ % \(step 300\)", out, re.M):
        problems.append("the last step's accuracy is not printed apart, labelled")
    if abs(saved["target_test_accuracy"] - accuracy) > 1e-9: problems.append("JSON %r" % saved)
for p in problems: print("FAIL: the saved model against the printed accuracy:", p)
if problems: print(out)
sys.exit(1 if problems else 0)
PY
    failures=$((failures + 1))
fi

mnist=$data/jda_mnist_usps
if [ ! -f "$mnist/mnist_images.npy" ]; then
  echo "no shared data in $data: data-dependent checks skipped"
  [ "$failures" -eq 0 ] && exit 77 || exit 1
fi
src=(--source "$mnist/mnist_images.npy" --source-labels "$mnist/mnist_labels.npy")
tgt=(--target "$mnist/usps_images.npy" --target-labels "$mnist/usps_labels.npy")
# Mismatched data: labels of another set, a network of another width, a truncated file.
expect 1 "mnist_images.npy" -- --model digits-dann --source "$mnist/mnist_images.npy" \
  --source-labels "$mnist/usps_labels.npy" "${tgt[@]}"
expect 1 "feature width: expected 2" -- --model moons-dann "${src[@]}" "${tgt[@]}"
head -c 1000 "$mnist/usps_images.npy" >"$work/truncated.npy"
expect 1 "$work/truncated.npy" -- --model digits-dann "${src[@]}" --target "$work/truncated.npy"
expect 2 "--preprocess: expected none, standardize" -- --model digits-dann "${src[@]}" \
  "${tgt[@]}" --preprocess whiten --steps 5

# A short run with every output, then the same run resumed from its step-40 checkpoint.
run=(--model digits-dann "${src[@]}" "${tgt[@]}" --steps 80 --eval-every 20 --seed 3
     --validators entropy,im,snd,dev,pad --quiet)
expect 0 "selected by source_accuracy (label-free)" -- "${run[@]}" --profile \
  --json "$work/run.json" --curves "$work/curves" --trace "$work/trace.json" \
  --checkpoint "$work/run.ckpt" --checkpoint-every 40 --best "$work/best.ckpt"
for f in run.json curves.csv curves.svg trace.json run.ckpt best.ckpt; do
  [ -s "$work/$f" ] || { echo "FAIL: $f was not written"; failures=$((failures + 1)); }
done
grep -q '"selected_with_target_labels": false' "$work/run.json" ||
  { echo "FAIL: the JSON does not say the selection was label-free"; failures=$((failures + 1)); }
grep -q '"evaluations": \[' "$work/run.json" ||
  { echo "FAIL: the JSON has no evaluations"; failures=$((failures + 1)); }
[ "$(wc -l <"$work/curves.csv")" -gt 10 ] ||
  { echo "FAIL: curves.csv has too few rows"; failures=$((failures + 1)); }
grep -q '<svg' "$work/curves.svg" || { echo "FAIL: curves.svg"; failures=$((failures + 1)); }
grep -q '"traceEvents"' "$work/trace.json" || { echo "FAIL: trace"; failures=$((failures + 1)); }
if command -v python3 >/dev/null; then
  # Valid, and no object names a key twice (each evaluation once had "source_accuracy" twice).
  python3 -c '
import json, sys
def unique(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        sys.exit("keys named twice: %s" % sorted({k for k in keys if keys.count(k) > 1}))
    return dict(pairs)
[json.load(open(f), object_pairs_hook=unique) for f in sys.argv[1:]]' \
    "$work/run.json" "$work/trace.json" || { echo "FAIL: invalid JSON"; failures=$((failures + 1)); }
fi
# Interrupted at step 40 and resumed, a run ends with the checkpoint of an uninterrupted one,
# byte for byte (weights, optimizer state, schedule position, selection state).
expect 0 "stopped early at step 40" -- "${run[@]}" --checkpoint "$work/part.ckpt" --stop-after 40
expect 0 "model digits-dann: 40 steps" -- "${run[@]}" --checkpoint "$work/part.ckpt" \
  --resume "$work/part.ckpt"
cmp -s "$work/run.ckpt" "$work/part.ckpt" ||
  { echo "FAIL: the resumed run's checkpoint differs"; failures=$((failures + 1)); }
# Stopped off the evaluation schedule (--stop-after 1234, evaluations every 500) and resumed, a
# 3000-step run selects what the uninterrupted run does and ends with its checkpoint, byte for
# byte: the stop's own evaluation is reported, never a candidate (issue 46).
long=(--model digits-dann "${src[@]}" "${tgt[@]}" --steps 3000 --eval-every 500 --seed 2 --quiet)
expect 0 "model digits-dann: 3000 steps" -- "${long[@]}" --checkpoint "$work/long.ckpt" \
  --json "$work/long.json"
expect 0 "stopped early at step 1234" -- "${long[@]}" --checkpoint "$work/chunk.ckpt" \
  --stop-after 1234 --json "$work/chunk.json"
grep -q '{"step": 1234, [^}]*"best": false, "scheduled": false' "$work/chunk.json" ||
  { echo "FAIL: the stop's evaluation is not reported as off the schedule";
    failures=$((failures + 1)); }
expect 0 "model digits-dann: 1766 steps" -- "${long[@]}" --checkpoint "$work/chunk.ckpt" \
  --resume "$work/chunk.ckpt" --json "$work/chunk_resumed.json"
cmp -s "$work/long.ckpt" "$work/chunk.ckpt" ||
  { echo "FAIL: stopped at step 1234 and resumed, the final checkpoint differs";
    failures=$((failures + 1)); }
# same_selection A.json B.json: both reports select the same step by the same score, with the
# same selected and oracle target accuracies.
same_selection() {
  command -v python3 >/dev/null || return 0
  python3 - "$@" <<'PY'
import json, sys
a, b = (json.load(open(f))["result"] for f in sys.argv[1:3])
keys = ["selected_by", "best_step", "best_score", "selected_target_accuracy",
        "oracle_target_accuracy"]
for k in keys:
    if a[k] != b[k]:
        print("FAIL: %s: %r in %s, %r in %s" % (k, a[k], sys.argv[1], b[k], sys.argv[2]))
sys.exit(any(a[k] != b[k] for k in keys))
PY
}
same_selection "$work/long.json" "$work/chunk_resumed.json" || failures=$((failures + 1))

# Signals (issue 46): SIGTERM, SIGINT and SIGHUP end a training after its step with a checkpoint
# there and the outputs, status 128 + signal; a second signal exits at once. start_run LOG
# ARGS... starts a run in the background under timeout, which leaves SIGINT to the program (a
# script's own background jobs ignore it); signal_run CKPT SIG... sends each signal to the
# program once CKPT exists (its training has started); end_run waits for it and sets rc.
start_run() {
  local log=$1
  shift
  timeout 300 "$exe" "$@" >"$log" 2>&1 &
  timeout_pid=$!
}
signal_run() {
  local ckpt=$1 i pid=
  shift
  for i in $(seq 600); do [ -e "$ckpt" ] && break; sleep 0.1; done
  # The program is timeout's child; timeout itself passes signals on where /proc cannot say.
  pid=$(cat "/proc/$timeout_pid/task/$timeout_pid/children" 2>/dev/null)
  pid=${pid%% *}
  for s in "$@"; do kill -s "$s" "${pid:-$timeout_pid}"; done
}
end_run() {
  wait "$timeout_pid"
  rc=$?
}
# fail_run WHAT LOG: reports a failed signal check with the run's output.
fail_run() {
  echo "FAIL: $1 (status $rc):"
  sed 's/^/  | /' "$2" | tail -8
  failures=$((failures + 1))
}
# SIGTERM during the 3000-step run: a checkpoint at the step it stopped after, the JSON and the
# curves, status 143; resumed, the run ends with the uninterrupted run's checkpoint, byte for
# byte, and selects what it selects.
start_run "$work/term.log" "${long[@]}" --checkpoint "$work/term.ckpt" --checkpoint-every 100 \
  --json "$work/term.json" --curves "$work/term"
signal_run "$work/term.ckpt" TERM
end_run
if [ "$rc" -ne 143 ] || ! grep -q "dafuse-train: SIGTERM: stopping after step" "$work/term.log" ||
    ! grep -q "interrupted by SIGTERM after step [0-9]* of 3000; --resume $work/term.ckpt" \
      "$work/term.log"; then
  fail_run "SIGTERM: expected status 143 and the lines saying so" "$work/term.log"
fi
grep -q '"interrupted": true, "interrupted_by": "SIGTERM", "interrupted_at": [1-9]' \
  "$work/term.json" || fail_run "SIGTERM: the JSON does not say the run was interrupted" \
  "$work/term.log"
[ -s "$work/term.csv" ] && [ -s "$work/term.svg" ] ||
  fail_run "SIGTERM: the curves were not written" "$work/term.log"
expect 0 "model digits-dann: " -- "${long[@]}" --checkpoint "$work/term.ckpt" \
  --resume "$work/term.ckpt" --json "$work/term_resumed.json"
cmp -s "$work/long.ckpt" "$work/term.ckpt" ||
  { echo "FAIL: interrupted by SIGTERM and resumed, the final checkpoint differs";
    failures=$((failures + 1)); }
same_selection "$work/long.json" "$work/term_resumed.json" || failures=$((failures + 1))
# SIGINT (Ctrl-C): status 130, and the JSON says so.
start_run "$work/int.log" "${long[@]}" --checkpoint "$work/int.ckpt" --checkpoint-every 100 \
  --json "$work/int.json"
signal_run "$work/int.ckpt" INT
end_run
[ "$rc" -eq 130 ] && grep -q '"interrupted": true, "interrupted_by": "SIGINT"' "$work/int.json" ||
  fail_run "SIGINT: expected status 130 and an interrupted JSON" "$work/int.log"
# A second signal exits at once: SIGHUP and SIGTERM reach the stopped program together, so the
# second is handled before the first's outputs start. Status 128 + the second; no JSON, no
# curves, and the checkpoint there is a whole one (a resume loads it).
start_run "$work/twice.log" "${long[@]}" --checkpoint "$work/twice.ckpt" --checkpoint-every 100 \
  --json "$work/twice.json" --curves "$work/twice"
signal_run "$work/twice.ckpt" STOP HUP TERM CONT
end_run
if { [ "$rc" -ne 129 ] && [ "$rc" -ne 143 ]; } ||
    ! grep -q "a second signal: exiting at once" "$work/twice.log" ||
    [ -e "$work/twice.json" ] || [ -e "$work/twice.csv" ]; then
  fail_run "two signals: expected status 129 or 143, the line and no outputs" "$work/twice.log"
fi
expect 0 "stopped early at step" -- "${long[@]}" --resume "$work/twice.ckpt" --stop-after 1
# A checkpoint is refused by another model or set-up, and garbage is refused.
expect 1 "step type" -- --model digits-dann-clip "${src[@]}" "${tgt[@]}" --steps 80 --seed 3 \
  --resume "$work/run.ckpt" --quiet
expect 1 "fit_args.steps" -- "${run[@]}" --steps 90 --resume "$work/run.ckpt"
printf 'garbage' >"$work/bad.ckpt"
expect 1 "header: expected a dafuse checkpoint" -- "${run[@]}" --resume "$work/bad.ckpt"
# A run that diverges (lr 1e6: a non-finite loss within a few steps) exits 3, says where and why,
# saves the last weights it made, and says so in its JSON.
expect 3 "training diverged at step" -- --model digits-dann "${src[@]}" "${tgt[@]}" --steps 100 \
  --lr 1e6 --quiet --checkpoint "$work/diverged.ckpt" --json "$work/diverged.json"
[ -s "$work/diverged.ckpt" ] || { echo "FAIL: no checkpoint of the diverged run"; failures=$((failures + 1)); }
grep -q '"diverged": true' "$work/diverged.json" ||
  { echo "FAIL: the JSON does not say the run diverged"; failures=$((failures + 1)); }
expect 0 "0 skipped" -- "${run[@]}" --steps 20
# A sweep whose every configuration diverges says so, and with target labels given does not
# claim there were none (issue 46).
expect 3 "oracle: none (every configuration diverged: no finite target accuracy to choose by)" \
  -- --model digits-dann "${src[@]}" "${tgt[@]}" --steps 100 --sweep lr=1e6,1e7 --validator im --quiet
expect 3 "oracle: none (no target labels)" -- --model digits-dann "${src[@]}" \
  --target "$mnist/usps_images.npy" --steps 100 --sweep lr=1e6,1e7 --validator im --quiet

# The run's summary says how many source rows trained; with none held out, selection falls to
# entropy instead of failing; the JSON is versioned, gives the threads used, floats as typed and
# no max_grad_norm for an unclipped model.
expect 0 "2000 source rows (1800 trained on, 200 held out for validation)" -- --model digits-dann \
  "${src[@]}" "${tgt[@]}" --steps 10
expect 0 "selected by entropy (label-free)" -- --model digits-dann "${src[@]}" "${tgt[@]}" \
  --steps 10 --eval-every 5 --validation-fraction 0 --json "$work/all_rows.json"
expect 1 "held-out source rows for source_accuracy" -- --model digits-dann "${src[@]}" \
  "${tgt[@]}" --steps 10 --validation-fraction 0 --validator source_accuracy --quiet
if command -v python3 >/dev/null; then
  python3 - "$work/all_rows.json" "$work/run.json" <<'PY' || failures=$((failures + 1))
import json, os, sys
rows, run = (json.load(open(f)) for f in sys.argv[1:])
problems = []
if rows["format_version"] < 2 or not rows["dafuse_version"]: problems.append("no version")
if rows["data"]["trained_source_rows"] != rows["data"]["source_rows"]: problems.append("rows")
if run["data"]["trained_source_rows"] != 1800: problems.append("trained rows of run.json")
if run["config"]["lr"] != 0.03: problems.append("lr %r" % run["config"]["lr"])
if run["config"]["max_grad_norm"] is not None: problems.append("max_grad_norm of an unclipped model")
if not run["config"]["threads"] >= 1: problems.append("threads %r" % run["config"]["threads"])
if rows["result"]["selected_by"] != "entropy": problems.append("selector")
for p in problems: print("FAIL: JSON:", p)
sys.exit(1 if problems else 0)
PY
fi
# The curves mark the selected step and draw λ and the learning rate in panels of their own.
grep -q 'selected by source_accuracy: step' "$work/curves.svg" ||
  { echo "FAIL: the plot does not mark the selected step"; failures=$((failures + 1)); }
grep -q '>learning rate<' "$work/curves.svg" ||
  { echo "FAIL: the plot has no learning-rate panel"; failures=$((failures + 1)); }
# A target test set is scored with the model the run ends with; its labels are required and its
# width is checked.
expect 0 "target test accuracy:" -- --model digits-dann "${src[@]}" --target \
  "$mnist/usps_images.npy" --target-test "$mnist/usps_images.npy" \
  --target-test-labels "$mnist/usps_labels.npy" --steps 10 --quiet
expect 2 "--target-test-labels: expected the test set's labels" -- --model digits-dann \
  "${src[@]}" "${tgt[@]}" --target-test "$mnist/usps_images.npy" --steps 10
head -c 1000 "$mnist/usps_images.npy" >"$work/test_truncated.npy"
expect 1 "$work/test_truncated.npy" -- --model digits-dann "${src[@]}" "${tgt[@]}" \
  --target-test "$work/test_truncated.npy" --target-test-labels "$mnist/usps_labels.npy" --steps 10

# --- Bad input, faults and load (issue 25) ---
# Files that are not regular files are refused at once: a FIFO with no writer, /dev/zero.
mkfifo "$work/fifo.npy"
expect 1 "$work/fifo.npy: cannot read: it is a FIFO (named pipe), not a regular file" -- \
  --model digits-dann --source "$work/fifo.npy" --source-labels "$mnist/mnist_labels.npy" "${tgt[@]}"
expect 1 "/dev/zero: cannot read: it is a character device" -- "${run[@]}" --resume /dev/zero
# Sizes that cannot fit end in a message naming what, not a bare std::bad_alloc; a batch whose
# step cannot fit is refused from an estimate, before anything is allocated by it (issue 46: it
# filled 3.9 GB first), whatever the model (a network of one's own: network_test.sh).
expect 2 "--batch: expected at most about" -- --model digits-dann "${src[@]}" "${tgt[@]}" \
  --batch 1000000000 --steps 1 --quiet
expect 2 "a step of --batch 100000000 needs at least" -- --model digits-cnn-dann "${src[@]}" \
  "${tgt[@]}" --batch 100000000 --steps 1 --quiet
expect 2 "--curve-every: expected at most" -- --model digits-dann "${src[@]}" "${tgt[@]}" \
  --steps 1000000000000 --curve-every 1 --curves "$work/huge" --quiet
# A sweep holds one step per training it runs at once: a batch one step fits, but two do not,
# is refused for a sweep of two at once, before either step is built.
if [ "$(nproc)" -ge 2 ]; then
  most=$("$exe" --model digits-dann "${src[@]}" "${tgt[@]}" --batch 1000000000 --steps 1 \
    --quiet 2>&1 | sed -n 's/.*expected at most about \([0-9]*\) rows.*/\1/p')
  expect 2 "2 steps at once (--sweep-parallel) of --batch $((most * 3 / 4)) need at least" -- \
    --model digits-dann "${src[@]}" "${tgt[@]}" --batch $((most * 3 / 4)) --steps 1 --quiet \
    --sweep seeds=1,2 --sweep-parallel 2 --threads 1 --validator im
else
  echo "skipped: the sweep's batch estimate needs two processors (two trainings at once)"
fi
# A Python with numpy builds the bad inputs: the one on PATH, else Debian's.
numpy_python=
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c 'import numpy' 2>/dev/null; then numpy_python=$p; break; fi
done
[ -n "$numpy_python" ] || echo "no Python with numpy: the crafted-file checks are skipped"
if [ -n "$numpy_python" ]; then
  # A label out of range is named by its row in the labels file, and that file is named.
  "$numpy_python" -c 'import numpy as np, sys; y = np.load(sys.argv[1]); y[17] = 12; np.save(sys.argv[2], y)' \
    "$mnist/mnist_labels.npy" "$work/bad_labels.npy"
  expect 1 "$work/bad_labels.npy: labels[17]: expected a class in [0, 10) (the labels of $mnist/mnist_images.npy), found 12" \
    -- --model digits-dann --source "$mnist/mnist_images.npy" --source-labels "$work/bad_labels.npy" \
    "${tgt[@]}" --steps 5 --quiet
  # uint8 images are scaled by 1/255 whatever the length of their header: a 5000-byte header
  # trains exactly as numpy's own 128-byte one.
  "$numpy_python" - "$mnist/mnist_images.npy" "$work/u8.npy" "$work/u8_long.npy" <<'PY'
import numpy as np, sys
x = np.round(np.load(sys.argv[1]) * 255).astype(np.uint8)
np.save(sys.argv[2], x)
head = "{'descr': '|u1', 'fortran_order': False, 'shape': %r, }" % (x.shape,)
head = head + " " * (5000 - 10 - len(head) - 1) + "\n"
with open(sys.argv[3], "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + len(head).to_bytes(2, "little") + head.encode() + x.tobytes())
PY
  for f in u8 u8_long; do
    expect 0 "model digits-dann: 20 steps" -- --model digits-dann --source "$work/$f.npy" \
      --source-labels "$mnist/mnist_labels.npy" "${tgt[@]}" --steps 20 --quiet \
      --checkpoint "$work/$f.ckpt"
  done
  cmp -s "$work/u8.ckpt" "$work/u8_long.ckpt" ||
    { echo "FAIL: uint8 images with a long header train differently"; failures=$((failures + 1)); }
  # A resume of another run is refused, naming the first difference: other data of the same
  # shape, other options that change the maths.
  "$numpy_python" -c 'import numpy as np, sys; x = np.load(sys.argv[1]); x[5, 3, 3] += 0.5; np.save(sys.argv[2], x)' \
    "$mnist/mnist_images.npy" "$work/other_mnist.npy"
  expect 1 "source data: expected 2000 rows x 256, labelled, CRC-32" -- "${run[@]}" \
    --source "$work/other_mnist.npy" --resume "$work/run.ckpt"
  expect 1 "fit_args.lr: expected 0.01 (this step's fit_args), found 0.03 (the checkpoint's)" \
    -- "${run[@]}" --lr 0.01 --resume "$work/run.ckpt"
  expect 1 "fit_args.momentum: expected 0.5" -- "${run[@]}" --momentum 0.5 --resume "$work/run.ckpt"
  expect 1 "fit_args.lambda_max: expected 0.5" -- "${run[@]}" --lambda-max 0.5 \
    --resume "$work/run.ckpt"
  expect 1 "--preprocess: expected standardize (this run's), found none (the checkpoint's)" \
    -- "${run[@]}" --preprocess standardize --resume "$work/run.ckpt"
  # Crafted checkpoints with a valid checksum: NaN weights, an impossible best step, control
  # bytes in the step type (shown escaped, never sent to the terminal).
  "$numpy_python" - "$work/run.ckpt" "$work" <<'PY'
import math, struct, sys, zlib
data = open(sys.argv[1], "rb").read()
head, body = bytearray(data[:24]), bytearray(data[24:])
def save(name, b):
    h = bytearray(head)
    h[12:16] = struct.pack("<I", zlib.crc32(bytes(b)) & 0xffffffff)
    open(sys.argv[2] + "/" + name, "wb").write(bytes(h) + bytes(b))
at = 0
def take(n):
    global at
    at += n
    return at - n
n = struct.unpack_from("<Q", body, take(8))[0]; take(n)        # step type
take(4 + 3 * 8 + 8 + 16 + 3 * 8)                               # ... up to the best step
best = take(8)
take(8 + 16 + 8)                                               # ... skipped in a row
count = struct.unpack_from("<Q", body, take(8))[0]
for _ in range(2 * count):
    take(struct.unpack_from("<Q", body, take(8))[0])
take(8)                                                        # parameter count
params = at
b = bytearray(body); struct.pack_into("<f", b, params + 3 * 4, math.nan); save("nan.ckpt", b)
b = bytearray(body); struct.pack_into("<q", b, best, 1000000); save("best.ckpt2", b)
b = bytearray(body); b[8:12] = b"\x1b[2J"; save("escape.ckpt", b)
PY
  expect 1 "parameters[3]: expected a finite value, found nan" -- "${run[@]}" --resume "$work/nan.ckpt"
  expect 1 "best step: expected -1 (none yet) or a step in [1, 80], found 1000000" -- "${run[@]}" \
    --resume "$work/best.ckpt2"
  expect 1 "found '\\x1b[2J" -- "${run[@]}" --resume "$work/escape.ckpt"
  if timeout 120 "$exe" "${run[@]}" --resume "$work/escape.ckpt" 2>&1 | grep -q $'\x1b'; then
    echo "FAIL: a refusal echoed a raw control byte"; failures=$((failures + 1))
  fi
fi
# Two runs writing the same --curves and --trace at once both succeed and leave one whole file
# each, and no temporary files.
for i in 1 2; do
  timeout 120 "$exe" --model digits-dann "${src[@]}" "${tgt[@]}" --steps 60 --seed "$i" --quiet \
    --curves "$work/shared" --curve-every 1 --trace "$work/shared_trace.json" >"$work/par$i.log" 2>&1 &
done
for i in 1 2; do
  wait -n || { echo "FAIL: a concurrent run failed:"; cat "$work"/par*.log; failures=$((failures + 1)); }
done
[ "$(wc -l <"$work/shared.csv")" -eq 61 ] ||
  { echo "FAIL: the shared curves are not one run's whole table"; failures=$((failures + 1)); }
if command -v python3 >/dev/null; then
  python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$work/shared_trace.json" ||
    { echo "FAIL: the shared trace is not whole"; failures=$((failures + 1)); }
fi
# A save removes the temporaries a killed save of the same checkpoint left (pid 99999999 runs
# nowhere: pid_max is at most 2^22).
head -c 100000 /dev/zero >"$work/debris.ckpt.tmp-99999999"
head -c 100000 /dev/zero >"$work/debris.ckpt.tmp-99999999-0"
expect 0 "model digits-dann: 10 steps" -- "${run[@]}" --steps 10 --checkpoint "$work/debris.ckpt"
# (Only debris.ckpt's: a second signal during a save of twice.ckpt above may leave that one's,
# by design, for its next save.)
if ls "$work"/debris.ckpt.tmp-* >/dev/null 2>&1; then
  echo "FAIL: temporary files were left: $(ls "$work"/debris.ckpt.tmp-*)"
  failures=$((failures + 1))
fi
# A full disk (here: a file size limit) fails the JSON report with the reason and leaves no
# partial file.
out=$( (ulimit -f 1; timeout 120 "$exe" "${run[@]}" --steps 10 --json "$work/full.json") 2>&1)
rc=$?
if [ "$rc" -ne 1 ] || ! grep -qF "$work/full.json: cannot write" <<<"$out" ||
    ! grep -qF "File too large" <<<"$out" || [ -e "$work/full.json" ]; then
  echo "FAIL: a JSON report past the file size limit: status $rc, $(ls "$work"/full.json* 2>&1)"
  sed 's/^/  | /' <<<"$out" | tail -5
  failures=$((failures + 1))
fi

# These checks compile nothing (network_test.sh does): a compile here costs about 20 CPU-s.
if ls "$XDG_CACHE_HOME"/dafuse-train/network-*.cpp >/dev/null 2>&1; then
  echo "FAIL: a check compiled a network: $(ls "$XDG_CACHE_HOME"/dafuse-train/network-*.cpp)"
  failures=$((failures + 1))
fi
finish dafuse-train
