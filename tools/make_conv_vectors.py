#!/usr/bin/python3
"""Generate PyTorch reference vectors for a convolutional layer stack.

Run by hand from the repository root (not part of CI):

    /usr/bin/python3 tools/make_conv_vectors.py

It writes ``tests/data/torch/conv_stack_*.npy`` (float32), read by
tests/backend/conv_test.cpp.  Deterministic: ``torch.manual_seed(0)``, the
reference computed in float64 from float32 inputs, one thread.

The stack (dafuse: tests/backend/conv_test.cpp's ``torch_net``), on 12 x 12 x 2
images, n = 4 samples:

    Conv2d(2, 6, 5, padding=2) -> ReLU -> MaxPool2d(2)
    Conv2d(6, 8, 3, padding=1) -> ReLU -> MaxPool2d(2)
    flatten (3 x 3 x 8 = 72, in HWC order) -> Linear(72, 10) -> tanh

Loss L = sum(R * y) for a fixed random R [n, 10], so dL/dy = R.

Layouts (dafuse's, nn/conv2d.hpp): images and activations NHWC; a conv weight
[C_out, C_in, K, K] is stored as [C_out, kh, kw, C_in] column-major, i.e. the
C-order flattening of weight.permute(2, 3, 1, 0); a Linear weight [out, in]
column-major, i.e. weight.T flattened; each layer's weight then its bias. The
flatten reads HWC, so the PyTorch model permutes to NHWC before flattening
(then the Linear's columns already are in dafuse's order).

Files: conv_stack_params [P] (dafuse's layout), conv_stack_x [n, 288] (NHWC
samples), conv_stack_r [n, 10], conv_stack_y [n, 10], conv_stack_param_grads [P],
conv_stack_input_grads [n, 288].
"""
import os

import numpy as np
import torch

torch.manual_seed(0)
torch.set_num_threads(1)

N, H, W, C = 4, 12, 12, 2
conv1 = torch.nn.Conv2d(2, 6, 5, padding=2)
conv2 = torch.nn.Conv2d(6, 8, 3, padding=1)
fc = torch.nn.Linear(72, 10)
layers = [conv1, conv2, fc]
with torch.no_grad():
    for m in layers:
        m.bias.copy_(torch.randn(m.bias.shape) * 0.1)
x_nhwc = torch.randn(N, H, W, C)
r = torch.randn(N, 10)

# Float64 from the float32 values.
for m in layers:
    m.double()
x = x_nhwc.double().permute(0, 3, 1, 2).clone().requires_grad_(True)
h = torch.max_pool2d(torch.relu(conv1(x)), 2)
h = torch.max_pool2d(torch.relu(conv2(h)), 2)
h = h.permute(0, 2, 3, 1).reshape(N, -1)
y = torch.tanh(fc(h))
loss = (r.double() * y).sum()
loss.backward()


def dafuse_layout(get):
    parts = []
    for m in layers:
        w = get(m.weight)
        if w.dim() == 4:
            parts.append(w.permute(2, 3, 1, 0).reshape(-1))
        else:
            parts.append(w.t().reshape(-1))
        parts.append(get(m.bias).reshape(-1))
    return torch.cat(parts)


params = dafuse_layout(lambda p: p.detach())
grads = dafuse_layout(lambda p: p.grad)
dx = x.grad.permute(0, 2, 3, 1).reshape(N, -1)

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "torch")
os.makedirs(out, exist_ok=True)


def save(name, t):
    np.save(os.path.join(out, "conv_stack_" + name + ".npy"),
            t.detach().numpy().astype(np.float32))


save("params", params)
save("x", x_nhwc.reshape(N, -1))
save("r", r)
save("y", y)
save("param_grads", grads)
save("input_grads", dx)
print("wrote conv_stack_*.npy:", params.numel(), "parameters")
