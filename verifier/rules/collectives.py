"""Collectives over one named mesh dim, and Megatron's fused vocab-parallel ops.

``evaluate_group`` receives the local tensors of one group (the ranks that differ only in
the collective's mesh coordinate, in coordinate order) and returns each rank's result.
Placement rules state what each collective is *for*; feeding it anything else is the
classic bug (all-reducing a replicated value multiplies it by the group size).
"""
from __future__ import annotations

from functools import reduce as fold

import numpy as np

from ..placements import Partial, Placement, R, Replicate, Shard, V, Varying
from ..registry import OpRule, PlacementContext, PlacementError, ShapeError, describe, norm_dim, register
from .nn import cross_entropy_values


def _same_shape(shapes, attrs, mesh):
    return [tuple(shapes[0])]


def combine(xp, values, op: str):
    if op == "sum":
        return fold(lambda a, b: a + b, values)
    if op == "avg":
        return fold(lambda a, b: a + b, values) / len(values)
    if op == "max":
        return fold(xp.maximum, values)
    if op == "min":
        return fold(xp.minimum, values)
    raise ShapeError(f"unknown reduce op {op!r} (expected sum, avg, max or min)")


def _collective(name: str, evaluate_group, on_group_dim, *, arity=(1, 1), shape=_same_shape):
    """Register a collective whose placement rule only concerns its own mesh dim."""

    def placement(placements, ctx: PlacementContext) -> list[Placement]:
        if ctx.attrs.get("mesh_dim") != ctx.mesh_dim:
            return [placements[0]]
        return [on_group_dim(placements, ctx)]

    def evaluate_all(xp, per_rank_args, attrs):
        if arity == (1, 1):
            return [[value] for value in evaluate_group(xp, [args[0] for args in per_rank_args], attrs)]
        return [[value] for value in evaluate_group(xp, per_rank_args, attrs)]

    register(OpRule(name, shape, placement, evaluate_group=evaluate_all, arity=arity, required_attrs=("mesh_dim",)))


def _op(ctx: PlacementContext) -> str:
    return str(ctx.attrs.get("op", "sum"))


def _all_reduce_placement(placements, ctx):
    (x,) = placements
    op = _op(ctx)
    if isinstance(x, Partial):
        if x.op != op:
            raise PlacementError(f"all_reduce with op={op} of {describe(x, ctx.mesh_dim)}: the partial values must be "
                                 f"combined with {x.op}")
        return R
    if isinstance(x, Replicate):
        if op == "sum":
            raise PlacementError(f"all_reduce(sum) of a value already replicated over {ctx.mesh_dim} multiplies it "
                                 f"by {ctx.size}")
        return R
    if isinstance(x, Shard):
        raise PlacementError(f"all_reduce of {describe(x, ctx.mesh_dim)} adds up different slices; all_gather "
                             f"concatenates them")
    return R  # rank-varying data (e.g. a masked vocab lookup): consistent afterwards; equivalence decides


_collective("all_reduce", lambda xp, values, attrs: [combine(xp, values, str(attrs.get("op", "sum")))] * len(values),
            _all_reduce_placement)


def _all_gather_placement(placements, ctx):
    (x,) = placements
    dim = norm_dim(int(ctx.attrs.get("dim", 0)), len(ctx.shapes[0]))
    if isinstance(x, Shard):
        if x.dim % len(ctx.shapes[0]) != dim:
            raise PlacementError(f"all_gather concatenates along dim {dim}, but the value is sharded along dim "
                                 f"{x.dim} over {ctx.mesh_dim}")
        return R
    if isinstance(x, Replicate):
        raise PlacementError(f"all_gather of a value already replicated over {ctx.mesh_dim} repeats it {ctx.size} "
                             f"times along dim {dim}")
    if isinstance(x, Partial):
        raise PlacementError(f"all_gather of {describe(x, ctx.mesh_dim)} concatenates unreduced partial values: "
                             f"all_reduce (or reduce_scatter) them instead")
    return R


def _all_gather_group(xp, values, attrs):
    dim = norm_dim(int(attrs.get("dim", 0)), np.ndim(values[0]))
    return [np.concatenate(values, axis=dim)] * len(values)


_collective("all_gather", _all_gather_group, _all_gather_placement)


