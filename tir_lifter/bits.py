"""Integer bit operations of a lifted kernel, on integers the run knows (indices, loop counters,
elements of sampled integer tensors), with their compiled meaning.

TIR types every bit operation (``x << 4`` on ``uint8`` is a ``uint8``); the CUDA C TileLang
emits computes a narrow operand promoted to ``int`` and narrows it only where the value is
stored or reinterpreted.  The two agree exactly when every intermediate result fits its TIR
dtype, so a result that does not (a left shift, sum or product that overflows, ``~x`` of an
unsigned value) is refused rather than given one of the two meanings.  A right shift of a
negative value is arithmetic (what the GPU compilers do); a shift by a negative amount or by
the width of the type or more is undefined in C and refused.  ``reinterpret`` views the same
bits as another dtype of the same width (an integer's bits as a float16, bfloat16 or float32
value, or as the other signedness).
"""
from __future__ import annotations

import re
from typing import Any

import numpy as np

from .errors import Unsupported

BIT_OPERATIONS = ("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "shift_left", "shift_right")
REINTERPRET = "reinterpret"
IN_RANGE = "in_range"  # a sum, difference or product typed 8 or 16 bits wide: it must fit that dtype
_FLOAT_BITS = {"float16": 16, "bfloat16": 16, "float32": 32, "float64": 64}


def is_integer_dtype(dtype: str | None) -> bool:
    return bool(dtype) and re.fullmatch(r"u?int\d+", str(dtype)) is not None


def width(dtype: str) -> int | None:
    if is_integer_dtype(dtype):
        return int(re.sub(r"\D", "", dtype))
    return _FLOAT_BITS.get(dtype)


def torch_dtype(dtype: str) -> Any:
    """torch's dtype for a TIR dtype name (TIR's ``float8_e4m3`` is torch's ``float8_e4m3fn``), else None."""
    import torch
    found = getattr(torch, str(dtype), None)
    if not isinstance(found, torch.dtype):
        found = getattr(torch, f"{dtype}fn", None)
    return found if isinstance(found, torch.dtype) else None


def int_range(dtype: str) -> tuple[int, int]:
    bits = width(dtype)
    return (0, 2 ** bits - 1) if dtype.startswith("uint") else (-2 ** (bits - 1), 2 ** (bits - 1) - 1)


def fits(value: int, dtype: str, line: int | None, what: str) -> int:
    """``value`` when ``dtype`` holds it; else refused (C's promoted result and TIR's typed one differ)."""
    lo, hi = int_range(dtype)
    if not lo <= value <= hi:
        raise Unsupported(line, f"{what} gives {value}, outside {dtype} ({lo}..{hi}): C computes it in a wider "
                          f"type and TIR wraps it to {dtype}, which is not modelled")
    return value


def bit_operation(name: str, values: list[int], dtype: str, line: int | None) -> int:
    """``name`` on integers (already in their dtypes' ranges) giving a ``dtype`` value."""
    what = f"{name} of {', '.join(map(str, values))} in {dtype}"
    if name == "bitwise_not":
        return fits(~values[0], dtype, line, what)
    a, b = values
    if name in ("shift_left", "shift_right"):
        if not 0 <= b < width(dtype):
            raise Unsupported(line, f"{what}: a shift by {b}, outside 0..{width(dtype) - 1}, is undefined in C")
        return fits(a << b if name == "shift_left" else a >> b, dtype, line, what)
    result = {"bitwise_and": a & b, "bitwise_or": a | b, "bitwise_xor": a ^ b}[name]  # two's complement
    return fits(result, dtype, line, what)


def reinterpret(value: int, source: str, target: str, line: int | None) -> int | float:
    """The bits of integer ``value`` (a ``source`` value) read as a ``target`` value."""
    if width(source) is None or width(source) != width(target):
        raise Unsupported(line, f"reinterpret of {source} as {target} (not the same width) is not modelled")
    bits = width(source)
    pattern = int(value) % (1 << bits)
    if is_integer_dtype(target):
        _, hi = int_range(target)
        return pattern - (1 << bits) if pattern > hi else pattern
    if target == "bfloat16":  # the high half of a float32
        number = float(np.array(pattern << 16, dtype=np.uint32).view(np.float32))
    else:
        unsigned = {16: np.uint16, 32: np.uint32, 64: np.uint64}[bits]
        real = {"float16": np.float16, "float32": np.float32, "float64": np.float64}.get(target)
        if real is None:
            raise Unsupported(line, f"reinterpret as {target} is not modelled")
        number = float(np.array(pattern, dtype=unsigned).view(real))
    if not np.isfinite(number):
        raise Unsupported(line, f"reinterpret of {value} as {target} gives {number}, which is not modelled")
    return number
