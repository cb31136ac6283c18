"""JSON plus raw array bytes between the tool and the children that run user code: never pickle.

A message is ``b"VACM" | u64 JSON length | JSON | arrays``; the JSON holds ``"arrays"``, an
index of (name, dtype, shape, offset, nbytes) into the bytes after it.  The reader accepts a
short list of dtypes and checks every bound, so nothing a child wrote can run code in the
process that reads it (a child runs the user's code: its answer is as untrusted as the code).
"""
from __future__ import annotations

import json
import math
import struct
from typing import Any, Mapping

import numpy as np

MAGIC = b"VACM"
DTYPES = frozenset({"float64", "float32", "float16", "int64", "int32", "int16", "int8", "uint8", "bool"})
MAX_BYTES = 1024 * 2**20
_LENGTH = struct.Struct("<Q")


class MessageError(ValueError):
    """The bytes are not a message this reader accepts."""


def pack(meta: Mapping[str, Any], arrays: Mapping[str, Any] | None = None) -> bytes:
    """``meta`` (JSON values) and named arrays as one message."""
    index, blob, offset = [], bytearray(), 0
    for name, value in (arrays or {}).items():
        array = np.asarray(value, order="C")
        if array.dtype.name not in DTYPES:
            array = array.astype(np.float64)
        data = array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes()
        index.append({"name": str(name), "dtype": array.dtype.name, "shape": [int(n) for n in array.shape],
                      "offset": offset, "nbytes": len(data)})
        blob.extend(data)
        offset += len(data)
    header = json.dumps({**meta, "arrays": index}, allow_nan=False).encode()
    return MAGIC + _LENGTH.pack(len(header)) + header + bytes(blob)


def unpack(data: bytes) -> tuple[dict, dict[str, np.ndarray]]:
    """(meta, arrays) of a message; ``MessageError`` for anything else."""
    if len(data) > MAX_BYTES or len(data) < len(MAGIC) + _LENGTH.size or not data.startswith(MAGIC):
        raise MessageError("not a message of the confirmation runs")
    (length,) = _LENGTH.unpack_from(data, len(MAGIC))
    start = len(MAGIC) + _LENGTH.size
    if start + length > len(data):
        raise MessageError("truncated message")
    try:
        meta = json.loads(data[start:start + length].decode())
    except (UnicodeDecodeError, ValueError) as error:
        raise MessageError(f"unreadable message header ({error})") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("arrays"), list):
        raise MessageError("message header is not an object with an array index")
    blob = memoryview(data)[start + length:]
    arrays = {}
    for entry in meta.pop("arrays"):
        name, dtype, shape = (entry.get(k) for k in ("name", "dtype", "shape")) if isinstance(entry, dict) \
            else (None, None, None)
        offset, nbytes = (entry.get("offset"), entry.get("nbytes")) if isinstance(entry, dict) else (None, None)
        if not isinstance(name, str) or dtype not in DTYPES or not isinstance(shape, list) \
                or not all(type(n) is int and n >= 0 for n in shape) \
                or type(offset) is not int or type(nbytes) is not int or offset < 0 or offset + nbytes > len(blob) \
                or math.prod(shape) * np.dtype(dtype).itemsize != nbytes:
            raise MessageError(f"malformed array entry {str(name)[:80]!r}")
        array = np.frombuffer(blob, dtype=np.dtype(dtype).newbyteorder("<"), count=math.prod(shape), offset=offset)
        arrays[name] = array.reshape(shape).astype(dtype)
    return meta, arrays
