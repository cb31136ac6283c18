"""Recorded ``aten.*`` linear algebra and neural-network ops, forward and backward.

Products reuse ``matmul``/``linear``; softmax and log-softmax reuse the row-wise rules; the
embedding lookup and its gradient reuse ``embedding``/``embedding_grad``; attention reuses
``attention_probs``.  Layer norm is written the way aten computes it (``mean``, ``rstd`` are
outputs the backward reads back): everything is exact polynomial arithmetic except
``rstd = rsqrt(var + eps)``, an uninterpreted function of the (normal-form) variance.
Backward formulas are likewise polynomials in the values the forward saved (softmax
output, ``rstd``, attention probabilities), so they are exact in Z3.
"""
from __future__ import annotations

import numpy as np

from ..registry import ShapeError, norm_dim
from .aten import AtenUnsupported, aten, as_float, call, kind_of, literal, optional_tensors


def _array(xp, value):
    return np.array(value, dtype=object) if xp.symbolic else np.array(value, dtype=float)


# --- products -------------------------------------------------------------------------------------

def _matmul(xp, args, attrs, ctx):
    a, b = (as_float(xp, x) for x in args)
    squeeze = []
    if np.ndim(a) == 1:
        a, squeeze = np.expand_dims(a, 0), squeeze + [-2]
    if np.ndim(b) == 1:
        b, squeeze = np.expand_dims(b, -1), squeeze + [-1]
    out = call("matmul", xp, [a, b])
    for axis in sorted(squeeze):
        out = np.squeeze(out, axis=axis if axis == -1 or -1 not in squeeze else -1)
    return [out]


for _name in ("mm.default", "bmm.default", "matmul.default"):
    aten(f"aten.{_name}", _matmul)


def _scale(xp, x, factor):
    return x if factor in (None, 1) else call("mul", xp, [x], scalar=factor)


def _addmm(xp, args, attrs, ctx):
    """beta * self + alpha * (mat1 @ mat2)  (also baddbmm)."""
    bias, left, right = args
    product = _scale(xp, call("matmul", xp, [as_float(xp, left), as_float(xp, right)]), attrs.get("alpha", 1))
    if attrs.get("beta", 1) == 0:
        return [product]
    return [call("add", xp, [_scale(xp, bias, attrs.get("beta", 1)), product])]


aten("aten.addmm.default", _addmm)
aten("aten.baddbmm.default", _addmm)


def _linear(xp, args, attrs, ctx):
    tensors = optional_tensors(args, attrs, ["input", "weight", "bias?"])
    return [call("linear", xp, [as_float(xp, t) for t in tensors.values()])]


aten("aten.linear.default", _linear)


def _convolution(xp, args, attrs, ctx):
    """N-d convolution (``conv1d``/``conv2d``/``conv3d``), not transposed: the zero-padded
    input's patches times the flattened filters, as one matmul per group (``groups`` > 1: group g
    convolves its own input channels with its own filters; a causal depthwise conv1d)."""
    tensors = optional_tensors(args, attrs, ["input", "weight", "bias?"])
    if attrs.get("transposed"):
        raise AtenUnsupported("transposed convolution is not modelled")
    x, w = as_float(xp, tensors["input"]), as_float(xp, tensors["weight"])
    groups = _groups(x, w, attrs)
    outs = [_convolved(xp, part_x, part_w, attrs) for part_x, part_w in
            zip(np.split(np.asarray(x), groups, axis=1), np.split(np.asarray(w), groups, axis=0))]
    out = np.concatenate(outs, axis=1) if groups > 1 else outs[0]
    if "bias" in tensors:
        spatial = np.ndim(w) - 2
        bias = as_float(xp, tensors["bias"]).reshape([-1] + [1] * spatial)
        out = call("add", xp, [out, np.broadcast_to(bias, np.shape(out))])
    return [out]


