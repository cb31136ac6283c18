"""Element-wise ops: arithmetic, activations, comparisons, selection, casts.

Placement rules here follow from linearity: a partial sum may pass through an op only when
the op is linear in that operand (``neg``, ``x * c``, ``P + P``); everything else must see
the reduced value.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..placements import Partial, Placement, R, Replicate, Shard, V, Varying
from ..registry import (OpRule, PlacementContext, PlacementError, ShapeError, any_varying, describe, register)


def broadcast_shapes(shapes: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ShapeError("shapes " + " and ".join(str(list(s)) for s in shapes) + " do not broadcast") from None


def _shape_broadcast(shapes, attrs, mesh):
    return [broadcast_shapes(shapes)]


def _aligned(placement: Placement, shape: tuple[int, ...], out_ndim: int) -> Placement:
    """Shard dims renumbered in the output's coordinates (NumPy broadcasting aligns right)."""
    if isinstance(placement, Shard):
        return Shard(placement.dim % max(len(shape), 1) + out_ndim - len(shape))
    return placement


def pointwise_placement(placements: Sequence[Placement], ctx: PlacementContext, *,
                        linear_in: tuple[int, ...] = (), partial_ops: tuple[str, ...] = ("sum", "avg")
                        ) -> list[Placement]:
    """The element-wise sharding rule for one mesh dim.

    ``linear_in`` lists the operands the op is linear in when all the others are replicated
    (``mul``: both, one at a time; ``add``: both together).
    """
    out_ndim = len(broadcast_shapes(ctx.shapes))
    aligned = [_aligned(p, s, out_ndim) for p, s in zip(placements, ctx.shapes)]
    if any_varying(aligned):
        return [V]
    shards = {p for p in aligned if isinstance(p, Shard)}
    partials = [i for i, p in enumerate(aligned) if isinstance(p, Partial)]
    if len(shards) > 1:
        raise PlacementError(f"{ctx.op} mixes operands sharded along different dims over {ctx.mesh_dim} "
                             f"({', '.join(str(p) for p in placements)})")
    if shards:
        if partials:
            raise PlacementError(f"{ctx.op} mixes a shard and a partial sum over {ctx.mesh_dim}")
        (shard,) = shards
        for placement, shape in zip(aligned, ctx.shapes):
            offset = out_ndim - len(shape)
            if isinstance(placement, Replicate) and shard.dim >= offset and shape[shard.dim - offset] != 1:
                raise PlacementError(f"{ctx.op} combines a tensor sharded along dim {shard.dim} over {ctx.mesh_dim} "
                                     f"with a replicated one that is not broadcast along that dim")
        return [shard]
    if not partials:
        return [R]
    kinds = {aligned[i].op for i in partials}
    if len(kinds) > 1 or next(iter(kinds)) not in partial_ops:
        raise PlacementError(f"{ctx.op} is not linear, but operand {partials[0] + 1} is "
                             f"{describe(aligned[partials[0]], ctx.mesh_dim)}: reduce it first")
    if linear_in == "all":
        if len(partials) == len(aligned):
            return [aligned[partials[0]]]
        raise PlacementError(f"{ctx.op} of {describe(aligned[partials[0]], ctx.mesh_dim)} and a replicated value "
                             f"counts the replicated value {ctx.size} times")
    if len(partials) == 1 and partials[0] in linear_in:
        return [aligned[partials[0]]]
    if len(partials) > 1:
        raise PlacementError(f"{ctx.op} of two partial sums over {ctx.mesh_dim} is not the partial of the result")
    raise PlacementError(f"{ctx.op} is not linear in operand {partials[0] + 1}, which is "
                         f"{describe(aligned[partials[0]], ctx.mesh_dim)}: reduce it first")


def _scalar_or_arg(args, attrs, xp):
    if len(args) == 2:
        return args[0], args[1]
    scalar = attrs.get("scalar")
    if scalar is None:
        raise ShapeError("expected a second operand or scalar=")
    return (scalar, args[0]) if attrs.get("reverse") else (args[0], scalar)


def _binary(name: str, function, linear_in, partial_ops=("sum", "avg")):
    def evaluate(xp, args, attrs, ctx):
        left, right = _scalar_or_arg(args, attrs, xp)
        return [function(xp, left, right)]

    def placement(placements, ctx):
        if len(placements) == 1:  # tensor op scalar
            scalar_linear = name in ("mul", "div") and not ctx.attrs.get("reverse")
            return pointwise_placement(placements, ctx, linear_in=(0,) if scalar_linear else (),
                                       partial_ops=partial_ops)
        return pointwise_placement(placements, ctx, linear_in=linear_in, partial_ops=partial_ops)

    register(OpRule(name, _shape_broadcast, placement, evaluate, arity=(1, 2)))


