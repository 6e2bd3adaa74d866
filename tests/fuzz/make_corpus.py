#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the seed corpora of the fuzz targets: tests/fuzz/corpus/{npy,csr}/.

Small valid NPY files of each dtype and version and near-valid ones (each one edit away from
valid), built with the standard library only so that it runs without numpy. The output is
deterministic: rerunning it rewrites the same bytes.

    /usr/bin/python3 tests/fuzz/make_corpus.py
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def npy(descr, shape, data, version=1, fortran="False", pad=True, dict_text=None):
    """An NPY file: magic, version, header length, header dict, data (bytes)."""
    if dict_text is None:
        shape_text = "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
        dict_text = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape_text)
    prefix = 10 if version == 1 else 12
    header = dict_text
    if pad:
        header += " " * ((64 - (prefix + len(header) + 1) % 64) % 64)
        header += "\n"
    hb = header.encode("utf-8")
    out = b"\x93NUMPY" + bytes([version, 0])
    out += struct.pack("<H", len(hb)) if version == 1 else struct.pack("<I", len(hb))
    return out + hb + data


def f4(values):
    return struct.pack("<%df" % len(values), *values)


def i4(values):
    return struct.pack("<%di" % len(values), *values)


def write(folder, name, blob):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(blob)


def npy_corpus(folder):
    seeds = {
        "f4_1d": npy("<f4", [3], f4([1.0, -2.5, 3.0])),
        "f4_2d": npy("<f4", [2, 3], f4([0, 1, 2, 3, 4, 5])),
        "f4_0d": npy("<f4", [], f4([7.0])),
        "f4_zero_dim": npy("<f4", [0, 4], b""),
        "i4_1d": npy("<i4", [4], i4([0, -1, 2147483647, -2147483648])),
        "u1_3d": npy("|u1", [2, 2, 2], bytes(range(8))),
        "f4_v2": npy("<f4", [2], f4([1, 2]), version=2),
        "i4_v3": npy("<i4", [1], i4([5]), version=3),
        "unpadded": npy("<f4", [1], f4([1]), pad=False),
        "double_quotes": npy(None, None, f4([1, 2]), dict_text='{"shape": (2,), "fortran_order": False, "descr": "<f4"}'),
        "python2_long": npy(None, None, f4([1, 2]), dict_text="{'descr': '<f4', 'fortran_order': False, 'shape': (2L,), }"),
        # near-valid: one thing wrong each
        "truncated": npy("<f4", [4], f4([1, 2, 3])),
        "trailing": npy("<f4", [1], f4([1, 2])),
        "big_endian": npy(">f4", [1], f4([1])),
        "fortran": npy("<f4", [2, 2], f4([1, 2, 3, 4]), fortran="True"),
        "f8": npy("<f8", [1], struct.pack("<d", 1.0)),
        "not_tuple": npy(None, None, f4([1]), dict_text="{'descr': '<f4', 'fortran_order': False, 'shape': (1), }"),
        "huge_shape": npy("<f4", [18446744073709551615, 2], b""),
        "bad_version": b"\x93NUMPY\x04\x00" + npy("<f4", [1], f4([1]))[8:],
        "header_too_long": b"\x93NUMPY\x01\x00\xff\xff{'descr'",
        "extra_key": npy(None, None, f4([1]), dict_text="{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}"),
    }
    for name, blob in seeds.items():
        write(folder, name + ".npy", blob)


def csr_input(cols, indptr_file, indices_file, data_file):
    return struct.pack("<HHH", cols, len(indptr_file), len(indices_file)) + indptr_file + indices_file + data_file


def csr_triple(cols, indptr, indices, values):
    return csr_input(cols, npy("<i4", [len(indptr)], i4(indptr)), npy("<i4", [len(indices)], i4(indices)),
                     npy("<f4", [len(values)], f4(values)))


def csr_corpus(folder):
    seeds = {
        "small": csr_triple(5, [0, 2, 2, 5], [1, 4, 0, 2, 3], [1, 2, 3, 4, 5]),
        "empty_rows": csr_triple(10, [0, 0, 0], [], []),
        "no_rows": csr_triple(10, [0], [], []),
        "stored_zero": csr_triple(3, [0, 3], [0, 1, 2], [0, -2, 0.5]),
        "counts": csr_triple(5000, [0, 3, 4, 6], [7, 100, 4999, 12, 0, 4998], [1, 2, 84, 1, 3, 1]),
        # near-valid: one thing wrong each
        "unsorted": csr_triple(5, [0, 2, 2, 5], [1, 4, 2, 0, 3], [1, 2, 3, 4, 5]),
        "duplicate": csr_triple(5, [0, 2, 2, 5], [1, 4, 0, 2, 2], [1, 2, 3, 4, 5]),
        "out_of_range": csr_triple(5, [0, 2, 2, 5], [1, 5, 0, 2, 3], [1, 2, 3, 4, 5]),
        "negative_index": csr_triple(5, [0, 2, 2, 5], [1, -1, 0, 2, 3], [1, 2, 3, 4, 5]),
        "decreasing": csr_triple(5, [0, 3, 2, 5], [1, 4, 0, 2, 3], [1, 2, 3, 4, 5]),
        "nnz_mismatch": csr_triple(5, [0, 2, 2, 4], [1, 4, 0, 2, 3], [1, 2, 3, 4, 5]),
        "indptr_start": csr_triple(5, [1, 2, 2, 5], [1, 4, 0, 2, 3], [1, 2, 3, 4, 5]),
        "size_mismatch": csr_triple(5, [0, 2, 2, 5], [1, 4, 0, 2], [1, 2, 3, 4, 5]),
        "nan": csr_triple(5, [0, 2, 2, 5], [1, 4, 0, 2, 3], [1, 2, float("nan"), 4, 5]),
        "neg_one": csr_triple(5, [0, 1], [1], [-1.0]),
        "huge_indptr": csr_triple(5, [0, 2147483647], [1], [1.0]),
        "indptr_2d": csr_input(5, npy("<i4", [2, 2], i4([0, 1, 1, 2])), npy("<i4", [2], i4([0, 1])), npy("<f4", [2], f4([1, 1]))),
        "indices_f4": csr_input(5, npy("<i4", [2], i4([0, 1])), npy("<f4", [1], f4([0])), npy("<f4", [1], f4([1]))),
    }
    for name, blob in seeds.items():
        write(folder, name + ".bin", blob)


if __name__ == "__main__":
    npy_corpus(os.path.join(HERE, "corpus", "npy"))
    csr_corpus(os.path.join(HERE, "corpus", "csr"))