def _groups(x, w, attrs) -> int:
    groups = int(attrs.get("groups", 1) or 1)
    if np.ndim(x) < 3 or np.shape(x)[1] % groups or np.shape(w)[0] % groups \
            or np.shape(x)[1] != np.shape(w)[1] * groups:
        raise ShapeError(f"convolution of input {list(np.shape(x))} with weight {list(np.shape(w))} "
                         f"in {groups} group(s)")
    return groups


def _geometry(x, w, attrs):
    """(stride, padding, dilation, output sizes, index) of a convolution: ``index[axis]`` is the input
    position (in the padded input) that output o and tap t read on that spatial axis, broadcast over
    all output and tap axes."""
    spatial = np.ndim(w) - 2

    def per_dim(name: str, default: int) -> list[int]:
        value = attrs.get(name, [default])
        value = [value] if isinstance(value, int) else list(value)
        return value * spatial if len(value) == 1 else value

    stride, padding, dilation = per_dim("stride", 1), per_dim("padding", 0), per_dim("dilation", 1)
    taps = np.shape(w)[2:]
    outs = [(n + 2 * p - d * (k - 1) - 1) // s + 1 for n, p, d, k, s in zip(np.shape(x)[2:], padding, dilation, taps,
                                                                             stride)]
    index = []
    for axis, (o, k, s, d) in enumerate(zip(outs, taps, stride, dilation)):
        shape = [1] * (2 * spatial)
        shape[axis], shape[spatial + axis] = o, k
        index.append((np.arange(o)[:, None] * s + np.arange(k)[None, :] * d).reshape(shape))
    return stride, padding, dilation, outs, index


def _patch_rows(xp, x, w, attrs):
    """(rows, outs, padded shape): the zero-padded input's patches, one row per (batch, output
    position), columns in the filters' flattened (channel, tap) order."""
    spatial = np.ndim(w) - 2
    _, padding, _, outs, index = _geometry(x, w, attrs)
    zero = literal(xp, 0.0, "float")[()]
    padded = np.full(np.shape(x)[:2] + tuple(n + 2 * p for n, p in zip(np.shape(x)[2:], padding)), zero,
                     dtype=np.asarray(x).dtype)
    padded[(slice(None), slice(None)) + tuple(slice(p, p + n) for n, p in zip(np.shape(x)[2:], padding))] = x
    patches = padded[(slice(None), slice(None)) + tuple(index)]  # N, C, *outs, *taps
    order = [0] + list(range(2, 2 + spatial)) + [1] + list(range(2 + spatial, 2 + 2 * spatial))
    return np.transpose(patches, order).reshape(np.shape(x)[0] * int(np.prod(outs)), -1), outs, padded.shape


def _convolved(xp, x, w, attrs):
    """One group's convolution, without bias."""
    spatial = np.ndim(w) - 2
    if np.ndim(x) != spatial + 2 or np.shape(x)[1] != np.shape(w)[1]:
        raise ShapeError(f"convolution of input {list(np.shape(x))} with weight {list(np.shape(w))}")
    rows, outs, _ = _patch_rows(xp, x, w, attrs)
    filters = np.asarray(w).reshape(np.shape(w)[0], -1)
    out = call("matmul", xp, [rows, np.transpose(filters)]).reshape([np.shape(x)[0]] + outs + [np.shape(w)[0]])
    return np.transpose(out, [0, 1 + spatial] + list(range(1, 1 + spatial)))


