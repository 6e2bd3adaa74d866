#!/usr/bin/env bash
# A model taken away: model files that model_export_program writes (four networks, every
# activation, a sparse first layer, a conv net; three that carry their preprocessing, read on raw
# rows) and those that dafuse-train --save-model writes after training on the shipped digits (an
# MLP, the CNN, and an MLP with --preprocess standardize,l2 checked on the raw images) are loaded
# into the equivalent PyTorch module by tools/check_model_export.py, which checks that PyTorch
# predicts the classes dafuse predicted.
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

# check NAME ROWS ARGS...: the tool accepts NAME.npz against NAME_classes.npy.
check() {
  local name=$1 rows=$2
  shift 2
  if ! "$python" "$tool" "$work/$name.npz" --rows "$rows" --classes "$work/${name}_classes.npy" \
    "$@"; then
    echo "FAIL: $name: PyTorch and dafuse disagree"
    failures=$((failures + 1))
  fi
}

"$program" "$work" || { echo "FAIL: model_export_program"; exit 1; }
check dense_a "$work/dense_a_rows.npy"
check dense_b "$work/dense_b_rows.npy"
check sparse "$work/sparse_rows"
check conv "$work/conv_rows.npy"
# Models with their preprocessing, on raw rows: every row agrees, none even within a tie.
for name in pre_dense pre_binarize pre_sparse; do
  rows=$work/${name}_rows.npy
  [ -f "$rows" ] || rows=$work/${name}_rows
  "$python" "$tool" "$work/$name.npz" --rows "$rows" --classes "$work/${name}_classes.npy" \
    >"$work/out" 2>&1
  if ! grep -q "predict the same class on 600; 0 differ within the tie tolerance" "$work/out"; then
    echo "FAIL: $name: PyTorch and dafuse disagree on raw rows"
    cat "$work/out"
    failures=$((failures + 1))
  fi
done

# The check can fail: classes that are not the model's are caught, and a file of another
# network is refused.
"$python" - "$work/dense_a_classes.npy" "$work/wrong_classes.npy" <<'PY'
import sys, numpy as np
c = np.load(sys.argv[1])
np.save(sys.argv[2], ((c + 1) % 3).astype(np.int32))
PY
if "$python" "$tool" "$work/dense_a.npz" --rows "$work/dense_a_rows.npy" \
  --classes "$work/wrong_classes.npy" >"$work/out" 2>&1; then
  echo "FAIL: other classes were accepted"
  failures=$((failures + 1))
fi
"$python" "$tool" "$work/dense_a.npz" --rows "$work/sparse_rows" \
  --classes "$work/dense_a_classes.npy" >"$work/out" 2>&1
rc=$?
if [ "$rc" -ne 2 ] || ! grep -q "expected an NPY file of rows" "$work/out"; then
  echo "FAIL: rows of another form: status $rc"
  cat "$work/out"
  failures=$((failures + 1))
fi
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
if "$python" "$tool" "$work/stripped.npz" --rows "$work/pre_dense_rows.npy" \
  --classes "$work/pre_dense_classes.npy" >"$work/out" 2>&1; then
  echo "FAIL: raw rows without the preprocessing agree: the check proves nothing"
  failures=$((failures + 1))
fi

# dafuse-train: the selected model of a short run on the shipped digits, and its predictions.
if [ -n "$train" ]; then
  digits=$data/jda_mnist_usps
  if "$train" --model digits-dann --source "$digits/mnist_images.npy" \
    --source-labels "$digits/mnist_labels.npy" --target "$digits/usps_images.npy" \
    --target-labels "$digits/usps_labels.npy" --steps 200 --eval-every 50 --seed 2 --quiet \
    --save-model "$work/digits.npz" --predictions "$work/digits_classes.npy" >"$work/out" 2>&1
  then
    grep -q "model file: $work/digits.npz (the selected model, step " "$work/out" ||
      { echo "FAIL: dafuse-train does not say which model it saved"; cat "$work/out";
        failures=$((failures + 1)); }
    check digits "$digits/usps_images.npy" --labels "$digits/usps_labels.npy"
  else
    echo "FAIL: dafuse-train --save-model"
    cat "$work/out"
    failures=$((failures + 1))
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
      { echo "FAIL: dafuse-train does not say the model file applies its preprocessing";
        cat "$work/out"; failures=$((failures + 1)); }
    "$python" "$tool" "$work/digits_pre.npz" --rows "$digits/mnist_images.npy" \
      --classes "$work/digits_pre_classes.npy" --labels "$digits/mnist_labels.npy" >"$work/out" 2>&1
    if ! grep -q "predict the same class on 2000; 0 differ within the tie tolerance" "$work/out"; then
      echo "FAIL: digits with --preprocess: PyTorch on raw rows and dafuse disagree"
      cat "$work/out"
      failures=$((failures + 1))
    fi
  else
    echo "FAIL: dafuse-train --preprocess standardize --save-model"
    cat "$work/out"
    failures=$((failures + 1))
  fi
  # The CNN (150 steps at lr 0.05: 54 % on USPS, so the classes it predicts are many): its file
  # read into Conv2d/MaxPool2d/Linear modules, the images permuted to NCHW.
  if "$train" --model digits-cnn-dann --source "$digits/mnist_images.npy" \
    --source-labels "$digits/mnist_labels.npy" --target "$digits/usps_images.npy" \
    --target-labels "$digits/usps_labels.npy" --steps 150 --eval-every 50 --lr 0.05 --seed 2 \
    --quiet --save-model "$work/cnn.npz" --predictions "$work/cnn_classes.npy" >"$work/out" 2>&1
  then
    check cnn "$digits/usps_images.npy" --labels "$digits/usps_labels.npy"
  else
    echo "FAIL: dafuse-train --model digits-cnn-dann --save-model"
    cat "$work/out"
    failures=$((failures + 1))
  fi
fi

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all model export checks passed"