def _reduce_scatter_placement(placements, ctx):
    (x,) = placements
    dim = norm_dim(int(ctx.attrs.get("dim", 0)), len(ctx.shapes[0]))
    op = _op(ctx)
    if isinstance(x, Partial):
        if x.op != op:
            raise PlacementError(f"reduce_scatter with op={op} of {describe(x, ctx.mesh_dim)}: the partial values "
                                 f"must be combined with {x.op}")
        return Shard(dim)
    if isinstance(x, Replicate):
        raise PlacementError(f"reduce_scatter of a value already replicated over {ctx.mesh_dim} multiplies it by "
                             f"{ctx.size}" if op == "sum" else
                             "reduce_scatter of a replicated value: use local_chunk instead")
    if isinstance(x, Shard):
        raise PlacementError(f"reduce_scatter of {describe(x, ctx.mesh_dim)} combines different slices")
    return Shard(dim)


def _split(values, dim, count):
    size = np.shape(values)[dim]
    if size % count:
        raise ShapeError(f"dim {dim} of size {size} does not split into {count} equal parts")
    return np.split(values, count, axis=dim)


def _reduce_scatter_group(xp, values, attrs):
    dim = norm_dim(int(attrs.get("dim", 0)), np.ndim(values[0]))
    total = combine(xp, values, str(attrs.get("op", "sum")))
    return _split(total, dim, len(values))


_collective("reduce_scatter", _reduce_scatter_group, _reduce_scatter_placement)


def _all_to_all_placement(placements, ctx):
    (x,) = placements
    ndim = len(ctx.shapes[0])
    split_dim = norm_dim(int(ctx.attrs.get("split_dim", 0)), ndim)
    concat_dim = norm_dim(int(ctx.attrs.get("concat_dim", 0)), ndim)
    if isinstance(x, Shard) and x.dim % ndim == concat_dim:
        return Shard(split_dim)
    if isinstance(x, Varying):
        return V
    raise PlacementError(f"all_to_all(split_dim={split_dim}, concat_dim={concat_dim}) expects a value sharded along "
                         f"dim {concat_dim} over {ctx.mesh_dim}, got one {describe(x, ctx.mesh_dim)}")


def _all_to_all_group(xp, values, attrs):
    ndim = np.ndim(values[0])
    split_dim = norm_dim(int(attrs.get("split_dim", 0)), ndim)
    concat_dim = norm_dim(int(attrs.get("concat_dim", 0)), ndim)
    if attrs.get("split_sizes_per_rank"):
        return _uneven_all_to_all(values, attrs["split_sizes_per_rank"], split_dim, concat_dim)
    pieces = [_split(value, split_dim, len(values)) for value in values]
    return [np.concatenate([pieces[source][target] for source in range(len(values))], axis=concat_dim)
            for target in range(len(values))]


