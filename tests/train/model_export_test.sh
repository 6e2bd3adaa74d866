#!/usr/bin/env bash
# A model taken away: model files that model_export_program writes (four networks, every
# activation, a sparse first layer, a conv net; three that carry their preprocessing, read on raw
# rows) and those that dafuse-train --save-model writes after training on the shipped digits (an
# MLP, the CNN, and an MLP with --preprocess standardize,l2 checked on the raw images) are loaded
# into the equivalent PyTorch module by tools/check_model_export.py, which checks that PyTorch
# predicts the classes dafuse predicted. The checks are queued and run in one Python process
# (check_model_export.py --cases): each process would import torch again, about 1.5 s.
# Skips (exit 77) when Debian's python3 has no torch; DAFUSE_TORCH_PYTHON names another Python
# with numpy and torch (a virtual environment).
# Usage: model_export_test.sh MODEL_EXPORT_PROGRAM CHECK_MODEL_EXPORT_PY DATA_DIR [DAFUSE_TRAIN]
set -uo pipefail
program=$1
tool=$2
data=$3
train=${4:-}
python=${DAFUSE_TORCH_PYTHON:-/usr/bin/python3}
if ! "$python" -c 'import numpy, torch' 2>/dev/null; then
  echo "no torch for $python (Debian: apt-get install python3-torch; or set DAFUSE_TORCH_PYTHON): skipped"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
cases=$work/cases.txt
: >"$cases"

# queue OUT ARGS...: one check with these arguments; its messages go to OUT, its status to
# OUT.status when the queue runs.
queue() {
  printf '%q ' "$@" >>"$cases"
  echo >>"$cases"
}
# expect_agree NAME ROWS ARGS...: the tool accepts NAME.npz against NAME_classes.npy.
expect_agree() {
  local name=$1 rows=$2
  shift 2
  queue "$work/$name.check" "$work/$name.npz" --rows "$rows" --classes "$work/${name}_classes.npy" "$@"
  agreeing+=("$name")
}
agreeing=()
# expect_raw NAME COUNT ARGS...: the check with ARGS finds all COUNT rows agreeing, none even
# within a tie (its output goes to NAME.raw).
expect_raw() {
  local name=$1 count=$2
  shift 2
  queue "$work/$name.raw" "$@"
  raw+=("$name:$count")
}
raw=()
status_of() { cat "$1.status" 2>/dev/null || echo "none"; }
fail() {
  echo "FAIL: $1"
  [ -f "${2:-}" ] && cat "$2"
  failures=$((failures + 1))
}

"$program" "$work" || { echo "FAIL: model_export_program"; exit 1; }
expect_agree dense_a "$work/dense_a_rows.npy"
expect_agree dense_b "$work/dense_b_rows.npy"
expect_agree sparse "$work/sparse_rows"
expect_agree conv "$work/conv_rows.npy"
# Models with their preprocessing, on raw rows: every row agrees, none even within a tie.
for name in pre_dense pre_binarize pre_sparse; do
  rows=$work/${name}_rows.npy
  [ -f "$rows" ] || rows=$work/${name}_rows
  expect_raw "$name" 600 "$work/$name.npz" --rows "$rows" --classes "$work/${name}_classes.npy"
done

# The check can fail: classes that are not the model's are caught, and a file of another
# network is refused.
"$python" - "$work/dense_a_classes.npy" "$work/wrong_classes.npy" <<'PY'
import sys, numpy as np
c = np.load(sys.argv[1])
np.save(sys.argv[2], ((c + 1) % 3).astype(np.int32))
PY
queue "$work/wrong.check" "$work/dense_a.npz" --rows "$work/dense_a_rows.npy" \
  --classes "$work/wrong_classes.npy"
queue "$work/other_form.check" "$work/dense_a.npz" --rows "$work/sparse_rows" \
  --classes "$work/dense_a_classes.npy"
# Without its preprocessing (the file as version 1 wrote it: architecture alone, no statistics)
# the same model disagrees with dafuse on the raw rows: the preprocessing is what makes them agree.
"$python" - "$work/pre_dense.npz" "$work/stripped.npz" <<'PY'
import json, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as a, zipfile.ZipFile(sys.argv[2], "w") as b:
    for name in a.namelist():
        if name == "architecture.json":
            j = json.loads(a.read(name))
            del j["preprocess"]
            j["format_version"] = 1
            b.writestr(name, json.dumps(j))
        elif not name.startswith("preprocess."):
            b.writestr(name, a.read(name))
