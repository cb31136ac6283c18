"""Ops that create tensors or ask where they run: zeros/ones/const, rank, world_size, local_chunk."""
from __future__ import annotations

import numpy as np

from ..ir import eval_dim, mesh_sizes
from ..placements import Partial, Placement, R, Shard, V, Varying
from ..registry import OpRule, PlacementContext, PlacementError, ShapeError, describe, norm_dim, register


def _shape_attr(attrs):
    return tuple(int(d) for d in attrs.get("shape", ()))


register(OpRule("zeros", lambda s, a, m: [_shape_attr(a)], lambda p, ctx: [R],
                lambda xp, args, attrs, ctx: [xp.zeros(_shape_attr(attrs), str(attrs.get("dtype", "f32")))],
                arity=(0, 0)))
register(OpRule("ones", lambda s, a, m: [_shape_attr(a)], lambda p, ctx: [R],
                lambda xp, args, attrs, ctx: [xp.full(_shape_attr(attrs), 1, str(attrs.get("dtype", "f32")))],
                arity=(0, 0)))


def _const_value(attrs, ctx):
    value = attrs.get("value", 0)
    if isinstance(value, str):  # a dim expression over mesh-dim sizes, e.g. "V/tp_size"
        value = eval_dim(value, mesh_sizes(ctx.mesh))
    return value


register(OpRule("const", lambda s, a, m: [()], lambda p, ctx: [R],
                lambda xp, args, attrs, ctx: [xp.full((), _const_value(attrs, ctx), str(attrs.get("dtype", "f32")))],
                arity=(0, 0)))


def _coordinate_placement(placements, ctx: PlacementContext) -> list[Placement]:
    return [V if ctx.attrs.get("mesh_dim") == ctx.mesh_dim else R]


register(OpRule("rank", lambda s, a, m: [()], _coordinate_placement,
                lambda xp, args, attrs, ctx: [xp.full((), ctx.coords[attrs["mesh_dim"]], "i64")],
                arity=(0, 0), required_attrs=("mesh_dim",), uses_coords=True))
register(OpRule("world_size", lambda s, a, m: [()], lambda p, ctx: [R],
                lambda xp, args, attrs, ctx: [xp.full((), ctx.size(attrs["mesh_dim"]), "i64")],
                arity=(0, 0), required_attrs=("mesh_dim",)))


def _local_chunk_shape(shapes, attrs, mesh):
    shape = shapes[0]
    norm_dim(int(attrs["dim"]), len(shape))
    return [tuple(shape)]


def _local_chunk_placement(placements, ctx: PlacementContext) -> list[Placement]:
    (placement,) = placements
    if ctx.attrs["mesh_dim"] != ctx.mesh_dim:
        return [placement]
    dim = norm_dim(int(ctx.attrs["dim"]), len(ctx.shapes[0]))
    if isinstance(placement, (Varying, Partial)):
        return [V]
    if isinstance(placement, Shard):
        raise PlacementError(f"taking this rank's chunk of a value already {describe(placement, ctx.mesh_dim)}: "
                             f"the result is a shard of a shard")
    return [Shard(dim)]


def _local_chunk_evaluate(xp, args, attrs, ctx):
    x = args[0]
    dim = norm_dim(int(attrs["dim"]), np.ndim(x))
    size = ctx.size(attrs["mesh_dim"])
    if np.shape(x)[dim] % size:
        raise ShapeError(f"dim {dim} of size {np.shape(x)[dim]} does not split into {size} equal chunks")
    return [np.split(x, size, axis=dim)[ctx.coords[attrs["mesh_dim"]]]]


register(OpRule("local_chunk", _local_chunk_shape, _local_chunk_placement, _local_chunk_evaluate,
                required_attrs=("mesh_dim", "dim"), uses_coords=True))


# ``call`` is inlined before any evaluation (verifier/calls.py); registered for the structure check.
register(OpRule("call", lambda s, a, m: [], lambda p, ctx: [], arity=(0, 64), required_attrs=("forward",)))
