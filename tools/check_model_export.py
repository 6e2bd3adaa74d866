#!/usr/bin/env python3
"""Loads a dafuse model file into the equivalent PyTorch module and checks that both predict the
same classes on a data set.

A model file (train/model_file.hpp: dafuse::save_model, or dafuse-train --save-model) is a
numpy.savez archive of torch.nn.Linear weights named by module and layer (features.0.weight, ...)
and an architecture.json that gives each layer's widths and activation. This script builds
`DannModel` (three nn.ModuleList of nn.Linear, so load_state_dict takes the arrays by their
names, strictly), runs G_y(G_f(x)) on the rows, and compares the arg-max with the classes dafuse
predicted for the same rows (model<Net>::predict, or dafuse-train --predictions).

A version 2 file also lists the preprocessing its rows went through before training
("preprocess": standardize with its float64 statistics in preprocess.<i>.mean/stddev, l2, log1p,
binarize); `Preprocess` applies it to the raw rows before G_f, with dafuse's arithmetic
(data/preprocessing.hpp: float64 where dafuse computes in double, rounded to float32 after each
step), so --rows are the raw rows and --classes what dafuse predicts for the transformed ones.

A conv net's layers ("kind": "conv2d", "max_pool2d" in the architecture) become nn.Conv2d and
nn.MaxPool2d children at their indices; the file holds their weights in PyTorch's NCHW layout
already. dafuse reads images channels last (NHWC), so the module views its input rows as
[N, H, W, C] and permutes them to NCHW before the first image layer, and flattens NCHW (C·H·W
order, as the file's next dense weight expects) after the last one.

    tools/check_model_export.py MODEL.npz --rows X.npy --classes DAFUSE_CLASSES.npy [--labels Y.npy]
    tools/check_model_export.py --cases CASES.txt

--cases runs many checks in one process (torch is imported once, about 1.5 s): each line of
CASES.txt is an output file followed by one check's arguments (shell quoting); the check's
messages go to that file and its exit status to the file's name + ".status".

X is what the model reads: float32 [N, width] (or [N, H, W(, C)], flattened; float64 and
integers converted to float32 as dafuse converts them), uint8 images scaled by 1/255 as
dafuse-train scales them, or for a model with a sparse first layer a CSR prefix P (P_indptr.npy,
P_indices.npy, P_data.npy); raw rows for a model file with preprocessing. Rows whose two largest
PyTorch logits lie within --tie-tolerance of each other may go either way (the products sum in
other orders); every other row must agree. Exit status: 0 they agree, 1 they do not, 2 a bad file or argument.
Needs numpy and torch (Debian: python3-numpy, python3-torch).
"""
import argparse
import json
import sys
import zipfile

import numpy as np
import torch
from torch import nn

ACTIVATIONS = ('identity', 'relu', 'leaky_relu', 'sigmoid', 'tanh')


class BadInput(Exception):
    """A file or argument this script cannot use; the message names it and what was expected."""


KINDS = ('dense', 'conv2d', 'max_pool2d')


