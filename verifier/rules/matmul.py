"""matmul and linear.

The sharding rule is the table DTensor uses, written over *roles* of tensor dims rather than
indices: ``m`` rows of the left operand, ``k`` the contracted dim, ``n`` columns of the right
operand, ``b`` a batch dim.  Row ``(left, right) -> out``.
"""
from __future__ import annotations

from ..placements import Partial, Placement, R, Replicate, Shard, V, Varying
from ..registry import OpRule, PlacementContext, PlacementError, ShapeError, describe, register
from .elementwise import broadcast_shapes

MATMUL_TABLE: dict[tuple[str, str], str] = {
    ("R", "R"): "R",
    ("m", "R"): "m",
    ("R", "n"): "n",
    ("k", "k"): "P",
    ("P", "R"): "P",
    ("R", "P"): "P",
    ("b", "b"): "b",
    ("b", "R"): "b",
}


def _matmul_shape(shapes, attrs, mesh):
    left, right = shapes
    if len(left) < 2 or len(right) < 2:
        raise ShapeError(f"matmul needs operands of rank >= 2, got {list(left)} and {list(right)}")
    if left[-1] != right[-2]:
        raise ShapeError(f"matmul contracts {left[-1]} with {right[-2]} ({list(left)} @ {list(right)})")
    batch = broadcast_shapes([left[:-2], right[:-2]])
    return [tuple(batch) + (left[-2], right[-1])]


def _role(placement: Placement, ndim: int, side: str, out_ndim: int) -> tuple[str, int | None]:
    if isinstance(placement, Replicate):
        return "R", None
    if isinstance(placement, Partial):
        return ("P" if placement.op == "sum" else "P?"), None
    if isinstance(placement, Varying):
        return "V", None
    dim = placement.dim % ndim
    if dim == ndim - 1:
        return ("k" if side == "left" else "n"), None
    if dim == ndim - 2:
        return ("m" if side == "left" else "k"), None
    return "b", dim + out_ndim - ndim


def matmul_placement(placements, ctx: PlacementContext) -> list[Placement]:
    left_shape, right_shape = ctx.shapes[:2]
    out_ndim = max(len(left_shape), len(right_shape))
    (left_role, left_b), (right_role, right_b) = (
        _role(placements[0], len(left_shape), "left", out_ndim),
        _role(placements[1], len(right_shape), "right", out_ndim))
    if "V" in (left_role, right_role):
        return [V]
    if left_role == "b" and right_role == "b" and left_b != right_b:
        raise PlacementError(f"matmul operands are sharded along different batch dims over {ctx.mesh_dim}")
    if left_role == "b" and right_role == "R" and len(right_shape) == out_ndim and right_shape[left_b] != 1:
        raise PlacementError(f"matmul batch dim {left_b} is sharded over {ctx.mesh_dim} on the left only")
    result = MATMUL_TABLE.get((left_role, right_role))
    if result is None:
        raise PlacementError(f"matmul of a left operand {describe(placements[0], ctx.mesh_dim)} and a right "
                             f"operand {describe(placements[1], ctx.mesh_dim)} has no valid sharding"
                             + (": the contracted dim must be sharded on both sides" if "k" in (left_role, right_role)
                                else ""))
    return [{"R": R, "P": Partial("sum"), "m": Shard(out_ndim - 2), "n": Shard(out_ndim - 1),
             "b": Shard(left_b if left_b is not None else right_b or 0)}[result]]


register(OpRule("matmul", _matmul_shape, matmul_placement,
                lambda xp, args, attrs, ctx: [xp.matmul(args[0], args[1])], arity=(2, 2)))


def _transpose_last(array):
    return array.swapaxes(-1, -2)


def _linear_shape(shapes, attrs, mesh):
    x, weight = shapes[:2]
    if len(weight) != 2:
        raise ShapeError(f"linear weight must be 2-d [out, in], got {list(weight)}")
    (out,) = _matmul_shape([x, (weight[1], weight[0])], attrs, mesh)
    if len(shapes) == 3 and tuple(shapes[2]) != (weight[0],):
        raise ShapeError(f"linear bias must have shape [{weight[0]}], got {list(shapes[2])}")
    return [out]


def _linear_placement(placements, ctx: PlacementContext) -> list[Placement]:
    weight = placements[1]
    weight_t = Shard(1 - weight.dim % 2) if isinstance(weight, Shard) else weight
    x_shape, w_shape = ctx.shapes[:2]
    inner = PlacementContext(ctx.mesh_dim, ctx.size, (x_shape, (w_shape[1], w_shape[0])), ctx.attrs, "linear")
    (out,) = matmul_placement([placements[0], weight_t], inner)
    if len(placements) == 3:
        bias = placements[2]
        if isinstance(out, Partial) and not isinstance(bias, Partial):
            raise PlacementError(f"linear adds its bias to a partial sum over {ctx.mesh_dim}, so the reduced result "
                                 f"holds the bias {ctx.size} times: add the bias after the reduction")
        expected_bias = Shard(0) if out == Shard(len(x_shape) - 1) else out
        if isinstance(out, Shard) and out.dim == len(x_shape) - 1 and bias != Shard(0):
            raise PlacementError(f"linear output is sharded along its features over {ctx.mesh_dim} but the bias is "
                                 f"{describe(bias, ctx.mesh_dim)}")
        if not isinstance(out, (Shard, Partial)) and bias != expected_bias and not isinstance(bias, Varying):
            raise PlacementError(f"linear bias is {describe(bias, ctx.mesh_dim)} but the product is "
                                 f"{describe(out, ctx.mesh_dim)}")
    return [out]


def _linear_evaluate(xp, args, attrs, ctx):
    out = xp.matmul(args[0], _transpose_last(args[1]))
    return [out + args[2] if len(args) == 3 else out]


register(OpRule("linear", _linear_shape, _linear_placement, _linear_evaluate, arity=(2, 3)))