def _convolution_backward(xp, args, attrs, ctx):
    """(grad_input, grad_weight, grad_bias) of a convolution, per group, from its matmul form
    ``out_rows = patch_rows @ filters^T``: ``grad_filters = grad_rows^T @ patch_rows``, and
    ``grad_rows @ filters`` added back into the padded input at the positions each patch read."""
    if attrs.get("transposed"):
        raise AtenUnsupported("transposed convolution is not modelled")
    grad, x, w = (as_float(xp, t) for t in args[:3])
    groups = _groups(x, w, attrs)
    spatial = np.ndim(w) - 2
    grads_x, grads_w = [], []
    for part_x, part_w, part_g in zip(np.split(np.asarray(x), groups, axis=1), np.split(np.asarray(w), groups, axis=0),
                                      np.split(np.asarray(grad), groups, axis=1)):
        rows, outs, padded_shape = _patch_rows(xp, part_x, part_w, attrs)
        grad_rows = np.transpose(part_g, [0] + list(range(2, 2 + spatial)) + [1]).reshape(rows.shape[0], -1)
        filters = part_w.reshape(np.shape(part_w)[0], -1)
        grads_w.append(call("matmul", xp, [np.transpose(grad_rows), rows]).reshape(np.shape(part_w)))
        grads_x.append(_patches_added_back(xp, call("matmul", xp, [grad_rows, filters]), part_x, part_w, attrs,
                                           padded_shape))
    grad_bias = call("sum", xp, [grad], dim=[0] + list(range(2, 2 + spatial)))
    return [np.concatenate(grads_x, axis=1), np.concatenate(grads_w, axis=0), grad_bias]


def _patches_added_back(xp, grad_rows, x, w, attrs, padded_shape):
    """The input gradient: each patch row's entries added to the padded input position it was read
    from (positions read by several patches sum), the padding cut off again."""
    spatial = np.ndim(w) - 2
    _, padding, _, outs, index = _geometry(x, w, attrs)
    batch, channels = np.shape(x)[:2]
    taps = np.shape(w)[2:]
    patches = np.asarray(grad_rows).reshape([batch] + outs + [channels] + list(taps))
    patches = np.transpose(patches, [0, 1 + spatial] + list(range(1, 1 + spatial)) +
                           list(range(2 + spatial, 2 + 2 * spatial)))  # N, C, *outs, *taps
    total = literal(xp, np.zeros(padded_shape), "float")
    full = tuple(np.broadcast_to(i, np.broadcast_shapes(*[np.shape(j) for j in index])) for i in index)
    for position in np.ndindex(*full[0].shape):
        at = (slice(None), slice(None)) + tuple(int(axis[position]) for axis in full)
        total[at] = total[at] + patches[(slice(None), slice(None)) + position]
    return total[(slice(None), slice(None)) + tuple(slice(p, p + n) for n, p in zip(np.shape(x)[2:], padding))]


aten("aten.convolution.default", _convolution)
aten("aten.convolution_backward.default", _convolution_backward)


# --- layer norm -----------------------------------------------------------------------------------

def _normalised_axes(x, attrs) -> tuple[int, ...]:
    count = len(attrs.get("normalized_shape", [np.shape(x)[-1]]))
    if count > np.ndim(x) or count == 0:
        raise ShapeError(f"normalized_shape {attrs.get('normalized_shape')} does not fit a {np.ndim(x)}-d input")
    return tuple(range(np.ndim(x) - count, np.ndim(x)))


def _mean(xp, x, axes):
    return call("mean", xp, [x], dim=list(axes), keepdim=True)


def _layer_norm(xp, args, attrs, ctx):
    tensors = optional_tensors(args, attrs, ["input", "weight?", "bias?"])
    x = as_float(xp, tensors["input"])
    axes = _normalised_axes(x, attrs)
    mean = _mean(xp, x, axes)
    centred = x - mean
    variance = _mean(xp, centred * centred, axes)
    rstd = call("rsqrt", xp, [call("add", xp, [variance], scalar=float(attrs.get("eps", 1e-5)))])
    out = centred * rstd
    if "weight" in tensors:
        out = out * tensors["weight"]
    if "bias" in tensors:
        out = out + tensors["bias"]
    return [_array(xp, out), _array(xp, mean), _array(xp, rstd)]


