"""``convert``: a dtype conversion as compiled kernel code performs it (TIR ``Cast``).

Written once against the backend interface, so NumPy (the concrete re-check) and Z3 (the
proof) agree on every case:

* float -> integer: saturated to the target's range, then truncated toward zero (CUDA's
  ``cvt.rzi`` with saturation, what TileLang's generated C casts compile to);
* integer -> narrower integer: wrapped modulo 2^bits (two's complement);
* anything -> bool: ``!= 0``; bool -> number: 1 / 0;
* integer -> float: the same value;
* float -> float8 (``e4m3``, ``e5m2``): saturated to the largest finite value (TileLang converts
  with ``__NV_SATFINITE``);
* float -> float16 / bfloat16 / float32 / float64: the same value.  Rounding is not modelled,
  as everywhere in the verifier (arithmetic is exact over the reals, the reference is too);
  ``rounded`` says when a conversion loses precision so proofs can state it.

``attrs``: ``dtype`` (the target, a TVM / torch dtype name) and ``source`` (the operand's).
"""
from __future__ import annotations

import re

import numpy as np

from ..registry import OpRule, register
from .elementwise import _shape_broadcast, pointwise_placement

# largest finite value of each saturating float8 format
_FLOAT8_MAX = {"e4m3": 448.0, "e5m2": 57344.0, "e4m3fnuz": 240.0, "e5m2fnuz": 57344.0}
_PRECISION = {"float64": 53, "float32": 24, "tfloat32": 11, "float16": 11, "bfloat16": 8}


def kind(dtype: str) -> str:
    """"bool" | "int" | "float" of a dtype name (``int32``, ``uint8``, ``float8_e4m3fn``)."""
    text = str(dtype).replace("torch.", "")
    if text == "bool":
        return "bool"
    return "int" if re.match(r"u?int\d*$", text) else "float"


def int_range(dtype: str) -> tuple[int, int]:
    text = str(dtype).replace("torch.", "")
    bits = int(re.sub(r"\D", "", text) or 32)
    if text.startswith("uint"):
        return 0, 2 ** bits - 1
    return -2 ** (bits - 1), 2 ** (bits - 1) - 1


def float8_max(dtype: str) -> float | None:
    text = str(dtype).replace("torch.", "")
    if not text.startswith("float8"):
        return None
    name = text.split("_", 1)[1] if "_" in text else ""
    for key in sorted(_FLOAT8_MAX, key=len, reverse=True):
        if name.startswith(key) and (not key.endswith("fnuz") or "fnuz" in name):
            return _FLOAT8_MAX[key]
    return None


def rounded(source: str, target: str) -> bool:
    """True when a float -> float conversion may round (fewer significand bits)."""
    if kind(source) != "float" or kind(target) != "float":
        return kind(target) == "float" and kind(source) == "int"  # large ints lose precision too
    have, want = _PRECISION.get(str(source), 24), _PRECISION.get(str(target), 4 if "float8" in str(target) else 24)
    return want < have


def _full(xp, like, value, integer: bool):
    return xp.full(np.shape(like), value, "i64" if integer else "f32")


def _clamp(xp, x, lo: float, hi: float):
    """``x`` limited to [lo, hi] (with selections: no max/min term sharing between elements)."""
    low, high = _full(xp, x, lo, False), _full(xp, x, hi, False)
    x = xp.where(xp.compare("lt", x, low), low, x)
    return xp.where(xp.compare("gt", x, high), high, x)


def convert(xp, x, source: str, target: str):
    have, want = kind(source), kind(target)
    if want == "bool":
        return xp.cast(x, "bool")
    if have == "bool":
        return xp.cast(xp.cast(x, "i64"), "i64" if want == "int" else "f32")
    if want == "int":
        lo, hi = int_range(target)
        if have == "float":  # saturate first: the same as after truncation for finite values, and defined for inf
            return xp.cast(_clamp(xp, x, float(lo), float(hi)), "i64")
        lo_have, hi_have = int_range(source)
        if lo_have >= lo and hi_have <= hi:
            return x
        span = _full(xp, x, 2 ** (hi - lo).bit_length(), True)
        return xp.mod(x - _full(xp, x, lo, True), span) + _full(xp, x, lo, True)
    if have == "int":
        return xp.cast(x, "f32")
    limit = float8_max(target)
    if limit is not None:
        return _clamp(xp, x, -limit, limit)
    return x


def _evaluate(xp, args, attrs, ctx):
    return [convert(xp, args[0], str(attrs.get("source", "float32")), str(attrs.get("dtype", "float32")))]


register(OpRule("convert", _shape_broadcast, lambda p, ctx: pointwise_placement(p, ctx), _evaluate,
                required_attrs=("dtype",)))
