"""Safetensors reader and writer in plain numpy, independent of ledgerlm's C++ code.

Format: 8-byte little-endian header length N, N bytes of JSON header
{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}},
padded with spaces to a multiple of 8, then the raw little-endian tensor bytes.

numpy has no bfloat16: BF16 tensors are returned as float32 (exact widening) and written from
float32 with round-to-nearest-even when the caller asks for dtype "BF16".

Checksums: ledgerlm's writer records each tensor's CRC-32C in the metadata as
"checksum.NAME": "crc32c:0123abcd". read(verify_checksums=True) checks them when present (an
independent CRC-32C, table-driven, plain Python: for the small files of the tests), and
write(checksums=True) writes them.
"""

import json
import os
import struct

import numpy as np

# safetensors dtype name -> numpy dtype of the raw storage
_STORAGE = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),
    "I32": np.dtype("<i4"),
    "U16": np.dtype("<u2"),
    "U8": np.dtype("u1"),
    "I64": np.dtype("<i8"),
}
_FROM_NUMPY = {
    np.dtype("float64"): "F64",
    np.dtype("float32"): "F32",
    np.dtype("float16"): "F16",
    np.dtype("int32"): "I32",
    np.dtype("uint16"): "U16",
    np.dtype("uint8"): "U8",
    np.dtype("int64"): "I64",
}


CHECKSUM_PREFIX = "checksum."


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C_TABLE = _crc32c_table()


def crc32c(data):
    """CRC-32C (Castagnoli) of bytes-like `data`."""
    crc = 0xFFFFFFFF
    table = _CRC32C_TABLE
    for b in bytes(data):
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def crc32c_text(data):
    return f"crc32c:{crc32c(data):08x}"


def bf16_bits_to_f32(bits):
    """uint16 bfloat16 bit patterns -> float32 values (exact)."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16_bits(values):
    """float32 -> bfloat16 bit patterns, round to nearest even; NaN stays a quiet NaN."""
    x = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((x + 0x7FFF + ((x >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(np.asarray(values, dtype=np.float32))
    rounded[nan] = 0x7FC0
    return rounded


def read_header(path):
    """The parsed JSON header of a safetensors file (tensor entries and "__metadata__")."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n).decode("utf-8"))


def read(path, verify_checksums=False):
    """Returns (tensors: dict name -> np.ndarray, metadata: dict). Validates the layout, and with
    verify_checksums the "checksum.NAME" records when the file has them (one for every tensor)."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError(f"{path}: too short for a safetensors header")
    (n,) = struct.unpack("<Q", blob[:8])
    if n < 2 or 8 + n > len(blob):
        raise ValueError(f"{path}: header length {n} does not fit a file of {len(blob)} bytes")
    header = json.loads(blob[8 : 8 + n].decode("utf-8"))
    data = memoryview(blob)[8 + n :]
    metadata = header.pop("__metadata__", {}) or {}
    tensors = {}
    spans = []
    for name, entry in header.items():
        dtype = entry["dtype"]
        if dtype not in _STORAGE:
            raise ValueError(f"{path}: tensor {name!r}: unsupported dtype {dtype}")
        shape = tuple(int(d) for d in entry["shape"])
        begin, end = (int(v) for v in entry["data_offsets"])
        storage = _STORAGE[dtype]
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if not 0 <= begin <= end <= len(data) or end - begin != count * storage.itemsize:
            raise ValueError(f"{path}: tensor {name!r}: bad data_offsets [{begin}, {end}]")
        spans.append((begin, end, name))
        if verify_checksums and any(k.startswith(CHECKSUM_PREFIX) for k in metadata):
            recorded = metadata.get(CHECKSUM_PREFIX + name)
            actual = crc32c_text(data[begin:end])
            if recorded != actual:
                raise ValueError(f"{path}: tensor {name!r}: checksum {actual}, recorded {recorded}")
        arr = np.frombuffer(data[begin:end], dtype=storage).reshape(shape).copy()
        if dtype == "BF16":
            arr = bf16_bits_to_f32(arr).reshape(shape)
        tensors[name] = arr
    cursor = 0
    for begin, end, name in sorted(spans):
        if begin != cursor:
            raise ValueError(f"{path}: tensor {name!r} overlaps or leaves a hole")
        cursor = end
    if cursor != len(data):
        raise ValueError(f"{path}: data section has {len(data)} bytes, tensors cover {cursor}")
    return tensors, metadata


def write(path, tensors, metadata=None, dtypes=None, checksums=False):
    """Writes dict name -> array. `dtypes` may map a name to "BF16" to store float32 as bf16.
    checksums: records each tensor's CRC-32C in the metadata, as ledgerlm's writer does."""
    dtypes = dtypes or {}
    metadata = dict(metadata or {})
    header = {}
    chunks = []
    offset = 0
    for name, value in tensors.items():
        arr = np.asarray(value)  # (ascontiguousarray would turn a scalar into shape [1])
        if not arr.flags.c_contiguous:
            arr = arr.copy(order="C")
        if dtypes.get(name) == "BF16":
            dtype = "BF16"
            raw = f32_to_bf16_bits(arr.astype(np.float32)).tobytes()
        else:
            dtype = dtypes.get(name) or _FROM_NUMPY.get(arr.dtype)
            if dtype is None:
                raise ValueError(f"tensor {name!r}: unsupported numpy dtype {arr.dtype}")
            raw = arr.astype(_STORAGE[dtype], copy=False).tobytes()
        header[name] = {
            "dtype": dtype,
            "shape": list(arr.shape),
            "data_offsets": [offset, offset + len(raw)],
        }
        chunks.append(raw)
        offset += len(raw)
        if checksums:
            metadata[CHECKSUM_PREFIX + name] = crc32c_text(raw)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in chunks:
            f.write(raw)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