class Stack(nn.ModuleList):
    """Layers each followed by its activation, as one module of a dafuse network: layer i is child
    i, so its parameters are "<module>.<i>.weight" and "<module>.<i>.bias". Image layers hold
    NCHW tensors; `images[i]` is layer i's input shape (H, W, C) for an image layer, else None."""

    def __init__(self, layers, where):
        super().__init__()
        self.activations = []
        self.images = []
        for i, layer in enumerate(layers):
            kind = layer.get('kind', 'dense')
            if kind not in KINDS:
                raise BadInput(f'{where}[{i}].kind: expected one of {", ".join(KINDS)}, found '
                               f'{kind!r}')
            name = layer.get('activation', 'identity' if kind == 'max_pool2d' else None)
            if name not in ACTIVATIONS:
                raise BadInput(f'{where}[{i}].activation: expected one of {", ".join(ACTIVATIONS)}'
                               f', found {name!r} (a custom activation has no PyTorch equivalent '
                               'known to this script)')
            if i > 0 and layer['in'] != layers[i - 1]['out']:
                raise BadInput(f'{where}[{i}].in: expected {layers[i - 1]["out"]} (the previous '
                               f'layer\'s out), found {layer["in"]}')
            if kind == 'dense':
                self.append(nn.Linear(layer['in'], layer['out']))
                self.images.append(None)
            else:
                channels = layer['in_channels'] if kind == 'conv2d' else layer['channels']
                shape = (layer['in_height'], layer['in_width'], channels)
                if layer['in'] != shape[0] * shape[1] * shape[2]:
                    raise BadInput(f'{where}[{i}].in: expected in_height * in_width * channels = '
                                   f'{shape[0] * shape[1] * shape[2]}, found {layer["in"]}')
                if kind == 'conv2d':
                    self.append(nn.Conv2d(channels, layer['out_channels'], layer['kernel'],
                                          stride=layer['stride'], padding=layer['padding']))
                else:
                    self.append(nn.MaxPool2d(layer['kernel']))
                self.images.append(shape)
            if name == 'leaky_relu':
                self.activations.append(nn.LeakyReLU(float(layer['negative_slope'])))
            else:
                self.activations.append({'identity': nn.Identity(), 'relu': nn.ReLU(),
                                         'sigmoid': nn.Sigmoid(), 'tanh': nn.Tanh()}[name])

    def forward(self, x):
        for layer, activation, image in zip(self, self.activations, self.images):
            if image is not None and x.dim() == 2:  # dafuse's rows: H·W·C values, channels last
                x = x.reshape(len(x), *image).permute(0, 3, 1, 2)
            elif image is None and x.dim() == 4:  # NCHW flattened as C·H·W
                x = torch.flatten(x, 1)
            x = activation(layer(x))
        # A module that ends with an image layer hands on dafuse's vector: H·W·C, channels last.
        return torch.flatten(x.permute(0, 2, 3, 1), 1) if x.dim() == 4 else x


TRANSFORMS = ('standardize', 'l2', 'log1p', 'binarize', 'binarize_nonzero')


class Preprocess(nn.Module):
    """The steps a version 2 model file lists, applied to raw rows [N, width] in order. Each
    follows dafuse's arithmetic for its input form (data/preprocessing.hpp): standardize, dense
    l2's norm and dense log1p in float64; sparse l2 divides by the norm in float64, sparse log1p
    is float32's; every step ends in float32. The statistics are buffers outside the state dict
    (they are not torch parameters of the file)."""

    def __init__(self, steps, arrays, width, sparse, where):
        super().__init__()
        self.steps = []
        for i, step in enumerate(steps):
            kind = step.get('transform')
            if kind not in TRANSFORMS:
                raise BadInput(f'{where}[{i}].transform: expected one of {", ".join(TRANSFORMS)}, '
                               f'found {kind!r}')
            if kind == 'standardize':
                for key in ('mean', 'stddev'):
                    a = arrays.get(step.get(key, ''))
                    if a is None or a.dtype != np.float64 or a.shape != (width,):
                        raise BadInput(f'{where}[{i}].{key}: expected a float64 member of shape '
                                       f'({width},), found {step.get(key)!r}')
                    self.register_buffer(f'{key}{i}', torch.from_numpy(a.copy()), persistent=False)
            self.steps.append((kind, float(step.get('threshold', 0.0))))
        self.sparse = sparse

    def forward(self, x):
        for i, (kind, threshold) in enumerate(self.steps):
            if kind == 'standardize':
                mean, std = getattr(self, f'mean{i}'), getattr(self, f'stddev{i}')
                centred = x.double() - mean
                x = torch.where(std == 0, centred, centred / torch.where(std == 0, 1.0, std))
            elif kind == 'l2':
                sq = (x.double() ** 2).sum(dim=1, keepdim=True)
                if self.sparse:
                    scaled = x.double() / torch.sqrt(sq)
                else:
                    scaled = x * (1.0 / torch.sqrt(sq)).float()
                x = torch.where(sq == 0, x.double() if self.sparse else x, scaled)
            elif kind == 'log1p':
                x = torch.log1p(x) if self.sparse else torch.log1p(x.double())
            elif kind == 'binarize':
                x = (x > threshold).float()
            else:
                x = (x != 0).float()
            x = x.float()
        return x


