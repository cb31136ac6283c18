"""Messages between the tool and the confirmation runs: named arrays and JSON values in
``frontends.wire``'s data-only format (never pickle: a child runs the user's code, so its answer
is as untrusted as the code)."""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from frontends import wire

MessageError = wire.WireError
_CARRIED = frozenset({"float64", "float32", "float16", "int64", "int32", "int16", "int8", "uint8", "bool"})


def numbers(tensor: Any) -> np.ndarray:
    """A torch tensor's values as a NumPy array a message carries (half precisions as float32)."""
    import torch

    tensor = tensor.detach()
    if tensor.dtype in (torch.bfloat16, torch.float16):
        tensor = tensor.float()
    return tensor.contiguous().cpu().numpy().copy()


def pack(meta: Mapping[str, Any], arrays: Mapping[str, Any] | None = None) -> bytes:
    """``meta`` (JSON values) and named arrays as one message (other dtypes as float64)."""
    carried = {}
    for name, value in (arrays or {}).items():
        array = np.asarray(value)
        carried[str(name)] = array if array.dtype.name in _CARRIED else array.astype(np.float64)
    return wire.encode({"meta": dict(meta), "arrays": carried})


def unpack(data: bytes) -> tuple[dict, dict[str, np.ndarray]]:
    """(meta, arrays) of a message; ``MessageError`` for anything else."""
    body = wire.decode(data)
    if not (isinstance(body, dict) and isinstance(body.get("meta"), dict) and isinstance(body.get("arrays"), dict)
            and all(isinstance(value, np.ndarray) and value.dtype.name in _CARRIED
                    for value in body["arrays"].values())):
        raise MessageError("not a message of the confirmation runs")
    return body["meta"], body["arrays"]
