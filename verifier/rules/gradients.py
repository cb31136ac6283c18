"""Ops that appear in generated backward programs (derivatives, scatters into zeros...).

They are ordinary IR ops — registered, evaluated and encoded like the rest — so a backward
program is checked by exactly the same engine as a forward one.  Placement rules here are
conservative: when in doubt they answer ``V`` (unknown) rather than an error, since the
equivalence check is what decides.
"""
from __future__ import annotations

import numpy as np

from ..placements import Partial, Placement, R, Replicate, Shard, V, Varying
from ..registry import OpRule, PlacementContext, norm_dim, register
from .elementwise import _shape_broadcast, pointwise_placement
from .nn import attention_probs
from .shape_ops import _reshape_placement


def _first_shape(shapes, attrs, mesh):
    return [tuple(shapes[0])]


def _second_shape(shapes, attrs, mesh):
    return [tuple(shapes[1])]


for _name in ("dgelu", "dsilu", "dgelu_tanh"):
    register(OpRule(_name, _shape_broadcast, lambda p, ctx: pointwise_placement(p, ctx),
                    lambda xp, args, attrs, ctx, _n=_name: [xp.unary(_n, args[0])]))


def _norm_backward(name: str):
    def evaluate(xp, args, attrs, ctx):
        x, grad = args
        eps = float(attrs.get("eps", 1e-5 if name.startswith("layer") else 1e-6))
        return [xp.rowwise(name, x, eps, grad)]

    def placement(placements, ctx: PlacementContext) -> list[Placement]:
        x, grad = placements
        last = len(ctx.shapes[0]) - 1
        if x != grad or isinstance(x, (Partial, Varying)) or (isinstance(x, Shard) and x.dim % (last + 1) == last):
            return [V]
        return [x]

    register(OpRule(name, _first_shape, placement, evaluate, arity=(2, 2)))


_norm_backward("layer_norm_backward")
_norm_backward("rms_norm_backward")


def _reshape_as_placement(placements, ctx: PlacementContext) -> list[Placement]:
    inner = PlacementContext(ctx.mesh_dim, ctx.size, (ctx.shapes[0],), {"shape": list(ctx.shapes[1])}, "reshape")
    try:
        return _reshape_placement([placements[0]], inner)
    except Exception:  # noqa: BLE001 - unknown is a safe answer for a derived op
        return [V]


register(OpRule("reshape_as", _second_shape, _reshape_as_placement,
                lambda xp, args, attrs, ctx: [np.reshape(args[0], np.shape(args[1]))], arity=(2, 2)))


def _broadcast_like_evaluate(xp, args, attrs, ctx):
    """Undo a reduction over ``dims``: put size-1 dims back, then broadcast to x's shape
    (``mean=true`` also divides by the number of elements reduced on this rank)."""
    grad, x = args
    dims = attrs.get("dims")
    dims = sorted(norm_dim(int(d), np.ndim(x)) for d in (range(np.ndim(x)) if dims is None else dims))
    if not attrs.get("keepdim"):
        for d in dims:
            grad = np.expand_dims(grad, d)
    out = np.broadcast_to(grad, np.shape(x))
    if attrs.get("mean"):
        out = out / int(np.prod([np.shape(x)[d] for d in dims]))
    return [np.array(out, dtype=object) if xp.symbolic else np.array(out)]


def _like_x_placement(placements, ctx: PlacementContext) -> list[Placement]:
    grad, x = placements[0], placements[-1]
    if isinstance(grad, Partial):
        return [grad] if not isinstance(x, Shard) else [V]
    if isinstance(grad, Replicate) or grad == x:
        return [x if not isinstance(x, Partial) else R]
    return [V]


def _broadcast_like_placement(placements, ctx: PlacementContext) -> list[Placement]:
    """A local mean over a sharded dim divides by the local count: its gradient is the global
    gradient scaled by the group size, which no placement describes."""
    x = placements[1]
    dims = ctx.attrs.get("dims")
    ndim = len(ctx.shapes[1])
    reduced = range(ndim) if dims is None else [norm_dim(int(d), ndim) for d in dims]
    if ctx.attrs.get("mean") and isinstance(x, Shard) and x.dim % ndim in reduced:
        return [V]
    return _like_x_placement(placements, ctx)


register(OpRule("broadcast_like", _second_shape, _broadcast_like_placement, _broadcast_like_evaluate, arity=(2, 2)))
register(OpRule("zeros_like", _first_shape, lambda p, ctx: [p[0] if not isinstance(p[0], Partial) else R],
                lambda xp, args, attrs, ctx: [xp.zeros(np.shape(args[0]))]))


def _slice_grad_evaluate(xp, args, attrs, ctx):
    grad, x = args
    dim = norm_dim(int(attrs.get("dim", 0)), np.ndim(x))
    out = np.array(xp.zeros(np.shape(x)), dtype=object if xp.symbolic else float)
    index = [slice(None)] * np.ndim(x)
    start = int(attrs.get("start", 0))
    index[dim] = slice(start, start + np.shape(grad)[dim])
    out[tuple(index)] = grad
    return [out]