def _uneven_all_to_all(values, sizes_per_rank, split_dim: int, concat_dim: int):
    """``all_to_all_single`` with split sizes: each member cuts its input along ``split_dim`` by its own
    input sizes (even pieces where it gave none) and member t receives the t-th piece of every member, in
    member order, as many rows as its own output sizes say (other counts: torch raises)."""
    world = len(values)
    pieces = []
    for value, (sizes, _) in zip(values, sizes_per_rank):
        length = np.shape(value)[split_dim]
        sizes = [int(n) for n in sizes] or ([length // world] * world if length % world == 0 else None)
        if sizes is None or len(sizes) != world or sum(sizes) != length:
            raise ShapeError(f"all_to_all input of {length} rows along dim {split_dim} cannot be cut into {sizes} "
                             f"for {world} ranks")
        pieces.append(np.split(value, np.cumsum(sizes)[:-1], axis=split_dim))
    results = []
    for target in range(world):
        received = [pieces[source][target] for source in range(world)]
        wanted = [int(n) for n in sizes_per_rank[target][1]]
        sent = [np.shape(piece)[split_dim] for piece in received]
        if wanted and sent != wanted:
            raise ShapeError(f"all_to_all: rank {target} expects {wanted} rows from the ranks, which send {sent}")
        results.append(np.concatenate(received, axis=concat_dim))
    return results


_collective("all_to_all", _all_to_all_group, _all_to_all_placement)


def _broadcast_placement(placements, ctx):
    (x,) = placements
    if isinstance(x, (Shard, Partial)):
        raise PlacementError(f"broadcast of {describe(x, ctx.mesh_dim)} gives every rank the source rank's piece, "
                             f"not the whole value")
    return R


_collective("broadcast", lambda xp, values, attrs: [values[int(attrs.get("src", 0))]] * len(values),
            _broadcast_placement)


def _rooted_placement(placements, ctx):
    """reduce/gather leave the full value on one rank only: no placement describes that."""
    return V


def _reduce_group(xp, values, attrs):
    dst = int(attrs.get("dst", 0))
    out = list(values)
    out[dst] = combine(xp, values, str(attrs.get("op", "sum")))
    return out


_collective("reduce", _reduce_group, _rooted_placement)


def _gather_group(xp, values, attrs):
    dst = int(attrs.get("dst", 0))
    dim = norm_dim(int(attrs.get("dim", 0)), np.ndim(values[0]))
    out = list(values)
    out[dst] = np.concatenate(values, axis=dim)
    return out


_collective("gather", _gather_group, _rooted_placement)


def _scatter_group(xp, values, attrs):
    src = int(attrs.get("src", 0))
    dim = norm_dim(int(attrs.get("dim", 0)), np.ndim(values[0]))
    return _split(values[src], dim, len(values))


def _scatter_placement(placements, ctx):
    (x,) = placements
    if isinstance(x, (Shard, Partial)):
        raise PlacementError(f"scatter of {describe(x, ctx.mesh_dim)}: the source rank holds only a piece")
    return Shard(norm_dim(int(ctx.attrs.get("dim", 0)), len(ctx.shapes[0])))


_collective("scatter", _scatter_group, _scatter_placement)


# --- Megatron's fused vocab-parallel ops: library code we trust, modelled by what it computes --

def _vpe_shape(shapes, attrs, mesh):
    ids, weight = shapes
    return [tuple(ids) + (weight[1],)]


def _vpe_placement(placements, ctx):
    ids, weight = placements
    if weight != Shard(0):
        raise PlacementError(f"vocab_parallel_embedding expects its table sharded along the vocabulary over "
                             f"{ctx.mesh_dim}, got one {describe(weight, ctx.mesh_dim)}")
    if not isinstance(ids, Replicate):
        raise PlacementError(f"vocab_parallel_embedding expects the same ids on every rank of {ctx.mesh_dim}")
    return R


def _vpe_group(xp, values, attrs):
    """Masked lookup in each shard + all-reduce == lookup in the concatenated table."""
    ids = values[0][0]
    table = np.concatenate([weight for _, weight in values], axis=0)
    return [xp.take_rows(table, ids)] * len(values)


_collective("vocab_parallel_embedding", _vpe_group, _vpe_placement, arity=(2, 2), shape=_vpe_shape)


def _vpce_placement(placements, ctx):
    logits, target = placements
    ndim = len(ctx.shapes[0])
    if not (isinstance(logits, Shard) and logits.dim % ndim == ndim - 1):
        raise PlacementError(f"vocab_parallel_cross_entropy expects logits sharded along the vocabulary over "
                             f"{ctx.mesh_dim}, got ones {describe(logits, ctx.mesh_dim)}")
    if not isinstance(target, Replicate):
        raise PlacementError(f"vocab_parallel_cross_entropy expects the same targets on every rank of {ctx.mesh_dim}")
    return R


def _vpce_group(xp, values, attrs):
    logits = np.concatenate([value[0] for value in values], axis=-1)
    loss = cross_entropy_values(xp, logits, values[0][1], str(attrs.get("reduction", "none")))
    return [loss] * len(values)


def _vpce_shape(shapes, attrs, mesh):
    logits, target = shapes
    return [tuple(target) if attrs.get("reduction", "none") == "none" else ()]


_collective("vocab_parallel_cross_entropy", _vpce_group, _vpce_placement, arity=(2, 2), shape=_vpce_shape)


# --- backward of the fused vocab-parallel ops: the full gradient, each rank keeps its shard --

def _vpe_grad_group(xp, per_rank_args, attrs):
    from .gradients import _embedding_grad_evaluate

    ids, grad = per_rank_args[0][0], per_rank_args[0][1]
    table = np.concatenate([args[2] for args in per_rank_args], axis=0)
    (full,) = _embedding_grad_evaluate(xp, [ids, grad, table], attrs, None)
    return [[piece] for piece in _split(full, 0, len(per_rank_args))]


def _vpce_grad_group(xp, per_rank_args, attrs):
    from .gradients import _ce_grad_evaluate

    logits = np.concatenate([args[0] for args in per_rank_args], axis=-1)
    (full,) = _ce_grad_evaluate(xp, [logits, per_rank_args[0][1], per_rank_args[0][2]], attrs, None)
    return [[piece] for piece in _split(full, np.ndim(full) - 1, len(per_rank_args))]


def _keep_shard_placement(position: int):
    """The gradient of a shard is sharded like it."""
    return lambda placements, ctx: [placements[position]]


register(OpRule("vocab_parallel_embedding_grad", lambda s, a, m: [tuple(s[2])], _keep_shard_placement(2),
                evaluate_group=_vpe_grad_group, arity=(3, 3), required_attrs=("mesh_dim",)))
register(OpRule("vocab_parallel_cross_entropy_grad", lambda s, a, m: [tuple(s[0])], _keep_shard_placement(0),
                evaluate_group=_vpce_grad_group, arity=(3, 3), required_attrs=("mesh_dim",)))