def _layer_norm_backward(xp, args, attrs, ctx):
    tensors = optional_tensors(args, attrs, ["grad_out", "input", "mean", "rstd", "weight?", "bias?"])
    grad, x, mean, rstd = (as_float(xp, tensors[k]) for k in ("grad_out", "input", "mean", "rstd"))
    axes = _normalised_axes(x, attrs)
    xhat = (x - mean) * rstd
    scaled = grad * tensors["weight"] if "weight" in tensors else grad
    grad_input = rstd * (scaled - _mean(xp, scaled, axes) - xhat * _mean(xp, scaled * xhat, axes))
    batch = list(range(np.ndim(x) - len(axes)))
    grad_weight = call("sum", xp, [grad * xhat], dim=batch) if batch else grad * xhat
    grad_bias = call("sum", xp, [grad], dim=batch) if batch else grad
    return [_array(xp, grad_input), _array(xp, grad_weight), _array(xp, grad_bias)]


aten("aten.native_layer_norm.default", _layer_norm)
aten("aten.native_layer_norm_backward.default", _layer_norm_backward)


# --- softmax --------------------------------------------------------------------------------------

def _softmax(rule: str):
    def evaluate(xp, args, attrs, ctx):
        return [call(rule, xp, [as_float(xp, args[0])], dim=int(attrs.get("dim", -1)))]
    return evaluate


def _softmax_backward(xp, args, attrs, ctx):
    """grad_in = y * (g - sum(g * y)) with y the softmax output."""
    grad, output = args
    dim = norm_dim(int(attrs.get("dim", -1)), np.ndim(output))
    inner = call("sum", xp, [grad * output], dim=[dim], keepdim=True)
    return [_array(xp, output * (grad - inner))]


def _log_softmax_backward(xp, args, attrs, ctx):
    """grad_in = g - exp(y) * sum(g) with y the log-softmax output."""
    grad, output = args
    dim = norm_dim(int(attrs.get("dim", -1)), np.ndim(output))
    total = call("sum", xp, [grad], dim=[dim], keepdim=True)
    return [_array(xp, grad - call("exp", xp, [output]) * total)]


def _safe_softmax(xp, args, attrs, ctx):
    """softmax, with 0 for a row that is entirely -inf (attention with every key masked).  In Z3
    -inf is a named unknown (``scalar_term``), so there the rule is softmax's: the two agree on
    every row with a finite entry, and the NumPy re-check sees the zero rows."""
    x = as_float(xp, args[0])
    dim = int(attrs.get("dim", -1))
    probabilities = call("softmax", xp, [x], dim=dim)
    if xp.symbolic:
        return [probabilities]
    masked = np.all(np.isneginf(np.asarray(x, dtype=float)), axis=dim, keepdims=True)
    return [np.where(masked, 0.0, probabilities)]


aten("aten._softmax.default", _softmax("softmax"))
aten("aten._safe_softmax.default", _safe_softmax)
aten("aten._log_softmax.default", _softmax("log_softmax"))
aten("aten._softmax_backward_data.default", _softmax_backward)
aten("aten._log_softmax_backward_data.default", _log_softmax_backward)


# --- negative log-likelihood ---------------------------------------------------------------------

_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _nll_parts(xp, log_probs, target, weight, ignore_index: int):
    """Per-sample weights (0 where ignored) and a target that is safe to index with."""
    ignored = call("eq", xp, [target], scalar=ignore_index)
    safe = call("where", xp, [ignored, literal(xp, np.zeros(np.shape(target)), "int"), target])
    if weight is None:
        per_sample = literal(xp, np.ones(np.shape(target)), "float")
    else:
        per_sample = xp.take_rows(as_float(xp, weight), safe)
    zero = literal(xp, np.zeros(np.shape(target)), "float")
    return safe, call("where", xp, [ignored, zero, per_sample])


