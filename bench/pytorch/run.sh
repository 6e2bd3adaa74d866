#!/bin/sh
# Runs the PyTorch side of the DANN benchmark with the environment it needs: OpenBLAS's
# OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE unset (they force AVX2 kernels and halve the GEMM rate
# here), 2 OpenMP threads, inductor compiling in this process (no pool of compile workers on a
# 2-core machine). The interpreter is $DAFUSE_TORCH_PYTHON (scripts/bench sets it to the PyTorch 2
# virtual environment it installs), else Debian's /usr/bin/python3 (python3-torch 1.13).
# Arguments go to dann_bench.py.
exec env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=2 \
    TORCHINDUCTOR_COMPILE_THREADS="${TORCHINDUCTOR_COMPILE_THREADS:-1}" \
    "${DAFUSE_TORCH_PYTHON:-/usr/bin/python3}" "$(dirname "$0")/dann_bench.py" "$@"
