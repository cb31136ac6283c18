"""Recorded ``aten.*`` ops (the tracing frontend): element-wise, views, reductions, factories.

The tracing frontend records every op torch dispatches as ``aten.<name>.<overload>``:
``args`` are the tensor arguments in schema order (tensor lists flattened), ``attrs`` every
other schema argument by name, ``results`` one name per tensor output.  Each op here is
written as a short composition of the existing rules (``call("add", ...)`` evaluates the
``add`` rule of ``elementwise.py``), so an op's semantics still live once and each
composition is both the NumPy semantics and the Z3 encoding.

Conventions the recorder and these rules share:

* an optional tensor argument given as ``None`` (``native_layer_norm``'s ``weight``) is
  left out of ``args``; ``attrs[name] is None`` says so explicitly, otherwise the missing
  ones are the trailing optional ones (``optional_tensors``);
* dtypes are strings (``"float32"``, ``"torch.int64"``, ``"bool"``); integer tensors hold
  ints, with torch's rules: ``/`` is true division, float -> int truncates toward zero,
  ``//`` floors, ``%`` takes the sign of the divisor;
* outputs torch returns as ``None`` are dropped by the checker using ``attrs["result_mask"]``.

Placement rules do not apply to traced programs (every rank's ops are recorded), so every
aten op answers ``V`` (unknown); the equivalence check decides.
"""
from __future__ import annotations

import itertools
import math
from typing import Any, Callable, Sequence

import numpy as np
import z3

from ..backends import NumpyBackend, as_term, fresh_array, integral_term
from ..ir import Mesh
from ..placements import V
from ..registry import REGISTRY, OpRule, RankContext, ShapeError, norm_dim, register

UNIT = RankContext(Mesh(()), {})
MAX_EVAL_ELEMENTS = 1_000_000
Evaluate = Callable[[Any, list, dict, Any], list]


class AtenUnsupported(ShapeError):
    """The recorded op uses a feature these rules do not model (said with the reason)."""


# --- plumbing shared by the aten modules ---------------------------------------------------

def call(name: str, xp, args: Sequence[Any], **attrs) -> Any:
    """The single result of an existing rule (``call("exp", xp, [x])``)."""
    if "scalar" in attrs:
        attrs["scalar"] = scalar_term(xp, attrs["scalar"])
    return REGISTRY[name].evaluate(xp, list(args), attrs, UNIT)[0]


def scalar_term(xp, value: Any) -> Any:
    """Infinities (``masked_fill(mask, -inf)`` before a softmax) are one named unknown constant
    each in Z3: the same on every rank and in the reference, related to nothing else; the
    NumPy side computes with the real infinity, so a difference they hide is re-checked there."""
    if not xp.symbolic or not isinstance(value, float) or math.isfinite(value):
        if isinstance(value, float) and math.isnan(value):
            raise AtenUnsupported("a NaN constant")
        return value
    return z3.Real("plus_infinity" if value > 0 else "minus_infinity")


def _shape_by_evaluation(evaluate: Evaluate):
    """Output shapes by running the op on zeros: one definition for shapes and values."""
    def shape(shapes, attrs, mesh):
        if sum(math.prod(s) for s in shapes) > MAX_EVAL_ELEMENTS:
            raise ShapeError("too large to infer shapes by evaluation")
        with np.errstate(all="ignore"):
            results = evaluate(NumpyBackend(), [np.zeros(s, dtype=np.int64) for s in shapes], attrs, UNIT)
        return [tuple(np.shape(r)) for r in results]
    return shape


def _unknown_placement(placements, ctx):
    return [V]


def aten(kind: str, evaluate: Evaluate) -> None:
    register(OpRule(kind, _shape_by_evaluation(evaluate), _unknown_placement, evaluate, arity=(0, 64)))


def optional_tensors(args: Sequence[Any], attrs: dict, names: Sequence[str]) -> dict[str, Any]:
    """Map tensor parameters (``"weight?"`` marks an optional one) to the recorded args."""
    present = [n.rstrip("?") for n in names if not (n.endswith("?") and n.rstrip("?") in attrs
                                                      and attrs[n.rstrip("?")] is None)]
    if len(args) < len(present):  # missing ones without an explicit None: the trailing optionals
        optional = [n.rstrip("?") for n in names if n.endswith("?")]
        while len(present) > len(args) and optional and optional[-1] in present:
            present.remove(optional.pop())
    if len(args) != len(present):
        raise ShapeError(f"expected tensor arguments {', '.join(present)}, got {len(args)}")
    return dict(zip(present, args))