def _nll_loss_forward(xp, args, attrs, ctx):
    tensors = optional_tensors(args, attrs, ["self", "target", "weight?"])
    log_probs, target = as_float(xp, tensors["self"]), tensors["target"]
    if kind_of(xp, target) != "int":
        raise AtenUnsupported("nll_loss with probability targets")
    reduction = _REDUCTIONS.get(int(attrs.get("reduction", 1)))
    if np.ndim(log_probs) > 2:
        raise AtenUnsupported("nll_loss over more than one batch dim (use the 2-d form)")
    safe, weights = _nll_parts(xp, log_probs, target, tensors.get("weight"), int(attrs.get("ignore_index", -100)))
    losses = -xp.pick(log_probs, safe) * weights
    total_weight = _array(xp, np.sum(weights))
    if reduction == "none":  # torch leaves total_weight at 0 when nothing is reduced
        return [_array(xp, losses), literal(xp, 0.0, "float")]
    total = _array(xp, np.sum(losses))
    return [total if reduction == "sum" else _array(xp, call("div", xp, [total, total_weight])), total_weight]


def _nll_loss_backward(xp, args, attrs, ctx):
    tensors = optional_tensors(args, attrs, ["grad_output", "self", "target", "weight?", "total_weight"])
    grad, log_probs, target = tensors["grad_output"], tensors["self"], tensors["target"]
    reduction = _REDUCTIONS.get(int(attrs.get("reduction", 1)))
    safe, weights = _nll_parts(xp, log_probs, target, tensors.get("weight"), int(attrs.get("ignore_index", -100)))
    scale = -weights * grad
    if reduction == "mean":
        scale = call("div", xp, [scale, tensors["total_weight"]])
    classes = np.shape(log_probs)[-1]
    onehot = call("eq", xp, [np.expand_dims(safe, -1), literal(xp, np.arange(classes), "int")])
    zero = literal(xp, np.zeros(np.shape(log_probs)), "float")
    return [_array(xp, call("where", xp, [onehot, np.broadcast_to(np.expand_dims(scale, -1), np.shape(log_probs)),
                                          zero]))]


aten("aten.nll_loss_forward.default", _nll_loss_forward)
aten("aten.nll_loss_backward.default", _nll_loss_backward)


# --- embedding -------------------------------------------------------------------------------------

def _embedding(xp, args, attrs, ctx):
    weight, indices = args
    return [call("embedding", xp, [indices, as_float(xp, weight)])]


def _embedding_backward(xp, args, attrs, ctx):
    grad, indices = args
    if attrs.get("scale_grad_by_freq"):
        raise AtenUnsupported("embedding with scale_grad_by_freq=True")
    rows = int(attrs["num_weights"])
    table = literal(xp, np.zeros((rows, np.shape(grad)[-1])), "float")
    (out,) = _embedding_grad(xp, [indices, as_float(xp, grad), table])
    padding = int(attrs.get("padding_idx", -1))
    if 0 <= padding < rows:
        out = _array(xp, out)
        out[padding] = literal(xp, np.zeros(np.shape(grad)[-1]), "float")
    return [out]


def _embedding_grad(xp, args):
    from ..registry import REGISTRY
    from .aten import UNIT
    return REGISTRY["embedding_grad"].evaluate(xp, args, {}, UNIT)


aten("aten.embedding.default", _embedding)
aten("aten.embedding_dense_backward.default", _embedding_backward)


# --- attention -------------------------------------------------------------------------------------

def _attention_inputs(args, attrs):
    if len(args) != 3 or attrs.get("attn_mask") is not None:
        raise AtenUnsupported("scaled_dot_product_attention with an attn_mask")
    if float(attrs.get("dropout_p", 0.0)) != 0.0:
        raise AtenUnsupported("scaled_dot_product_attention with dropout")
    return args


def _attention_probs(xp, q, k, attrs):
    from ..registry import REGISTRY
    from .aten import UNIT
    return REGISTRY["attention_probs"].evaluate(
        xp, [q, k], {"causal": bool(attrs.get("is_causal")), "scale": attrs.get("scale")}, UNIT)[0]


