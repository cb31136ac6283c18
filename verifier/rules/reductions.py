"""Reductions (sum, mean, amax) and normalisations over the last dim (softmax, norms).

Reducing over a sharded dim is legal and yields a partial result (sum -> P(sum), mean over
equal shards -> P(avg), max -> P(max)); normalising over a sharded dim is not, because each
rank would normalise only its slice.
"""
from __future__ import annotations

import numpy as np

from ..placements import Partial, Placement, R, Shard, V, Varying
from ..registry import OpRule, PlacementContext, PlacementError, ShapeError, describe, norm_dim, register

REDUCTION_PARTIAL = {"sum": "sum", "mean": "avg", "amax": "max"}


def reduced_dims(attrs, ndim: int) -> tuple[int, ...]:
    dim = attrs.get("dim")
    if dim is None:
        return tuple(range(ndim))
    dims = dim if isinstance(dim, (list, tuple)) else [dim]
    return tuple(sorted(norm_dim(int(d), ndim) for d in dims))


def _reduction_shape(shapes, attrs, mesh):
    (shape,) = shapes
    dims = reduced_dims(attrs, len(shape))
    if attrs.get("keepdim"):
        return [tuple(1 if i in dims else size for i, size in enumerate(shape))]
    return [tuple(size for i, size in enumerate(shape) if i not in dims)]


def _reduction(name: str):
    def placement(placements, ctx: PlacementContext) -> list[Placement]:
        (placement,) = placements
        ndim = len(ctx.shapes[0])
        dims = reduced_dims(ctx.attrs, ndim)
        if isinstance(placement, Varying):
            return [V]
        if isinstance(placement, Partial):
            if name == "amax" and placement.op == "max" or name in ("sum", "mean") and placement.op in ("sum", "avg"):
                return [placement]
            raise PlacementError(f"{name} of {describe(placement, ctx.mesh_dim)} is not the {placement.op} of the "
                                 f"ranks' {name}s: reduce first")
        if isinstance(placement, Shard):
            dim = placement.dim % ndim
            if dim in dims:
                return [Partial(REDUCTION_PARTIAL[name])]
            if ctx.attrs.get("keepdim"):
                return [placement]
            return [Shard(dim - sum(1 for d in dims if d < dim))]
        return [R]

    def evaluate(xp, args, attrs, ctx):
        x = args[0]
        dims = reduced_dims(attrs, np.ndim(x))
        keep = bool(attrs.get("keepdim"))
        if name == "amax":
            result = x
            for d in sorted(dims, reverse=True):
                parts = [np.take(result, i, axis=d) for i in range(np.shape(result)[d])]
                acc = xp.maximum_of(parts)
                result = np.expand_dims(acc, d) if keep else acc
            return [np.asarray(result, dtype=object) if xp.symbolic else np.asarray(result)]
        total = np.sum(x, axis=dims, keepdims=keep)
        if name == "mean":
            count = int(np.prod([np.shape(x)[d] for d in dims])) if dims else 1
            total = total / count
        return [np.asarray(total, dtype=object) if xp.symbolic else np.asarray(total)]

    register(OpRule(name, _reduction_shape, placement, evaluate))


for _name in ("sum", "mean", "amax"):
    _reduction(_name)


def _same_shape(shapes, attrs, mesh):
    x = shapes[0]
    if len(shapes) > 1 and tuple(shapes[1]) != (x[-1],):
        raise ShapeError(f"norm weight must have shape [{x[-1]}], got {list(shapes[1])}")
    if len(shapes) > 2 and tuple(shapes[2]) != (x[-1],):
        raise ShapeError(f"norm bias must have shape [{x[-1]}], got {list(shapes[2])}")
    return [tuple(x)]


def _normalisation(name: str, affine_arity: int):
    def placement(placements, ctx: PlacementContext) -> list[Placement]:
        x = placements[0]
        ndim = len(ctx.shapes[0])
        dim = norm_dim(int(ctx.attrs.get("dim", -1)), ndim)
        if isinstance(x, Varying):
            return [V]
        if isinstance(x, Partial):
            raise PlacementError(f"{name} is not linear, but its input is {describe(x, ctx.mesh_dim)}: "
                                 f"all-reduce before it")
        if isinstance(x, Shard) and x.dim % ndim == dim:
            raise PlacementError(f"{name} normalises over dim {dim}, which is sharded over {ctx.mesh_dim}: each rank "
                                 f"normalises only its 1/{ctx.size} slice (gather that dim first)")
        for affine in placements[1:]:
            if isinstance(affine, Shard) and not (isinstance(x, Shard) and x.dim % ndim == ndim - 1):
                raise PlacementError(f"{name} weight is sharded over {ctx.mesh_dim} but the normalised dim is not")
            if isinstance(affine, (Partial, Varying)):
                raise PlacementError(f"{name} weight is {describe(affine, ctx.mesh_dim)}")
        return [x]

    def evaluate(xp, args, attrs, ctx):
        x = args[0]
        dim = norm_dim(int(attrs.get("dim", -1)), np.ndim(x))
        moved = np.moveaxis(x, dim, -1)
        out = np.moveaxis(xp.rowwise(name, moved, float(attrs.get("eps", 1e-5 if name == "layer_norm" else 1e-6))),
                          -1, dim)
        if len(args) > 1:
            out = out * args[1]
        if len(args) > 2:
            out = out + args[2]
        return [out]

    register(OpRule(name, _same_shape, placement, evaluate, arity=(1, 1 + affine_arity)))


_normalisation("softmax", 0)
_normalisation("log_softmax", 0)
_normalisation("layer_norm", 2)
_normalisation("rms_norm", 1)