# --- dtypes --------------------------------------------------------------------------------

def dtype_kind(dtype: Any) -> str | None:
    """"float" | "int" | "bool" for a recorded dtype string; None when absent."""
    if dtype is None:
        return None
    text = str(dtype).replace("torch.", "")
    if text == "bool":
        return "bool"
    if text.startswith(("int", "uint", "long", "short", "i")) and not text.startswith("image"):
        return "int"
    return "float"


def kind_of(xp, x) -> str:
    """The dtype kind of a value of either backend."""
    if not xp.symbolic:
        letter = np.asarray(x).dtype.kind
        return "bool" if letter == "b" else "int" if letter in "iu" else "float"
    flat = np.asarray(x, dtype=object).reshape(-1)
    if not flat.size:
        return "float"
    first = flat[0]
    if isinstance(first, (bool, np.bool_)) or isinstance(first, z3.BoolRef):
        return "bool"
    if isinstance(first, (int, np.integer)) or isinstance(first, z3.ArithRef) and first.is_int():
        return "int"
    return "float"


def literal(xp, values: Any, kind: str) -> Any:
    """A constant array of the backend's element type (ints stay ints, bools stay bools)."""
    dtype = {"float": np.float64, "int": np.int64, "bool": bool}[kind]
    array = np.asarray(values, dtype=dtype)
    if not xp.symbolic:
        return array
    out = np.empty(array.shape, dtype=object)
    for index in np.ndindex(*array.shape):
        value = array[index]
        out[index] = z3.BoolVal(bool(value)) if kind == "bool" else as_term(
            int(value) if kind == "int" else scalar_term(xp, float(value)), integer=kind == "int")
    return out


def to_kind(xp, x, kind: str) -> Any:
    """torch's ``.to(dtype)``: float -> int truncates toward zero, anything -> bool is ``!= 0``."""
    have = kind_of(xp, x)
    if have == kind:
        return x
    if kind == "int" and have == "float":
        return round_to_int(xp, x, "trunc")
    if kind == "int" and have == "bool":
        return xp.where(x, literal(xp, np.ones(np.shape(x)), "int"), literal(xp, np.zeros(np.shape(x)), "int"))
    if kind == "float" and have == "bool":
        return xp.where(x, literal(xp, np.ones(np.shape(x)), "float"), literal(xp, np.zeros(np.shape(x)), "float"))
    return xp.cast(x, {"float": "f32", "int": "i64", "bool": "bool"}[kind])


def round_to_int(xp, x, mode: str) -> Any:
    """Integer part of real values: ``trunc`` (toward zero) or ``floor``; exact in both backends."""
    if not xp.symbolic:
        values = np.asarray(x, dtype=float)
        if not np.all(np.isfinite(values)):
            raise AtenUnsupported("conversion of a non-finite float to an integer")
        return (np.trunc(values) if mode == "trunc" else np.floor(values)).astype(np.int64)

    def one(term):
        term = as_term(term)
        if isinstance(term, z3.ArithRef) and term.is_int():
            return term
        whole = integral_term(term)
        if whole is not None:  # an integer by construction (a sum of products of integer inputs): itself
            return whole
        floor = z3.ToInt(term)
        return floor if mode == "floor" else z3.If(term >= 0, floor, -z3.ToInt(-term))

    return np.asarray(np.frompyfunc(one, 1, 1)(np.asarray(x, dtype=object)), dtype=object)


def as_float(xp, x) -> Any:
    return to_kind(xp, x, "float")