_binary("add", lambda xp, a, b: a + b, "all")
_binary("sub", lambda xp, a, b: a - b, "all")
_binary("mul", lambda xp, a, b: a * b, (0, 1))
_binary("div", lambda xp, a, b: xp.divide(a, b), (0,))
# Python's and torch's integer-division pair: floor of the true quotient, remainder with the
# divisor's sign.  Neither is linear, so partial sums must be reduced first.
_binary("floordiv", lambda xp, a, b: xp.floordiv(a, b), (), partial_ops=())
_binary("mod", lambda xp, a, b: xp.mod(a, b), (), partial_ops=())


def _pow_evaluate(xp, args, attrs, ctx):
    exponent = attrs.get("scalar", 2)
    if isinstance(exponent, int) and exponent >= 0:
        result = np.ones_like(args[0]) if not xp.symbolic else xp.full(np.shape(args[0]), 1)
        for _ in range(exponent):
            result = result * args[0]
        return [result]
    if xp.symbolic:
        return [xp.unary(f"pow_{exponent}", args[0])]
    return [np.power(np.asarray(args[0], dtype=float), exponent)]


register(OpRule("pow", _shape_broadcast, lambda p, ctx: pointwise_placement(p, ctx), _pow_evaluate))


def _unary(name: str, evaluate, linear: bool = False, monotone: bool = False):
    partial_ops = ("sum", "avg") if linear else (("max", "min") if monotone else ())

    def placement(placements, ctx):
        return pointwise_placement(placements, ctx, linear_in=(0,), partial_ops=partial_ops)

    register(OpRule(name, _shape_broadcast, placement, evaluate))


_unary("neg", lambda xp, args, attrs, ctx: [-args[0]], linear=True)
_unary("identity", lambda xp, args, attrs, ctx: [args[0]], linear=True)
for _name in ("exp", "log", "tanh", "sqrt", "rsqrt", "sigmoid", "silu", "gelu", "gelu_tanh", "cos", "sin", "erfinv"):
    _unary(_name, lambda xp, args, attrs, ctx, _n=_name: [xp.unary(_n, args[0])])
_unary("relu", lambda xp, args, attrs, ctx: [xp.maximum(args[0], xp.zeros(np.shape(args[0]),
                                                                       "i64" if xp.is_int(args[0]) else "f32"))],
       monotone=True)
_unary("abs", lambda xp, args, attrs, ctx: [xp.maximum(args[0], -args[0])])
_unary("cast", lambda xp, args, attrs, ctx: [xp.cast(args[0], str(attrs.get("dtype", "f32")))], linear=True)


def _compare(name: str):
    def evaluate(xp, args, attrs, ctx):
        left, right = _scalar_or_arg(args, attrs, xp)
        return [xp.compare(name, left, right)]

    register(OpRule(name, _shape_broadcast, lambda p, ctx: pointwise_placement(p, ctx), evaluate, arity=(1, 2)))


for _name in ("lt", "le", "gt", "ge", "eq", "ne"):
    _compare(_name)

register(OpRule("logical_and", _shape_broadcast, lambda p, ctx: pointwise_placement(p, ctx),
                lambda xp, args, attrs, ctx: [xp.logical("and", args[0], args[1])], arity=(2, 2)))
register(OpRule("logical_or", _shape_broadcast, lambda p, ctx: pointwise_placement(p, ctx),
                lambda xp, args, attrs, ctx: [xp.logical("or", args[0], args[1])], arity=(2, 2)))
register(OpRule("logical_not", _shape_broadcast, lambda p, ctx: pointwise_placement(p, ctx),
                lambda xp, args, attrs, ctx: [xp.logical("not", args[0])]))


def _where_placement(placements, ctx):
    """Selecting between two partial sums with a replicated condition selects their sum."""
    condition, *values = placements
    if isinstance(condition, Partial):
        raise PlacementError(f"where's condition is {describe(condition, ctx.mesh_dim)}")
    if isinstance(condition, Replicate) and all(isinstance(v, Partial) for v in values) and values[0] == values[1]:
        return [values[0]]
    return pointwise_placement(placements, ctx)


register(OpRule("where", _shape_broadcast, _where_placement,
                lambda xp, args, attrs, ctx: [xp.where(args[0], args[1], args[2])], arity=(3, 3)))


def _masked_fill_evaluate(xp, args, attrs, ctx):
    x, mask = args
    value = attrs.get("value", 0.0)
    integer = xp.is_int(x) and float(value).is_integer()  # filling int ids keeps them ints
    fill = xp.full(np.shape(x), int(value) if integer else value, "i64" if integer else "f32")
    return [xp.where(mask, fill, x)]


def _masked_fill_placement(placements, ctx):
    x, mask = placements
    if isinstance(x, Partial):
        if ctx.attrs.get("value", 0.0) != 0 or isinstance(mask, (Partial, Varying)):
            raise PlacementError(f"masked_fill of {describe(x, ctx.mesh_dim)} with a non-zero value adds it "
                                 f"{ctx.size} times")
        return [x]
    return pointwise_placement(placements, ctx)


register(OpRule("masked_fill", _shape_broadcast, _masked_fill_placement, _masked_fill_evaluate, arity=(2, 2)))