class DannModel(nn.Module):
    """G_f, G_y and G_d of a dafuse network, and the preprocessing of its raw rows; forward()
    gives G_y(G_f(preprocess(x))), the class logits."""

    def __init__(self, architecture, arrays=None):
        super().__init__()
        modules = architecture['modules']
        self.preprocess = Preprocess(architecture.get('preprocess', []), arrays or {},
                                     architecture['input']['width'],
                                     architecture['input']['sparse'], 'preprocess')
        self.features = Stack(modules['features'], 'modules.features')
        self.classifier = Stack(modules['classifier'], 'modules.classifier')
        self.discriminator = Stack(modules['discriminator'], 'modules.discriminator')

    def forward(self, x):
        return self.classifier(self.features(self.preprocess(x)))


def read_model(path):
    """The architecture, the tensors (by state-dict name) and the preprocessing's arrays (by
    member name) of the model file at `path`."""
    try:
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as e:
        raise BadInput(f'{path}: expected a model file (a numpy .npz archive), found: {e}')
    with archive:
        names = archive.namelist()
        if 'architecture.json' not in names:
            raise BadInput(f'{path}: architecture.json: expected the network\'s architecture '
                           '(written by dafuse::save_model), found no such member')
        try:
            architecture = json.loads(archive.read('architecture.json'))
        except ValueError as e:
            raise BadInput(f'{path}: architecture.json: expected JSON, found: {e}')
        version = architecture.get('format_version')
        if architecture.get('format') != 'dafuse-model' or version not in (1, 2):
            raise BadInput(f'{path}: architecture.json: expected format "dafuse-model", version 1 '
                           f'or 2, found {architecture.get("format")!r}, {version!r}')
        if ('preprocess' in architecture) != (version == 2):
            raise BadInput(f'{path}: architecture.json: expected "preprocess" in version 2 only, '
                           f'found version {version} {"with" if version == 1 else "without"} it')
        state, arrays = {}, {}
        for name in names:
            if name.endswith('.npy'):
                with archive.open(name) as f:
                    array = np.lib.format.read_array(f, allow_pickle=False)
                if name.startswith('preprocess.'):
                    arrays[name] = array
                    continue
                if array.dtype != np.float32:
                    raise BadInput(f'{path}: {name}: expected float32, found {array.dtype}')
                state[name[:-len('.npy')]] = torch.from_numpy(array.copy())
    return architecture, state, arrays