def _scalar(value: Any) -> Any:
    """Recorded scalars: whole floats stay floats (torch keeps ``2.0`` a float)."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return value
    raise AtenUnsupported(f"scalar argument {value!r} is not a number")


def _promote_scalar(xp, x, value):
    """``int_tensor op 0.5`` is a float op in torch."""
    if isinstance(value, float) and kind_of(xp, x) != "float":
        return as_float(xp, x)
    return x


# --- element-wise ----------------------------------------------------------------------------

def _unary(rule: str) -> Evaluate:
    return lambda xp, args, attrs, ctx: [call(rule, xp, [as_float(xp, args[0]) if rule not in ("neg", "abs")
                                                         else args[0]])]


for _name in ("exp", "log", "tanh", "sqrt", "rsqrt", "sigmoid", "silu", "neg", "abs", "cos", "sin", "erfinv"):
    aten(f"aten.{_name}.default", _unary(_name))
aten("aten.relu.default", lambda xp, args, attrs, ctx: [call("relu", xp, args)])
aten("aten.floor.default", lambda xp, args, attrs, ctx: [args[0] if kind_of(xp, args[0]) != "float" else
                                                          to_kind(xp, round_to_int(xp, args[0], "floor"), "float")])


def _gelu(xp, args, attrs, ctx):
    return [call("gelu_tanh" if attrs.get("approximate", "none") == "tanh" else "gelu", xp, [as_float(xp, args[0])])]


aten("aten.gelu.default", _gelu)


def _scaled(xp, x, alpha):
    return x if alpha in (None, 1) else call("mul", xp, [_promote_scalar(xp, x, alpha)], scalar=alpha)


def _add(sign: int):
    def evaluate(xp, args, attrs, ctx):
        left = args[0]
        right = args[1] if len(args) == 2 else _scalar(attrs.get("other"))
        alpha = _scalar(attrs.get("alpha", 1))
        if len(args) == 1:
            right = right * (alpha if alpha is not None else 1)
            left = _promote_scalar(xp, left, right)
            return [call("add" if sign > 0 else "sub", xp, [left], scalar=right)]
        right = _scaled(xp, right, alpha)
        return [call("add" if sign > 0 else "sub", xp, [left, right])]
    return evaluate


aten("aten.add.Tensor", _add(1))
aten("aten.add.Scalar", _add(1))
aten("aten.sub.Tensor", _add(-1))
aten("aten.sub.Scalar", _add(-1))


def _rsub(xp, args, attrs, ctx):
    """other - alpha * self."""
    alpha = _scalar(attrs.get("alpha", 1))
    scaled = _scaled(xp, args[0], alpha)
    if len(args) == 2:
        return [call("sub", xp, [args[1], scaled])]
    other = _scalar(attrs.get("other"))
    return [call("sub", xp, [_promote_scalar(xp, scaled, other)], scalar=other, reverse=True)]


aten("aten.rsub.Scalar", _rsub)
aten("aten.rsub.Tensor", _rsub)


def _mul(xp, args, attrs, ctx):
    if len(args) == 2:
        return [call("mul", xp, args)]
    other = _scalar(attrs.get("other"))
    return [call("mul", xp, [_promote_scalar(xp, args[0], other)], scalar=other)]


aten("aten.mul.Tensor", _mul)
aten("aten.mul.Scalar", _mul)


def true_divide(xp, a, b):
    """``/`` in torch: true division, also of integer tensors."""
    return call("div", xp, [as_float(xp, a), as_float(xp, b)])


def _operands(xp, args, attrs):
    if len(args) == 2:
        return args[0], args[1]
    other = _scalar(attrs.get("other"))
    return args[0], literal(xp, other, "float" if isinstance(other, float) else "int")


def _div(xp, args, attrs, ctx):
    a, b = _operands(xp, args, attrs)
    mode = attrs.get("rounding_mode")
    quotient = true_divide(xp, a, b)
    if mode is None:
        return [quotient]
    if mode not in ("trunc", "floor"):
        raise AtenUnsupported(f"div rounding_mode={mode!r}")
    rounded = round_to_int(xp, quotient, mode)
    both_int = kind_of(xp, a) != "float" and kind_of(xp, b) != "float"
    return [rounded if both_int else as_float(xp, rounded)]


for _overload in ("Tensor", "Scalar", "Tensor_mode", "Scalar_mode"):
    aten(f"aten.div.{_overload}", _div)


def _floor_divide(xp, args, attrs, ctx):
    return _div(xp, args, {**attrs, "rounding_mode": "floor"}, ctx)


def _remainder(xp, args, attrs, ctx):
    """a - b * floor(a / b): the sign of the divisor, as in Python and torch."""
    a, b = _operands(xp, args, attrs)
    (floored,) = _floor_divide(xp, [a, b], {}, ctx)
    return [call("sub", xp, [a, call("mul", xp, [b, floored])])]


aten("aten.floor_divide.default", _floor_divide)
aten("aten.floor_divide.Scalar", _floor_divide)
aten("aten.remainder.Tensor", _remainder)
aten("aten.remainder.Scalar", _remainder)


def _pow(xp, args, attrs, ctx):
    exponent = _scalar(attrs.get("exponent"))
    if isinstance(exponent, float) and exponent.is_integer() and exponent >= 0:
        exponent = int(exponent)
        return [as_float(xp, call("pow", xp, [args[0]], scalar=exponent))]
    if isinstance(exponent, float) and exponent == 0.5:
        return [call("sqrt", xp, [as_float(xp, args[0])])]
    if isinstance(exponent, float) and exponent == -0.5:
        return [call("rsqrt", xp, [as_float(xp, args[0])])]
    base = args[0] if isinstance(exponent, int) and exponent >= 0 else as_float(xp, args[0])
    return [call("pow", xp, [base], scalar=exponent)]


aten("aten.pow.Tensor_Scalar", _pow)


def _scalar_pow(xp, args, attrs, ctx):
    """``base ** t`` for a number ``base > 0`` (rotary frequencies: ``10000 ** (-arange(d) / d)``):
    ``exp(t * ln(base))``; another base (a sign that depends on the exponent's parity) is not modelled."""
    base = _scalar(attrs.get("self"))
    if not isinstance(base, (int, float)) or isinstance(base, bool) or base <= 0:
        raise AtenUnsupported(f"a power of the number {base!r}: only a positive base is modelled")
    if isinstance(base, int) and kind_of(xp, args[0]) != "float":
        raise AtenUnsupported(f"an integer power of the integer {base}: torch computes it in integers")
    return [call("exp", xp, [call("mul", xp, [as_float(xp, args[0])], scalar=math.log(base))])]


aten("aten.pow.Scalar", _scalar_pow)
aten("aten.reciprocal.default",
     lambda xp, args, attrs, ctx: [true_divide(xp, literal(xp, 1.0, "float"), as_float(xp, args[0]))])


def _compare(name: str) -> Evaluate:
    def evaluate(xp, args, attrs, ctx):
        if len(args) == 2:
            return [call(name, xp, args)]
        return [call(name, xp, args, scalar=_scalar(attrs.get("other")))]
    return evaluate


for _name in ("lt", "le", "gt", "ge", "eq", "ne"):
    aten(f"aten.{_name}.Tensor", _compare(_name))
    aten(f"aten.{_name}.Scalar", _compare(_name))

aten("aten.where.self", lambda xp, args, attrs, ctx: [call("where", xp, args)])


def _where_scalar(xp, args, attrs, ctx):
    """``where(cond, self, scalar)`` / ``where(cond, scalar, other)``: the scalar in the tensor's kind."""
    condition, tensor = args
    value = attrs["other" if "other" in attrs else "self"]
    kind = "float" if isinstance(value, float) else kind_of(xp, tensor)
    tensor = to_kind(xp, tensor, kind)
    if isinstance(value, float) and not math.isfinite(value):
        scalar = np.full(np.shape(tensor), scalar_term(xp, value), dtype=object if xp.symbolic else np.float64)
    else:
        scalar = literal(xp, np.full(np.shape(tensor), value), kind)
    pair = [tensor, scalar] if "other" in attrs else [scalar, tensor]
    return [call("where", xp, [condition, *pair])]


aten("aten.where.ScalarOther", _where_scalar)
aten("aten.where.ScalarSelf", _where_scalar)
aten("aten.logical_not.default", lambda xp, args, attrs, ctx: [call("logical_not", xp, args)])
aten("aten.logical_and.default", lambda xp, args, attrs, ctx: [call("logical_and", xp, args)])
aten("aten.logical_or.default", lambda xp, args, attrs, ctx: [call("logical_or", xp, args)])
aten("aten.bitwise_not.default", lambda xp, args, attrs, ctx: [call("logical_not", xp, args)]
     if kind_of(xp, args[0]) == "bool" else _unsupported("bitwise_not of an integer tensor"))


def _bitwise(name: str) -> Evaluate:
    def evaluate(xp, args, attrs, ctx):
        if any(kind_of(xp, a) != "bool" for a in args):
            raise AtenUnsupported(f"bitwise_{name} of integer tensors")
        return [call(f"logical_{name}", xp, args)]
    return evaluate


def _shift_or_mask(name: str) -> Evaluate:
    """Bit operations on an integer tensor and a constant that are exact arithmetic in two's
    complement: ``x << k`` = x * 2^k, ``x >> k`` = floor(x / 2^k), ``x & (2^k - 1)`` = x mod 2^k."""
    def evaluate(xp, args, attrs, ctx):
        amount = _scalar(attrs.get("other"))
        if name == "and" and kind_of(xp, args[0]) == "bool" and isinstance(amount, bool):
            return [args[0] if amount else call("logical_and", xp, [args[0], literal(xp, False, "bool")])]
        if kind_of(xp, args[0]) != "int" or isinstance(amount, bool) or not isinstance(amount, int) or amount < 0:
            raise AtenUnsupported(f"bitwise {name} of a {kind_of(xp, args[0])} tensor with {amount!r}")
        if name == "left":
            return [call("mul", xp, [args[0], literal(xp, 2 ** amount, "int")])]
        if name == "right":
            return _floor_divide(xp, [args[0], literal(xp, 2 ** amount, "int")], {}, ctx)
        if amount & (amount + 1):
            raise AtenUnsupported(f"bitwise and with {amount}, not a mask of low bits")
        return _remainder(xp, [args[0], literal(xp, amount + 1, "int")], {}, ctx)
    return evaluate


for _overload, _name in (("__lshift__.Scalar", "left"), ("bitwise_left_shift.Tensor_Scalar", "left"),
                         ("__rshift__.Scalar", "right"), ("bitwise_right_shift.Tensor_Scalar", "right"),
                         ("__and__.Scalar", "and"), ("bitwise_and.Scalar", "and")):
    aten(f"aten.{_overload}", _shift_or_mask(_name))
aten("aten.bitwise_and.Tensor", _bitwise("and"))
aten("aten.bitwise_or.Tensor", _bitwise("or"))
aten("aten.__and__.Tensor", _bitwise("and"))
aten("aten.__or__.Tensor", _bitwise("or"))


def _unsupported(reason: str):
    raise AtenUnsupported(reason)


def _masked_fill(xp, args, attrs, ctx):
    x, mask = args[0], args[1]
    if len(args) == 3:
        value = np.broadcast_to(np.asarray(args[2], dtype=object if xp.symbolic else None), np.shape(x))
        return [call("where", xp, [mask, value, x])]
    value = _scalar(attrs.get("value"))
    if kind_of(xp, x) == "int" and not float(value).is_integer():
        raise AtenUnsupported("masked_fill of an integer tensor with a fraction")
    fill = literal(xp, np.full(np.shape(x), value), kind_of(xp, x))
    return [call("where", xp, [mask, fill, x])]


aten("aten.masked_fill.Scalar", _masked_fill)
aten("aten.masked_fill.Tensor", _masked_fill)


def _clamp(xp, args, attrs, ctx):
    x = args[0]
    for bound, rule in ((attrs.get("min"), "maximum"), (attrs.get("max"), "minimum")):
        if bound is not None:
            x = _promote_scalar(xp, x, bound)
            x = getattr(xp, rule)(x, literal(xp, np.full(np.shape(x), bound), kind_of(xp, x)))
    return [x]


aten("aten.clamp.default", _clamp)
aten("aten.clamp_min.default", lambda xp, args, attrs, ctx: _clamp(xp, args, {"min": attrs.get("min")}, ctx))
aten("aten.clamp_max.default", lambda xp, args, attrs, ctx: _clamp(xp, args, {"max": attrs.get("max")}, ctx))
aten("aten.maximum.default", lambda xp, args, attrs, ctx: [xp.maximum(*np.broadcast_arrays(*args))])
aten("aten.minimum.default", lambda xp, args, attrs, ctx: [xp.minimum(*np.broadcast_arrays(*args))])


# --- derivatives torch records in backward passes ----------------------------------------------

def _gelu_backward(xp, args, attrs, ctx):
    grad, x = args
    derivative = "dgelu_tanh" if attrs.get("approximate", "none") == "tanh" else "dgelu"
    return [call("mul", xp, [grad, call(derivative, xp, [as_float(xp, x)])])]


def _threshold_backward(xp, args, attrs, ctx):
    """grad where self > threshold, else 0 (relu's backward)."""
    grad, x = args
    keep = call("gt", xp, [x], scalar=_scalar(attrs.get("threshold", 0)))
    return [call("where", xp, [keep, grad, literal(xp, np.zeros(np.shape(grad)), kind_of(xp, grad))])]


def _one_minus(xp, y):
    return call("sub", xp, [y], scalar=1, reverse=True)


aten("aten.gelu_backward.default", _gelu_backward)
aten("aten.silu_backward.default",
     lambda xp, args, attrs, ctx: [call("mul", xp, [args[0], call("dsilu", xp, [as_float(xp, args[1])])])])
aten("aten.threshold_backward.default", _threshold_backward)
aten("aten.tanh_backward.default",
     lambda xp, args, attrs, ctx: [call("mul", xp, [args[0], _one_minus(xp, call("mul", xp, [args[1], args[1]]))])])
aten("aten.sigmoid_backward.default",
     lambda xp, args, attrs, ctx: [call("mul", xp, [args[0], call("mul", xp, [args[1], _one_minus(xp, args[1])])])])


def _softplus_parts(xp, x, attrs):
    """(beta * x, beta * x above the threshold): torch's softplus is linear there."""
    beta = float(_scalar(attrs.get("beta", 1.0)))
    scaled = call("mul", xp, [x], scalar=beta) if beta != 1.0 else x
    return beta, scaled, call("gt", xp, [scaled], scalar=float(_scalar(attrs.get("threshold", 20.0))))


def _softplus(xp, args, attrs, ctx):
    """``log(1 + exp(beta * x)) / beta``, and ``x`` where ``beta * x`` passes the threshold (xIELU in
    Apertus's MLP)."""
    x = as_float(xp, args[0])
    beta, scaled, linear = _softplus_parts(xp, x, attrs)
    smooth = call("log", xp, [call("add", xp, [call("exp", xp, [scaled])], scalar=1.0)])
    if beta != 1.0:
        smooth = call("mul", xp, [smooth], scalar=1.0 / beta)
    return [call("where", xp, [linear, x, smooth])]


def _softplus_backward(xp, args, attrs, ctx):
    """``grad * sigmoid(beta * x)``, and ``grad`` where ``beta * x`` passes the threshold."""
    grad, x = args[0], as_float(xp, args[1])
    _, scaled, linear = _softplus_parts(xp, x, attrs)
    return [call("where", xp, [linear, grad, call("mul", xp, [grad, call("sigmoid", xp, [scaled])])])]


aten("aten.softplus.default", _softplus)
aten("aten.expm1.default",
     lambda xp, args, attrs, ctx: [call("sub", xp, [call("exp", xp, [as_float(xp, args[0])])], scalar=1.0)])
aten("aten.softplus_backward.default", _softplus_backward)


def _log_sigmoid_forward(xp, args, attrs, ctx):
    """(log(sigmoid(x)), buffer): torch's CPU kernel hands back ``exp(-|x|)`` as the buffer its
    backward may read (ring attention's LSE merge: ``lse - logsigmoid(lse - block_lse)``)."""
    x = as_float(xp, args[0])
    return [call("log", xp, [call("sigmoid", xp, [x])]), call("exp", xp, [call("neg", xp, [call("abs", xp, [x])])])]


def _log_sigmoid_backward(xp, args, attrs, ctx):
    """grad * sigmoid(-x), from ``self`` alone (the buffer is a function of it)."""
    grad, x = args[0], as_float(xp, args[1])
    return [call("mul", xp, [grad, call("sigmoid", xp, [call("neg", xp, [x])])])]


aten("aten.log_sigmoid_forward.default", _log_sigmoid_forward)
aten("aten.log_sigmoid_backward.default", _log_sigmoid_backward)


# --- copies, casts, dropout -------------------------------------------------------------------

def _identity(xp, args, attrs, ctx):
    return [args[0]]


for _kind in ("clone.default", "detach.default", "alias.default", "lift_fresh.default", "contiguous.default"):
    aten(f"aten.{_kind}", _identity)


def _to_copy(xp, args, attrs, ctx):
    kind = dtype_kind(attrs.get("dtype"))
    return [args[0] if kind is None else to_kind(xp, args[0], kind)]


aten("aten._to_copy.default", _to_copy)
for _overload in ("dtype", "dtype_layout", "device"):  # ``.to(...)`` seen below a tensor subclass
    aten(f"aten.to.{_overload}", _to_copy)
aten("aten.to.other", lambda xp, args, attrs, ctx: [to_kind(xp, args[0], kind_of(xp, args[1]))])


def _copy(xp, args, attrs, ctx):
    """``self.copy_(src)``: src broadcast to self's shape, in self's dtype."""
    target, source = args
    value = np.broadcast_to(np.asarray(source, dtype=object) if xp.symbolic else np.asarray(source), np.shape(target))
    value = to_kind(xp, value, kind_of(xp, target))
    return [np.array(value, dtype=object) if xp.symbolic else np.array(value)]


aten("aten.copy_.default", _copy)
aten("aten.copy.default", _copy)


def _dropout(xp, args, attrs, ctx):
    x = args[0]
    if float(attrs.get("p", 0.0)) != 0.0 and attrs.get("train", True) is not False:
        raise AtenUnsupported(f"dropout with p={attrs.get('p')} in training mode draws random masks; "
                              f"run with p=0 or in eval mode")
    return [x, literal(xp, np.ones(np.shape(x)), "bool")]


aten("aten.native_dropout.default", _dropout)
aten("aten.native_dropout_backward.default", lambda xp, args, attrs, ctx: [
    call("mul", xp, [call("mul", xp, [args[0], args[1]])], scalar=float(attrs.get("scale", 1.0)))])


# --- factories ------------------------------------------------------------------------------------

def _sizes(attrs, key: str = "size") -> tuple[int, ...]:
    value = attrs.get(key)
    if value is None:
        raise ShapeError(f"missing {key}=")
    return tuple(int(d) for d in (value if isinstance(value, (list, tuple)) else [value]))


def _fill_kind(attrs, value) -> str:
    kind = dtype_kind(attrs.get("dtype"))
    if kind is not None:
        return kind
    return "bool" if isinstance(value, bool) else "int" if isinstance(value, int) else "float"


def _full(value_of: Callable[[dict], Any], default_float: bool = False, like: bool = False) -> Evaluate:
    def evaluate(xp, args, attrs, ctx):
        value = value_of(attrs)
        if like:
            shape = np.shape(args[0]) if "size" not in attrs else _sizes(attrs)
            kind = dtype_kind(attrs.get("dtype")) or kind_of(xp, args[0])
        else:
            shape = _sizes(attrs)
            kind = dtype_kind(attrs.get("dtype")) or ("float" if default_float else _fill_kind(attrs, value))
        return [literal(xp, np.full(shape, value), kind)]
    return evaluate


aten("aten.full.default", _full(lambda a: _scalar(a.get("fill_value"))))
aten("aten.zeros.default", _full(lambda a: 0, default_float=True))
aten("aten.ones.default", _full(lambda a: 1, default_float=True))
aten("aten.zeros_like.default", _full(lambda a: 0, like=True))
aten("aten.ones_like.default", _full(lambda a: 1, like=True))
aten("aten.full_like.default", _full(lambda a: _scalar(a.get("fill_value")), like=True))
aten("aten.new_zeros.default", _full(lambda a: 0, like=True))
aten("aten.new_ones.default", _full(lambda a: 1, like=True))
aten("aten.new_full.default", _full(lambda a: _scalar(a.get("fill_value")), like=True))
aten("aten.fill_.Scalar", _full(lambda a: _scalar(a.get("value")), like=True))
aten("aten.fill.Scalar", _full(lambda a: _scalar(a.get("value")), like=True))
aten("aten.zero_.default", _full(lambda a: 0, like=True))


def _scalar_tensor(xp, args, attrs, ctx):
    value = _scalar(attrs.get("s"))
    return [literal(xp, value, dtype_kind(attrs.get("dtype")) or "float")]


aten("aten.scalar_tensor.default", _scalar_tensor)

_UNINITIALISED = itertools.count()


def _empty(xp, args, attrs, ctx):
    """Uninitialised memory: values unrelated to anything else, so reading them never proves equal."""
    shape = np.shape(args[0]) if args else _sizes(attrs)
    kind = dtype_kind(attrs.get("dtype")) or (kind_of(xp, args[0]) if args else "float")
    serial = next(_UNINITIALISED)
    if not xp.symbolic:
        rng = np.random.default_rng(serial)
        values = rng.integers(-1000, 1000, size=shape) if kind == "int" else rng.standard_normal(shape) * 1e3
        return [np.asarray(values) if kind != "bool" else rng.random(shape) < 0.5]
    sort = {"int": z3.IntSort(), "bool": z3.BoolSort(), "float": z3.RealSort()}[kind]
    return [fresh_array(f"uninitialised{serial}", tuple(shape), sort)]


for _kind in ("empty.memory_format", "empty_like.default", "new_empty.default", "empty_strided.default"):
    aten(f"aten.{_kind}", _empty)


def _arange(xp, args, attrs, ctx):
    start, end, step = attrs.get("start", 0), attrs.get("end"), attrs.get("step", 1)
    if end is None:
        raise ShapeError("arange needs end=")
    values = np.arange(start, end, step)
    kind = dtype_kind(attrs.get("dtype")) or ("int" if all(isinstance(v, int) for v in (start, end, step))
                                              else "float")
    return [literal(xp, values, kind)]


for _overload in ("default", "start", "start_step"):
    aten(f"aten.arange.{_overload}", _arange)


def _eye(xp, args, attrs, ctx):
    """The n x m identity (a chunked linear attention adds it to its lower-triangular solve)."""
    n = int(attrs["n"])
    m = int(attrs.get("m") if attrs.get("m") is not None else n)
    return [literal(xp, np.eye(n, m), dtype_kind(attrs.get("dtype")) or "float")]


aten("aten.eye.default", _eye)
aten("aten.eye.m", _eye)


def _triangle(lower: bool) -> Evaluate:
    def evaluate(xp, args, attrs, ctx):
        x = args[0]
        rows, cols = np.shape(x)[-2:]
        diagonal = int(attrs.get("diagonal", 0))
        keep = np.tril(np.ones((rows, cols), dtype=bool), diagonal) if lower else \
            np.triu(np.ones((rows, cols), dtype=bool), diagonal)
        zero = literal(xp, np.zeros(np.shape(x)), kind_of(xp, x))
        return [xp.where(np.broadcast_to(keep, np.shape(x)), x, zero)]
    return evaluate


aten("aten.tril.default", _triangle(True))
aten("aten.triu.default", _triangle(False))

from . import aten_dispatch, aten_nn, aten_views  # noqa: E402,F401  (register the rest of the aten ops)

# In-place twins (``x.add_(y)``): the recorder gives the result a new SSA name, so the value
# is the out-of-place op's, kept in self's dtype as torch does.
INPLACE = ("add.Tensor", "add.Scalar", "sub.Tensor", "sub.Scalar", "mul.Tensor", "mul.Scalar", "div.Tensor",
           "div.Scalar", "div.Tensor_mode", "masked_fill.Scalar", "masked_fill.Tensor", "clamp.default",
           "clamp_min.default", "clamp_max.default", "neg.default", "exp.default", "tanh.default", "sigmoid.default",
           "relu.default", "sqrt.default", "rsqrt.default", "pow.Tensor_Scalar", "tril.default", "triu.default",
           "silu.default", "gelu.default", "floor_divide.Tensor", "remainder.Scalar", "remainder.Tensor",
           "logical_not.default", "index_put.default", "unsqueeze.default", "squeeze.dim", "transpose.default",
           "t.default", "fill.Scalar", "scatter.value", "scatter.src", "index_add.default")


def _in_self_dtype(evaluate: Evaluate) -> Evaluate:
    def in_place(xp, args, attrs, ctx):
        results = evaluate(xp, args, attrs, ctx)
        return [to_kind(xp, results[0], kind_of(xp, args[0])) if args else results[0]] + list(results[1:])
    return in_place


for _kind in INPLACE:
    _name, _overload = _kind.split(".")
    _rule = REGISTRY.get(f"aten.{_name}.{_overload}")
    if _rule is not None and f"aten.{_name}_.{_overload}" not in REGISTRY:
        aten(f"aten.{_name}_.{_overload}", _in_self_dtype(_rule.evaluate))
for _kind in ("new_empty_strided.default",):
    aten(f"aten.{_kind}", _empty)


def _into_out(evaluate: Evaluate) -> Evaluate:
    """``op(..., out=t)``: the functional op on the other arguments, in ``t``'s dtype (the
    recorder passes ``out`` as the last tensor argument and names the written value as the result)."""
    def with_out(xp, args, attrs, ctx):
        if not args:
            raise ShapeError("an out= op without its out tensor")
        results = evaluate(xp, list(args[:-1]), attrs, ctx)
        return [to_kind(xp, results[0], kind_of(xp, args[-1]))] + list(results[1:])
    return with_out


# ops whose ``.out`` overload has the functional overload's arguments plus ``out`` (checked
# against torch's schemas in tests/traced/test_aten_rules.py)
OUT_VARIANTS = ("exp", "log", "tanh", "sqrt", "rsqrt", "sigmoid", "neg", "abs", "relu", "silu", "gelu", "add", "sub",
                "mul", "div", "maximum", "minimum", "clamp", "mm", "bmm", "addmm", "cat", "stack", "zeros", "ones")
for _name in OUT_VARIANTS:
    _functional = REGISTRY.get(f"aten.{_name}.default") or REGISTRY.get(f"aten.{_name}.Tensor")
    if _functional is not None and f"aten.{_name}.out" not in REGISTRY:
        aten(f"aten.{_name}.out", _into_out(_functional.evaluate))
# FSDP2's packing of gradients for its reduce-scatter: ``torch._chunk_cat(tensors, dim, n, out=out)``
aten("fsdp.chunk_cat.default", _into_out(REGISTRY["aten._chunk_cat.default"].evaluate))
