"""Views and data movement: reshape, transpose, permute, slice, chunk, split, cat.

Shapes in attributes are *local* shapes (what the code on one rank wrote); a dim that depends
on the mesh size is written ``-1`` so that the same program is meaningful on a mesh of size 1.
"""
from __future__ import annotations

import math

import numpy as np

from ..placements import Placement, Shard, V, Varying
from ..ir import dim_symbols, eval_dim, mesh_sizes
from ..registry import OpRule, PlacementContext, PlacementError, ShapeError, norm_dim, register


def _unit_sizes(shape) -> dict[str, int]:
    """Placement rules see global shapes, i.e. the program on a mesh of size 1."""
    return {name: 1 for d in shape if isinstance(d, str) for name in dim_symbols(d) if name.endswith("_size")}


def resolve_shape(target, numel: int, env: dict[str, int]) -> tuple[int, ...]:
    """Target dims may use ``tp_size`` (the mesh dim's size) so one IR fits every mesh size."""
    try:
        target = [int(eval_dim(d, env)) for d in target]
    except KeyError as missing:
        raise ShapeError(f"reshape target uses unknown name {missing.args[0]!r}") from None
    if target.count(-1) > 1:
        raise ShapeError("reshape allows at most one -1")
    known = math.prod(d for d in target if d != -1)
    if -1 in target:
        if known == 0 or numel % known:
            raise ShapeError(f"cannot reshape {numel} elements into {target}")
        target[target.index(-1)] = numel // known
    if math.prod(target) != numel:
        raise ShapeError(f"cannot reshape {numel} elements into {target}")
    return tuple(target)


def _reshape_shape(shapes, attrs, mesh):
    return [resolve_shape(attrs["shape"], math.prod(shapes[0]), mesh_sizes(mesh))]


def _groups(src: tuple[int, ...], dst: tuple[int, ...]) -> list[tuple[range, range]]:
    """Pair runs of input and output dims that hold the same elements (sizes-1 dims on their own)."""
    groups, i, j = [], 0, 0
    while i < len(src) or j < len(dst):
        i0, j0 = i, j
        a = src[i] if i < len(src) else 1
        b = dst[j] if j < len(dst) else 1
        i, j = i + (i < len(src)), j + (j < len(dst))
        while a != b:
            if a < b:
                a *= src[i]
                i += 1
            else:
                b *= dst[j]
                j += 1
        groups.append((range(i0, i), range(j0, j)))
    return groups


def _reshape_placement(placements, ctx: PlacementContext) -> list[Placement]:
    (placement,) = placements
    if not isinstance(placement, Shard):
        return [placement]
    src = tuple(ctx.shapes[0])
    dst = resolve_shape(ctx.attrs["shape"], math.prod(src), _unit_sizes(ctx.attrs["shape"]))
    dim = placement.dim % len(src)
    target = list(ctx.attrs["shape"])
    # The dims that shrink on a rank (-1 or a size over tp_size): the shard must land exactly there.
    shrinking = [o for o, d in enumerate(target) if d == -1 or (isinstance(d, str) and "_size" in d)]
    for ins, outs in _groups(src, dst):
        if dim not in ins:
            continue
        leading_in = next((i for i in ins if src[i] != 1), dim)
        leading_out = next((o for o in outs if dst[o] != 1), None)
        if shrinking and shrinking != [leading_out]:
            return [V]  # the local reshape regroups elements across ranks' blocks
        if leading_in == dim and leading_out is not None and dst[leading_out] % ctx.size == 0:
            return [Shard(leading_out)]
        raise PlacementError(f"reshape {list(src)} -> {list(dst)} moves dim {dim}, which is sharded over "
                             f"{ctx.mesh_dim}, into an inner position: the shards no longer tile the result")
    raise PlacementError(f"reshape cannot place the sharded dim {dim}")


def _reshape_evaluate(xp, args, attrs, ctx):
    x = args[0]
    return [np.reshape(x, resolve_shape(attrs["shape"], int(np.size(x)), mesh_sizes(ctx.mesh)))]


register(OpRule("reshape", _reshape_shape, _reshape_placement, _reshape_evaluate, required_attrs=("shape",)))


def _permutation(attrs, ndim: int) -> list[int]:
    if "dims" in attrs:
        perm = [norm_dim(int(d), ndim) for d in attrs["dims"]]
        if sorted(perm) != list(range(ndim)):
            raise ShapeError(f"permute dims {attrs['dims']} are not a permutation of {ndim} dims")
        return perm
    perm = list(range(ndim))
    a, b = norm_dim(int(attrs.get("dim0", -2)), ndim), norm_dim(int(attrs.get("dim1", -1)), ndim)
    perm[a], perm[b] = perm[b], perm[a]
    return perm


def _permute_shape(shapes, attrs, mesh):
    shape = shapes[0]
    return [tuple(shape[p] for p in _permutation(attrs, len(shape)))]


def _permute_placement(placements, ctx: PlacementContext) -> list[Placement]:
    (placement,) = placements
    if isinstance(placement, Shard):
        perm = _permutation(ctx.attrs, len(ctx.shapes[0]))
        return [Shard(perm.index(placement.dim % len(perm)))]
    return [placement]


def _permute_evaluate(xp, args, attrs, ctx):
    return [np.transpose(args[0], _permutation(attrs, np.ndim(args[0])))]


