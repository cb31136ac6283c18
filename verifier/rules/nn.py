"""Neural-network ops: embedding lookup, cross-entropy, scaled dot-product attention."""
from __future__ import annotations

import math

import numpy as np

from ..placements import Partial, Placement, R, Shard, V, Varying
from ..registry import OpRule, PlacementContext, PlacementError, ShapeError, describe, register


def _embedding_shape(shapes, attrs, mesh):
    ids, weight = shapes
    if len(weight) != 2:
        raise ShapeError(f"embedding weight must be 2-d [vocab, hidden], got {list(weight)}")
    return [tuple(ids) + (weight[1],)]


def _embedding_placement(placements, ctx: PlacementContext) -> list[Placement]:
    ids, weight = placements
    if isinstance(ids, Partial):
        raise PlacementError(f"embedding ids are {describe(ids, ctx.mesh_dim)}")
    if isinstance(weight, Shard) and weight.dim % 2 == 0:
        # A lookup of global ids in a vocab shard: meaningful only with offset and masking,
        # which the equivalence check judges; the placement alone cannot.
        return [V]
    if isinstance(weight, Shard):
        if isinstance(ids, Shard):
            raise PlacementError("embedding with sharded ids and a hidden-sharded table")
        return [Shard(len(ctx.shapes[0]))]
    if isinstance(weight, (Partial, Varying)) or isinstance(ids, Varying):
        return [V]
    return [ids]


register(OpRule("embedding", _embedding_shape, _embedding_placement,
                lambda xp, args, attrs, ctx: [xp.take_rows(args[1], args[0])], arity=(2, 2)))


def _ce_shape(shapes, attrs, mesh):
    logits, target = shapes
    if tuple(logits[:-1]) != tuple(target):
        raise ShapeError(f"cross_entropy target shape {list(target)} does not match logits {list(logits)}")
    return [tuple(target) if attrs.get("reduction", "mean") == "none" else ()]


def cross_entropy_values(xp, logits, target, reduction: str):
    """-log_softmax(logits)[target], then the reduction: one definition for every CE op."""
    losses = -xp.pick(xp.rowwise("log_softmax", logits), target)
    if reduction == "none":
        return losses
    total = np.sum(losses)
    return np.asarray(total / int(np.size(losses)) if reduction == "mean" else total, dtype=object
                      if xp.symbolic else float)


def _ce_placement(placements, ctx: PlacementContext) -> list[Placement]:
    logits, target = placements
    ndim = len(ctx.shapes[0])
    if any(isinstance(p, Varying) for p in placements):
        return [V]
    if isinstance(logits, Partial):
        raise PlacementError(f"cross_entropy of {describe(logits, ctx.mesh_dim)}: all-reduce the logits first")
    if isinstance(logits, Shard) and logits.dim % ndim == ndim - 1:
        raise PlacementError(f"cross_entropy over the class dim, which is sharded over {ctx.mesh_dim}: use a "
                             f"vocab-parallel cross-entropy (Megatron) or loss_parallel (DTensor)")
    if logits != target and not (isinstance(logits, Shard) and target == Shard(logits.dim)):
        raise PlacementError(f"cross_entropy logits are {describe(logits, ctx.mesh_dim)} but targets are "
                             f"{describe(target, ctx.mesh_dim)}")
    reduction = ctx.attrs.get("reduction", "mean")
    if isinstance(logits, Shard) and reduction != "none":
        return [Partial("avg" if reduction == "mean" else "sum")]
    return [logits]


register(OpRule("cross_entropy", _ce_shape, _ce_placement,
                lambda xp, args, attrs, ctx: [cross_entropy_values(xp, args[0], args[1],
                                                                   attrs.get("reduction", "mean"))], arity=(2, 2)))


def _sdpa_shape(shapes, attrs, mesh):
    q, k, v = shapes
    if len(q) < 2 or q[-1] != k[-1] or k[-2] != v[-2] or tuple(k[:-2]) != tuple(v[:-2]):
        raise ShapeError(f"sdpa shapes q {list(q)}, k {list(k)}, v {list(v)} do not fit")
    return [tuple(q[:-1]) + (v[-1],)]


def _sdpa_placement(placements, ctx: PlacementContext) -> list[Placement]:
    q, k, v = placements
    ndim = len(ctx.shapes[0])
    if any(isinstance(p, Varying) for p in placements):
        return [V]
    if any(isinstance(p, Partial) for p in placements):
        raise PlacementError(f"attention inputs must be reduced first, got {', '.join(map(str, placements))} "
                             f"over {ctx.mesh_dim}")
    dims = {p.dim % ndim for p in placements if isinstance(p, Shard)}
    if not dims:
        return [R]
    batch_like = all(isinstance(p, Shard) for p in placements) and len(dims) == 1 and min(dims) < ndim - 2
    if batch_like:
        return [q]
    if q == Shard(ndim - 2) and k == R and v == R and not ctx.attrs.get("causal"):
        return [q]
    if q == Shard(ndim - 2) and k == R and v == R:
        raise PlacementError(f"causal attention with queries sharded by sequence over {ctx.mesh_dim}: the local "
                             f"causal mask uses local positions, so rank r > 0 sees the wrong keys")
    raise PlacementError(f"attention with q {q}, k {k}, v {v} over {ctx.mesh_dim}: keys and values must be whole "
                         f"along the sequence and the head dim must not be split")


def attention_probs(xp, q, k, causal: bool, scale):
    """softmax(q k^T * scale) with torch's is_causal mask (query i sees keys 0..i)."""
    scale = 1.0 / math.sqrt(np.shape(q)[-1]) if scale is None else float(scale)
    scores = xp.matmul(q, np.swapaxes(k, -1, -2)) * scale
    if not causal:
        return xp.rowwise("softmax", scores)
    length, keys = np.shape(scores)[-2:]
    weights = np.array(xp.zeros(np.shape(scores)), dtype=object if xp.symbolic else float)
    for i in range(length):
        visible = min(keys, i + 1)
        weights[..., i, :visible] = xp.rowwise("softmax", scores[..., i, :visible])
    return weights


def _sdpa_evaluate(xp, args, attrs, ctx):
    q, k, v = args
    return [xp.matmul(attention_probs(xp, q, k, bool(attrs.get("causal")), attrs.get("scale")), v)]


register(OpRule("sdpa", _sdpa_shape, _sdpa_placement, _sdpa_evaluate, arity=(3, 3)))
