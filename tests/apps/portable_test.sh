#!/usr/bin/env bash
# A portable dafuse-train (-Dcpu=portable): --version names the copy it chose; DAFUSE_KERNELS picks
# another, or is refused with the instructions this CPU lacks; every copy this CPU runs trains;
# and under qemu-x86_64 (when installed) a CPU without AVX-512, and one without AVX, gets the
# copy it can run, which trains the same bits as that copy asked for on this CPU.
# Usage: portable_test.sh PATH/TO/dafuse-train
set -uo pipefail
exe=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
export OMP_NUM_THREADS=1  # the same bits under emulation and natively

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# Two rotated half-moons, 200 rows each, as float32 and int32 NPY files.
python3 - "$work" <<'EOF' || exit 1
import math, struct, sys
def npy(path, descr, shape, values, code):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    header += ' ' * ((-(10 + len(header) + 1)) % 64) + '\n'
    with open(path, 'wb') as f:
        f.write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(header)) + header.encode())
        f.write(struct.pack('<%d%s' % (len(values), code), *values))
for name, angle in (('source', 0.0), ('target', 0.5)):
    x, y = [], []
    for i in range(200):
        t, c = math.pi * (i // 2) / 100, i % 2
        px, py = (math.cos(t), math.sin(t)) if c == 0 else (1 - math.cos(t), 0.5 - math.sin(t))
        x += [math.cos(angle) * px - math.sin(angle) * py, math.sin(angle) * px + math.cos(angle) * py]
        y.append(c)
    npy(f'{sys.argv[1]}/{name}.npy', '<f4', '(200, 2)', x, 'f')
    npy(f'{sys.argv[1]}/{name}_labels.npy', '<i4', '(200,)', y, 'i')
EOF

# train OUT [RUNNER...]: 300 steps of moons-dann, the final checkpoint in OUT.
train() {
  local out=$1
  shift
  "$@" "$exe" --model moons-dann --source "$work/source.npy" \
    --source-labels "$work/source_labels.npy" --target "$work/target.npy" --steps 300 --seed 3 \
    --quiet --checkpoint "$out" >"$out.log" 2>&1 || { fail "$* dafuse-train: $(tail -3 "$out.log")"; }
}

# What this CPU has decides the copy: the best of avx512, avx2, baseline it runs.
flags=$(grep -m1 '^flags' /proc/cpuinfo)
best=baseline
grep -qw avx2 <<<"$flags" && grep -qw fma <<<"$flags" && best=avx2
grep -qw avx512f <<<"$flags" && grep -qw avx512bw <<<"$flags" && grep -qw avx512vl <<<"$flags" &&
  grep -qw avx512_bf16 <<<"$flags" && best=avx512
version=$("$exe" --version)
grep -qF "kernels chosen: $best, at start-up" <<<"$version" ||
  fail "--version on this CPU: expected 'kernels chosen: $best', got: $version"

runnable=(baseline)
[ "$best" != baseline ] && runnable+=(avx2)
[ "$best" = avx512 ] && runnable+=(avx512)
for copy in "${runnable[@]}"; do
  v=$(DAFUSE_KERNELS=$copy "$exe" --version)
  grep -qF "kernels chosen: $copy, at start-up, of avx512, avx2, baseline: DAFUSE_KERNELS=$copy" \
    <<<"$v" || fail "DAFUSE_KERNELS=$copy --version: $v"
  train "$work/$copy.ckpt" env DAFUSE_KERNELS=$copy
done
out=$(DAFUSE_KERNELS=sse "$exe" --version 2>&1)
[ $? -eq 2 ] && grep -qF "DAFUSE_KERNELS: expected one of avx512, avx2, baseline, found 'sse'" <<<"$out" ||
  fail "DAFUSE_KERNELS=sse: $out"

qemu=$(command -v qemu-x86_64)
if [ -z "$qemu" ]; then
  echo "no qemu-x86_64 (Debian's qemu-user): the emulated CPUs are skipped"
else
  # QEMU's emulated CPUs: 'max' has AVX2 and FMA but no AVX-512; Nehalem has SSE4.2, no AVX.
  for cpu in max:avx2 Nehalem:baseline; do
    model=${cpu%%:*} copy=${cpu##*:}
    v=$("$qemu" -cpu "$model" "$exe" --version 2>/dev/null)
    grep -qF "kernels chosen: $copy, at start-up" <<<"$v" ||
      fail "qemu -cpu $model --version: expected 'kernels chosen: $copy', got: $v"
    train "$work/qemu-$copy.ckpt" "$qemu" -cpu "$model"
    # The same copy, emulated and native, runs the same instructions on the same data.
    if [ -f "$work/$copy.ckpt" ]; then
      cmp -s "$work/qemu-$copy.ckpt" "$work/$copy.ckpt" ||
        fail "the $copy copy under qemu -cpu $model trains other bits than on this CPU"
    fi
  done
  out=$(DAFUSE_KERNELS=avx512 "$qemu" -cpu max "$exe" --version 2>&1)
  [ $? -eq 2 ] && grep -qF "DAFUSE_KERNELS=avx512: this CPU lacks avx512f" <<<"$out" ||
    fail "DAFUSE_KERNELS=avx512 on a CPU without AVX-512: $out"
fi

[ "$failures" -eq 0 ] && echo "portable dafuse-train: all checks passed" || exit 1
