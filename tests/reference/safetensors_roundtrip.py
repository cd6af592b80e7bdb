"""Cross-check driver for tests/unit/ckpt/test_ckpt_safetensors.cpp.

Reads a safetensors file written by ledgerlm's C++ writer with the numpy reader, verifying the
per-tensor CRC-32C checksums the writer recorded (an independent implementation of them), and
writes a second file with this module's writer in which every tensor is mapped x -> 2*x + 1 (same
name, dtype and shape), the metadata is copied plus {"python": "yes"}, and the checksums are those
of the new bytes (the copied ones would no longer match: ledgerlm would refuse the file). The C++
test checks the values and the checksums, so both directions of the format are exercised against
an independent implementation.

usage: safetensors_roundtrip.py IN OUT
"""

import sys

import numpy as np

import safetensors_io


def main():
    src, dst = sys.argv[1], sys.argv[2]
    tensors, metadata = safetensors_io.read(src, verify_checksums=True)
    checksums = sum(k.startswith(safetensors_io.CHECKSUM_PREFIX) for k in metadata)
    print(f"verified {checksums} checksums")
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
    prefix = safetensors_io.CHECKSUM_PREFIX
    metadata = {k: v for k, v in metadata.items() if not k.startswith(prefix)}
    metadata["python"] = "yes"
    safetensors_io.write(dst, out, metadata, dtypes, checksums=True)


if __name__ == "__main__":
    main()