register(OpRule("transpose", _permute_shape, _permute_placement, _permute_evaluate))
register(OpRule("permute", _permute_shape, _permute_placement, _permute_evaluate, required_attrs=("dims",)))


def _slice_bounds(attrs, size: int) -> tuple[int, int]:
    start = attrs.get("start")
    end = attrs.get("end")
    start = 0 if start is None else int(start)
    end = size if end is None else int(end)
    start, end = (start + size if start < 0 else start), (end + size if end < 0 else end)
    return max(0, min(start, size)), max(0, min(end, size))


def _pieces(attrs, size: int, count: int | None = None) -> list[tuple[int, int]]:
    """Boundaries of chunk (torch.chunk: ceil-sized pieces) or split (explicit sizes) results."""
    if "sizes" in attrs:
        sizes = attrs["sizes"]
        sizes = [int(s) for s in sizes] if isinstance(sizes, (list, tuple)) else [int(sizes)] * -(-size // int(sizes))
    else:
        chunks = int(attrs.get("chunks", count or 1))
        step = -(-size // chunks)
        sizes = [min(step, size - start) for start in range(0, size, step)]
    if sum(sizes) != size:
        raise ShapeError(f"split sizes {sizes} do not add up to {size}")
    bounds, start = [], 0
    for piece in sizes:
        bounds.append((start, start + piece))
        start += piece
    return bounds


def _slicing_placement(placements, ctx: PlacementContext, count: int = 1) -> list[Placement]:
    (placement,) = placements
    ndim = len(ctx.shapes[0])
    dim = norm_dim(int(ctx.attrs.get("dim", 0)), ndim)
    if isinstance(placement, Shard) and placement.dim % ndim == dim:
        raise PlacementError(f"{ctx.op} takes global positions along dim {dim}, which is sharded over {ctx.mesh_dim}: "
                             f"each rank would cut its own shard instead")
    return [placement] * count


def _slice_shape(shapes, attrs, mesh):
    shape = list(shapes[0])
    dim = norm_dim(int(attrs.get("dim", 0)), len(shape))
    start, end = _slice_bounds(attrs, shape[dim])
    shape[dim] = max(0, end - start)
    return [tuple(shape)]


def _slice_evaluate(xp, args, attrs, ctx):
    x = args[0]
    dim = norm_dim(int(attrs.get("dim", 0)), np.ndim(x))
    start, end = _slice_bounds(attrs, np.shape(x)[dim])
    index = [slice(None)] * np.ndim(x)
    index[dim] = slice(start, end)
    return [x[tuple(index)]]


register(OpRule("slice", _slice_shape, _slicing_placement, _slice_evaluate))


def _pieces_shape(shapes, attrs, mesh):
    shape = list(shapes[0])
    dim = norm_dim(int(attrs.get("dim", 0)), len(shape))
    out = []
    for start, end in _pieces(attrs, shape[dim]):
        piece = list(shape)
        piece[dim] = end - start
        out.append(tuple(piece))
    return out


def _pieces_evaluate(xp, args, attrs, ctx):
    x = args[0]
    dim = norm_dim(int(attrs.get("dim", 0)), np.ndim(x))
    out = []
    for start, end in _pieces(attrs, np.shape(x)[dim]):
        index = [slice(None)] * np.ndim(x)
        index[dim] = slice(start, end)
        out.append(x[tuple(index)])
    return out


def _pieces_placement(placements, ctx: PlacementContext) -> list[Placement]:
    shape = ctx.shapes[0]
    dim = norm_dim(int(ctx.attrs.get("dim", 0)), len(shape))
    return _slicing_placement(placements, ctx, len(_pieces(ctx.attrs, shape[dim])))


register(OpRule("chunk", _pieces_shape, _pieces_placement, _pieces_evaluate, required_attrs=("chunks",)))
register(OpRule("split", _pieces_shape, _pieces_placement, _pieces_evaluate, required_attrs=("sizes",)))


def _cat_shape(shapes, attrs, mesh):
    first = list(shapes[0])
    dim = norm_dim(int(attrs.get("dim", 0)), len(first))
    for shape in shapes[1:]:
        if len(shape) != len(first) or any(a != b for i, (a, b) in enumerate(zip(shape, first)) if i != dim):
            raise ShapeError(f"cat along dim {dim} of shapes {[list(s) for s in shapes]}")
    first[dim] = sum(shape[dim] for shape in shapes)
    return [tuple(first)]


def _cat_placement(placements, ctx: PlacementContext) -> list[Placement]:
    ndim = len(ctx.shapes[0])
    dim = norm_dim(int(ctx.attrs.get("dim", 0)), ndim)
    if any(isinstance(p, Varying) for p in placements):
        return [V]
    if len(set(placements)) != 1:
        raise PlacementError(f"cat joins tensors with different placements over {ctx.mesh_dim}: "
                             f"{', '.join(str(p) for p in placements)}")
    placement = placements[0]
    if isinstance(placement, Shard) and placement.dim % ndim == dim:
        raise PlacementError(f"cat along dim {dim}, which is sharded over {ctx.mesh_dim}: the result interleaves "
                             f"the ranks' shards")
    return [placement]


def _cat_evaluate(xp, args, attrs, ctx):
    dim = norm_dim(int(attrs.get("dim", 0)), np.ndim(args[0]))
    return [np.concatenate(args, axis=dim)]


register(OpRule("cat", _cat_shape, _cat_placement, _cat_evaluate, arity=(1, 64)))