register(OpRule("slice_grad", _second_shape, lambda p, ctx: [p[0]], _slice_grad_evaluate, arity=(2, 2)))


def _local_chunk_grad_evaluate(xp, args, attrs, ctx):
    """This rank's gradient chunk placed into zeros of the whole tensor: a partial sum."""
    grad, x = args
    dim = norm_dim(int(attrs["dim"]), np.ndim(x))
    size = ctx.size(attrs["mesh_dim"])
    out = np.array(xp.zeros(np.shape(x)), dtype=object if xp.symbolic else float)
    step = np.shape(x)[dim] // size
    index = [slice(None)] * np.ndim(x)
    start = ctx.coords[attrs["mesh_dim"]] * step
    index[dim] = slice(start, start + step)
    out[tuple(index)] = grad
    return [out]


def _local_chunk_grad_placement(placements, ctx: PlacementContext) -> list[Placement]:
    grad = placements[0]
    if ctx.attrs.get("mesh_dim") != ctx.mesh_dim:
        return [grad]
    return [Partial("sum") if isinstance(grad, Shard) else V]


register(OpRule("local_chunk_grad", _second_shape, _local_chunk_grad_placement, _local_chunk_grad_evaluate,
                arity=(2, 2), required_attrs=("mesh_dim", "dim"), uses_coords=True))


def _embedding_grad_evaluate(xp, args, attrs, ctx):
    """dW[r] = sum of the incoming rows whose id is r (index_add into zeros)."""
    ids, grad, weight = args
    rows = np.shape(weight)[0]
    flat_ids = np.reshape(ids, (-1,))
    flat_grad = np.reshape(grad, (-1, np.shape(grad)[-1]))
    if xp.symbolic:  # sum_t If(id_t == r, grad_t, 0): linear terms (a one-hot product is not)
        hits = np.asarray(xp.compare("eq", np.reshape(flat_ids, (-1, 1, 1)), np.arange(rows).reshape(1, -1, 1)))
        picked = np.asarray(xp.where(hits, np.asarray(flat_grad, dtype=object)[:, None, :],
                                     xp.zeros((len(flat_ids), rows, np.shape(grad)[-1]))), dtype=object)
        return [xp.sum_rows(picked)]
    onehot = xp.where(xp.compare("eq", np.reshape(flat_ids, (-1, 1)), np.arange(rows).reshape(1, -1)),
                      xp.full((len(flat_ids), rows), 1.0), xp.zeros((len(flat_ids), rows)))
    return [xp.matmul(np.swapaxes(np.asarray(onehot, dtype=object if xp.symbolic else float), 0, 1), flat_grad)]


def _embedding_grad_placement(placements, ctx: PlacementContext) -> list[Placement]:
    ids, grad, weight = placements
    if isinstance(weight, Shard) or isinstance(ids, (Partial, Varying)):
        return [V]
    if isinstance(ids, Shard) and grad == ids:
        return [Partial("sum")]
    return [grad if isinstance(grad, (Replicate, Partial)) else V]


register(OpRule("embedding_grad", lambda s, a, m: [tuple(s[2])], _embedding_grad_placement, _embedding_grad_evaluate,
                arity=(3, 3)))


def _ce_grad_evaluate(xp, args, attrs, ctx):
    """d loss / d logits = (softmax(logits) - onehot(target)) * grad (/ N for the mean)."""
    logits, target, grad = args
    reduction = attrs.get("reduction", "mean")
    classes = np.shape(logits)[-1]
    probs = xp.rowwise("softmax", logits)
    onehot = xp.where(xp.compare("eq", np.expand_dims(target, -1), np.arange(classes)),
                      xp.full(np.shape(logits), 1.0), xp.zeros(np.shape(logits)))
    scale = np.expand_dims(grad, -1) if reduction == "none" else grad
    if reduction == "mean":
        scale = scale / int(np.size(target))
    return [(probs - onehot) * scale]


def _ce_grad_placement(placements, ctx: PlacementContext) -> list[Placement]:
    logits, target, grad = placements
    ndim = len(ctx.shapes[0])
    if isinstance(logits, Shard) and logits.dim % ndim < ndim - 1 and target == Shard(logits.dim):
        return [logits]
    if all(isinstance(p, Replicate) for p in placements):
        return [R]
    return [V]


register(OpRule("cross_entropy_grad", _first_shape, _ce_grad_placement, _ce_grad_evaluate, arity=(3, 3)))


def _probs_shape(shapes, attrs, mesh):
    q, k = shapes
    return [tuple(q[:-1]) + (k[-2],)]


def _probs_placement(placements, ctx: PlacementContext) -> list[Placement]:
    q, k = placements
    ndim = len(ctx.shapes[0])
    if q == k and isinstance(q, Shard) and q.dim % ndim < ndim - 2:
        return [q]
    if q == k == R:
        return [R]
    return [V]


register(OpRule("attention_probs", _probs_shape, _probs_placement,
                lambda xp, args, attrs, ctx: [attention_probs(xp, args[0], args[1], bool(attrs.get("causal")),
                                                              attrs.get("scale"))], arity=(2, 2)))