def _sdpa(xp, args, attrs, ctx):
    """(output, logsumexp): probabilities from the ``attention_probs`` rule, exact products."""
    q, k, v = (as_float(xp, a) for a in _attention_inputs(args, attrs))
    probs = _attention_probs(xp, q, k, attrs)
    out = call("matmul", xp, [probs, v])
    scale = attrs.get("scale")
    scale = 1.0 / np.sqrt(np.shape(q)[-1]) if scale is None else float(scale)
    scores = call("matmul", xp, [q, np.swapaxes(k, -1, -2)]) * scale
    if attrs.get("is_causal"):
        length, keys = np.shape(scores)[-2:]
        visible = np.tril(np.ones((length, keys), dtype=bool))
        scores = xp.where(np.broadcast_to(visible, np.shape(scores)), scores,
                          literal(xp, np.full(np.shape(scores), -1e30), "float"))
    logsumexp = call("log", xp, [call("sum", xp, [call("exp", xp, [scores])], dim=[-1])])
    return [_array(xp, out), _array(xp, logsumexp)]


def _sdpa_backward(xp, args, attrs, ctx):
    """dV = P^T dO, dS = P * (dO V^T - rowsum(dO V^T * P)), dQ = dS K s, dK = dS^T Q s."""
    grad, q, k, v = (as_float(xp, a) for a in args[:4])
    _attention_inputs([q, k, v], attrs)
    scale = attrs.get("scale")
    scale = 1.0 / np.sqrt(np.shape(q)[-1]) if scale is None else float(scale)
    probs = _attention_probs(xp, q, k, attrs)
    swap = lambda a: np.swapaxes(a, -1, -2)  # noqa: E731
    grad_v = call("matmul", xp, [swap(probs), grad])
    grad_p = call("matmul", xp, [grad, swap(v)])
    inner = call("sum", xp, [grad_p * probs], dim=[-1], keepdim=True)
    grad_s = probs * (grad_p - inner)
    grad_q = call("matmul", xp, [grad_s, k]) * scale
    grad_k = call("matmul", xp, [swap(grad_s), q]) * scale
    return [_array(xp, grad_q), _array(xp, grad_k), _array(xp, grad_v)]


aten("aten._scaled_dot_product_flash_attention_for_cpu.default", _sdpa)
aten("aten._scaled_dot_product_flash_attention_for_cpu_backward.default", _sdpa_backward)


# --- mean squared error ---------------------------------------------------------------------------

def _mse_loss(xp, args, attrs, ctx):
    x, target = (as_float(xp, a) for a in args)
    difference = _array(xp, np.asarray(x) - np.broadcast_to(target, np.shape(x)))
    squares = _array(xp, difference * difference)
    reduction = _REDUCTIONS.get(int(attrs.get("reduction", 1)))
    if reduction == "none":
        return [squares]
    total = _array(xp, np.sum(squares))
    return [total if reduction == "sum" else _array(xp, call("div", xp, [total, literal(xp, squares.size, "float")]))]


def _mse_loss_backward(xp, args, attrs, ctx):
    """d/dx of the loss: 2 (x - target) grad, divided by the element count for the mean."""
    grad, x, target = (as_float(xp, a) for a in args)
    difference = _array(xp, np.asarray(x) - np.broadcast_to(target, np.shape(x)))
    scaled = _array(xp, difference * 2.0 * np.broadcast_to(grad, np.shape(x)))
    if _REDUCTIONS.get(int(attrs.get("reduction", 1))) == "mean":
        scaled = _array(xp, call("div", xp, [scaled, literal(xp, np.full(np.shape(x), difference.size), "float")]))
    return [scaled]


aten("aten.mse_loss.default", _mse_loss)
aten("aten.mse_loss_backward.default", _mse_loss_backward)
