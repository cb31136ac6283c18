"""``convert``: a dtype conversion as compiled kernel code performs it (TIR ``Cast``).

Written once against the backend interface, so NumPy (the concrete re-check) and Z3 (the
proof) agree on every case:

* float -> integer: saturated to the target's range, then truncated toward zero (CUDA's
  ``cvt.rzi`` with saturation, what TileLang's generated C casts compile to);
* integer -> narrower integer: wrapped modulo 2^bits (two's complement);
* anything -> bool: ``!= 0``; bool -> number: 1 / 0;
* integer -> float32/float64: the same value;
* to float16 / bfloat16 / float8 (``e4m3``, ``e5m2``, their ``fnuz`` forms): rounded to the
  nearest representable value, ties to even, subnormals included (``round_value``, checked
  against torch's own casts); float8 saturates at its largest finite value (TileLang converts
  with ``__NV_SATFINITE``), float16 / bfloat16 overflow to +-inf as torch's casts do.  NumPy
  rounds every value; Z3 rounds every numeral the same way and applies an uninterpreted
  function ``round_<format>`` to any other term (a proof holds for every such function, so for
  the real rounding too; the lifter decides where a rounding may be taken as the identity);
* float -> float32 / float64: the same value (rounding to float32 is not modelled).

``attrs``: ``dtype`` (the target, a TVM / torch dtype name) and ``source`` (the operand's).
"""
from __future__ import annotations

import re
from fractions import Fraction

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


# (significand bits with the implicit one, smallest normal exponent, largest finite value)
_FORMATS = {"float16": (11, -14, 65504.0), "bfloat16": (8, -126, float.fromhex("0x1.fep127")),
            "e4m3fnuz": (4, -7, 240.0), "e4m3": (4, -6, 448.0), "e5m2fnuz": (3, -15, 57344.0), "e5m2": (3, -14, 57344.0)}


def float_format(dtype: str) -> str | None:
    """The rounding format of a narrow float dtype (``float16``, ``bfloat16``, ``e4m3``...), else None."""
    text = str(dtype).replace("torch.", "")
    if text in ("float16", "half", "bfloat16"):
        return "bfloat16" if text == "bfloat16" else "float16"
    if text.startswith("float8"):
        name = text.split("_", 1)[1] if "_" in text else ""
        for key in sorted((k for k in _FORMATS if k.startswith("e")), key=len, reverse=True):
            if name.startswith(key.replace("fnuz", "")) and (key.endswith("fnuz") == ("fnuz" in name)):
                return key
    return None


def round_value(value: float | int | Fraction, fmt: str) -> float:
    """``value`` rounded to format ``fmt`` as the hardware (and torch) converts: to nearest,
    ties to even, gradual underflow; float8 saturates, float16/bfloat16 overflow to inf."""
    if isinstance(value, float) and not np.isfinite(value):
        return value if not fmt.startswith("e") or np.isnan(value) else float(np.sign(value)) * _FORMATS[fmt][2]
    bits, emin, largest = _FORMATS[fmt]
    q = Fraction(value)
    if q == 0:
        return 0.0
    sign, q = (-1 if q < 0 else 1), abs(q)
    exponent = max(q.numerator.bit_length() - q.denominator.bit_length(), emin)
    while Fraction(2) ** exponent > q and exponent > emin:
        exponent -= 1
    while Fraction(2) ** (exponent + 1) <= q:
        exponent += 1
    ulp = Fraction(2) ** (exponent - bits + 1)
    steps = q / ulp
    whole = steps.numerator // steps.denominator
    rest = steps - whole
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and whole % 2 == 1):
        whole += 1
    result = whole * ulp
    if result > largest:
        if fmt.startswith("e"):
            return sign * largest
        # IEEE: overflow to inf unless the exact value is below max + half an ulp of the top binade
        top_ulp = Fraction(2) ** (int(np.floor(np.log2(largest))) - bits + 1)
        return sign * (float("inf") if q >= Fraction(largest) + top_ulp / 2 else largest)
    return sign * float(result)


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
    fmt = float_format(target)
    if have == "int":
        x = xp.cast(x, "f32")
    if fmt is None:
        return x
    limit = float8_max(target)
    if limit is not None:  # saturate first: the rounding of a saturated value is itself
        x = _clamp(xp, x, -limit, limit)
    if xp.symbolic:
        return xp.rounded(x, fmt)
    return np.vectorize(lambda v: round_value(float(v), fmt), otypes=[float])(np.asarray(x, dtype=float))


def _evaluate(xp, args, attrs, ctx):
    return [convert(xp, args[0], str(attrs.get("source", "float32")), str(attrs.get("dtype", "float32")))]


register(OpRule("convert", _shape_broadcast, lambda p, ctx: pointwise_placement(p, ctx), _evaluate,
                required_attrs=("dtype",)))
