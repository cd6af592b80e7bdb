"""Cross-check driver for tests/unit/ckpt/test_ckpt_safetensors.cpp.

Reads a safetensors file written by ledgerlm's C++ writer with the numpy reader, and writes a
second file with this module's writer in which every tensor is mapped x -> 2*x + 1 (same name,
dtype and shape) and the metadata is copied plus {"python": "yes"}. The C++ test checks the
values, so both directions of the format are exercised against an independent implementation.

usage: safetensors_roundtrip.py IN OUT
"""

import sys

import numpy as np

import safetensors_io


def main():
    src, dst = sys.argv[1], sys.argv[2]
    tensors, metadata = safetensors_io.read(src)
    out = {}
    dtypes = {}
    header = safetensors_io.read_header(src)
    for name, arr in tensors.items():
        dtype = header[name]["dtype"]
        if dtype == "BF16":
            dtypes[name] = "BF16"
            out[name] = (arr.astype(np.float32) * 2 + 1).astype(np.float32)
        else:
            out[name] = (arr * 2 + 1).astype(arr.dtype)
        print(f"{name} {dtype} {list(arr.shape)}")
    metadata = dict(metadata)
    metadata["python"] = "yes"
    safetensors_io.write(dst, out, metadata, dtypes)


if __name__ == "__main__":
    main()