def read_rows(rows, architecture):
    """The rows the model reads, as a float32 tensor [N, width]."""
    width = architecture['input']['width']
    if architecture['input']['sparse']:
        try:
            indptr, indices, values = (np.load(f'{rows}_{part}.npy', allow_pickle=False)
                                       for part in ('indptr', 'indices', 'data'))
        except OSError as e:
            raise BadInput(f'{rows}: expected a CSR prefix (the model reads sparse rows): {e}')
        n = len(indptr) - 1
        if (n < 0 or indptr[0] != 0 or np.any(np.diff(indptr) < 0) or indptr[-1] != len(indices)
                or len(values) != len(indices)):
            raise BadInput(f'{rows}: indptr: expected non-decreasing offsets from 0 to the '
                           f'{len(indices)} non-zeros')
        if len(indices) and (indices.min() < 0 or indices.max() >= width):
            raise BadInput(f'{rows}_indices.npy: expected features in [0, {width}), found '
                           f'{indices.min()}..{indices.max()}')
        dense = np.zeros((n, width), dtype=np.float32)
        row_of = np.repeat(np.arange(n), np.diff(indptr))
        np.add.at(dense, (row_of, indices), values.astype(np.float32))
        return torch.from_numpy(dense)
    try:
        x = np.load(rows, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise BadInput(f'{rows}: expected an NPY file of rows: {e}')
    if x.dtype == np.uint8:
        x = x.astype(np.float32) / np.float32(255)  # as dafuse-train reads images
    elif x.dtype.kind in 'fiu' and x.dtype.itemsize <= 8:
        x = x.astype(np.float32)  # as dafuse converts float64 and integer features
    if x.dtype != np.float32 or x.ndim < 2:
        raise BadInput(f'{rows}: expected float or integer rows [N, ...], found {x.dtype} '
                       f'{x.shape}')
    x = x.reshape(len(x), -1)
    if x.shape[1] != width:
        raise BadInput(f'{rows}: feature width: expected {width} (architecture.json), found '
                       f'{x.shape[1]}')
    return torch.from_numpy(np.ascontiguousarray(x))


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('model', help='the model file (.npz)')
    parser.add_argument('--rows', required=True, help='NPY rows, or a CSR prefix')
    parser.add_argument('--classes', required=True, help="dafuse's int32 classes of the rows")
    parser.add_argument('--labels', help='int32 labels: report both accuracies too')
    parser.add_argument('--tie-tolerance', type=float, default=1e-4,
                        help='a gap between the two largest logits, relative to their size, '
                             'below which a row may go either way (default 1e-4)')
    args = parser.parse_args(argv)
    try:
        architecture, state, arrays = read_model(args.model)
        model = DannModel(architecture, arrays)
        try:
            model.load_state_dict(state, strict=True)
        except RuntimeError as e:
            raise BadInput(f'{args.model}: expected the arrays of its architecture: {e}')
        x = read_rows(args.rows, architecture)
        classes = np.load(args.classes, allow_pickle=False)
        if classes.shape != (len(x),):
            raise BadInput(f'{args.classes}: shape: expected ({len(x)},) to match {args.rows}, '
                           f'found {classes.shape}')
    except BadInput as e:
        print(f'check_model_export: {e}', file=sys.stderr)
        return 2

    model.eval()
    with torch.no_grad():
        logits = model(x).double().numpy()
    torch_classes = logits.argmax(axis=1)
    top2 = np.sort(logits, axis=1)[:, -2:]
    gap = top2[:, 1] - top2[:, 0]
    tie = gap <= args.tie_tolerance * np.maximum(1.0, np.abs(top2).max(axis=1))
    differ = torch_classes != classes
    wrong = differ & ~tie
    steps = [s['transform'] for s in architecture.get('preprocess', [])]
    print(f'{args.model}: {len(x)} {"raw " if steps else ""}rows'
          f'{" (preprocessed by " + ", ".join(steps) + ")" if steps else ""}, PyTorch and dafuse '
          f'predict the same class on {int((~differ).sum())}; {int((differ & tie).sum())} differ '
          f'within the tie tolerance, {int(wrong.sum())} beyond it')
    if args.labels:
        labels = np.load(args.labels, allow_pickle=False)
        if labels.shape == classes.shape:
            print(f'accuracy: PyTorch {100 * np.mean(torch_classes == labels):.2f} %, dafuse '
                  f'{100 * np.mean(classes == labels):.2f} %')
    for i in np.flatnonzero(wrong)[:5]:
        print(f'  row {i}: PyTorch {torch_classes[i]} (logits {logits[i].round(5).tolist()}), '
              f'dafuse {classes[i]}', file=sys.stderr)
    return 1 if wrong.any() else 0


def run_cases(path):
    """Runs the check of each line of `path` (an output file, then its arguments)."""
    import contextlib
    import shlex
    with open(path, encoding='utf-8') as f:
        lines = [line for line in f.read().splitlines() if line.strip()]
    for number, line in enumerate(lines, 1):
        words = shlex.split(line)
        if len(words) < 2:
            print(f'check_model_export: {path}: line {number}: expected an output file and the '
                  f'arguments of a check, found "{line}"', file=sys.stderr)
            return 2
        with open(words[0], 'w', encoding='utf-8') as out:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                try:
                    status = main(words[1:])
                except SystemExit as e:  # argparse's refusal of the arguments
                    status = e.code if isinstance(e.code, int) else 2
        with open(words[0] + '.status', 'w', encoding='utf-8') as out:
            print(status, file=out)
    return 0


if __name__ == '__main__':
    if len(sys.argv) == 3 and sys.argv[1] == '--cases':
        sys.exit(run_cases(sys.argv[2]))
    sys.exit(main(sys.argv[1:]))