PY
queue "$work/stripped.check" "$work/stripped.npz" --rows "$work/pre_dense_rows.npy" \
  --classes "$work/pre_dense_classes.npy"

# dafuse-train: the selected model of a short run on the shipped digits, and its predictions.
if [ -n "$train" ]; then
  digits=$data/jda_mnist_usps
  if "$train" --model digits-dann --source "$digits/mnist_images.npy" \
    --source-labels "$digits/mnist_labels.npy" --target "$digits/usps_images.npy" \
    --target-labels "$digits/usps_labels.npy" --steps 200 --eval-every 50 --seed 2 --quiet \
    --save-model "$work/digits.npz" --predictions "$work/digits_classes.npy" >"$work/out" 2>&1
  then
    grep -q "model file: $work/digits.npz (the selected model, step " "$work/out" ||
      fail "dafuse-train does not say which model it saved" "$work/out"
    expect_agree digits "$digits/usps_images.npy" --labels "$digits/usps_labels.npy"
  else
    fail "dafuse-train --save-model" "$work/out"
  fi
  # --preprocess standardize: the file carries the statistics, and PyTorch reads the raw images
  # through them to the classes dafuse predicted, every row. The rows are MNIST's, as a test set
  # (MNIST's statistics move USPS's border pixels far out, and the classes collapse there); lr
  # 0.003, as standardized pixels of near-constant features are large (0.03 diverges).
  if "$train" --model digits-dann --source "$digits/mnist_images.npy" \
    --source-labels "$digits/mnist_labels.npy" --target "$digits/usps_images.npy" \
    --target-test "$digits/mnist_images.npy" --target-test-labels "$digits/mnist_labels.npy" \
    --steps 200 --eval-every 50 --lr 0.003 --seed 2 --quiet --preprocess standardize \
    --save-model "$work/digits_pre.npz" --predictions "$work/digits_pre_classes.npy" \
    >"$work/out" 2>&1
  then
    grep -q "model file: $work/digits_pre.npz (the selected model, step [0-9]*; it applies standardize to raw rows)" "$work/out" ||
      fail "dafuse-train does not say the model file applies its preprocessing" "$work/out"
    expect_raw digits_pre 2000 "$work/digits_pre.npz" --rows "$digits/mnist_images.npy" \
      --classes "$work/digits_pre_classes.npy" --labels "$digits/mnist_labels.npy"
  else
    fail "dafuse-train --preprocess standardize --save-model" "$work/out"
  fi
  # The CNN (150 steps at lr 0.05: 54 % on USPS, so the classes it predicts are many): its file
  # read into Conv2d/MaxPool2d/Linear modules, the images permuted to NCHW.
  if "$train" --model digits-cnn-dann --source "$digits/mnist_images.npy" \
    --source-labels "$digits/mnist_labels.npy" --target "$digits/usps_images.npy" \
    --target-labels "$digits/usps_labels.npy" --steps 150 --eval-every 50 --lr 0.05 --seed 2 \
    --quiet --save-model "$work/cnn.npz" --predictions "$work/cnn_classes.npy" >"$work/out" 2>&1
  then
    expect_agree cnn "$digits/usps_images.npy" --labels "$digits/usps_labels.npy"
  else
    fail "dafuse-train --model digits-cnn-dann --save-model" "$work/out"
  fi
fi

# Every queued check, in one process.
"$python" "$tool" --cases "$cases" || { echo "FAIL: check_model_export.py --cases"; exit 1; }
for name in "${agreeing[@]}"; do
  cat "$work/$name.check"
  [ "$(status_of "$work/$name.check")" = 0 ] || fail "$name: PyTorch and dafuse disagree"
done
for r in "${raw[@]}"; do
  name=${r%:*} out=$work/${r%:*}.raw
  grep -q "predict the same class on ${r#*:}; 0 differ within the tie tolerance" "$out" ||
    fail "$name: PyTorch and dafuse disagree on raw rows" "$out"
done
[ "$(status_of "$work/wrong.check")" = 1 ] || fail "other classes were accepted" "$work/wrong.check"
if [ "$(status_of "$work/other_form.check")" != 2 ] ||
  ! grep -q "expected an NPY file of rows" "$work/other_form.check"; then
  fail "rows of another form: status $(status_of "$work/other_form.check")" "$work/other_form.check"
fi
[ "$(status_of "$work/stripped.check")" = 1 ] ||
  fail "raw rows without the preprocessing agree: the check proves nothing" "$work/stripped.check"

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all model export checks passed"
