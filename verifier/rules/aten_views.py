"""Recorded ``aten.*`` views, data movement, reductions and indexing.

Each op reuses the rule of ``shape_ops.py`` / ``reductions.py`` where torch's meaning is the
same (``view`` is ``reshape``, ``sum.dim_IntList`` is ``sum``...); what is left is written
with NumPy indexing, which is exact in both backends (it only moves terms around).
"""
from __future__ import annotations

import numpy as np

from ..backends import TorchRaises
from ..registry import REGISTRY, ShapeError, norm_dim
from .aten import UNIT, AtenUnsupported, aten, call, dtype_kind, kind_of, literal, scalar_term, to_kind


def _array(xp, value):
    return np.array(value, dtype=object) if xp.symbolic else np.array(value)


# --- views ----------------------------------------------------------------------------------

def _view(key: str):
    def evaluate(xp, args, attrs, ctx):
        return [call("reshape", xp, [args[0]], shape=list(attrs[key]))]
    return evaluate


for _name, _key in (("view.default", "size"), ("_unsafe_view.default", "size"), ("reshape.default", "shape"),
                    ("_reshape_alias.default", "size")):
    aten(f"aten.{_name}", _view(_key))
def _flatten(xp, args, attrs, ctx):
    shape = list(np.shape(args[0]))
    if not shape:
        return [call("reshape", xp, [args[0]], shape=[1])]
    start = norm_dim(int(attrs.get("start_dim", 0)), len(shape))
    end = norm_dim(int(attrs.get("end_dim", -1)), len(shape))
    merged = int(np.prod(shape[start:end + 1]))
    return [call("reshape", xp, [args[0]], shape=shape[:start] + [merged] + shape[end + 1:])]


aten("aten.flatten.using_ints", _flatten)


def _strided_positions(x, attrs) -> np.ndarray:
    """For ``as_strided``: the flat position in ``x`` of each element of the view.  Modelled only
    for an input whose memory order is its logical order (the recorder says so)."""
    if attrs.get("input_contiguous") is not True:
        raise AtenUnsupported("as_strided of a tensor whose memory order is not its logical order")
    base = int(attrs.get("input_storage_offset", 0))
    offset = 0 if attrs.get("storage_offset") is None else int(attrs["storage_offset"]) - base
    size, stride = [int(n) for n in attrs["size"]], [int(n) for n in attrs["stride"]]
    index = np.full(size, offset, dtype=np.int64)
    for dim, (n, step) in enumerate(zip(size, stride)):
        index = index + np.arange(n).reshape([-1 if d == dim else 1 for d in range(len(size))]) * step
    if index.size and (index.min() < 0 or index.max() >= np.size(x)):
        raise AtenUnsupported("as_strided reaching outside the tensor it views")
    return index


def _as_strided(xp, args, attrs, ctx):
    """A view addressing memory: element ``i`` is the input's memory at ``offset + sum(i_k * stride_k)``."""
    index = _strided_positions(args[0], attrs)
    return [_array(xp, np.reshape(_array(xp, args[0]), (-1,))[index])]


def _as_strided_scatter(xp, args, attrs, ctx):
    """``x`` with the elements an ``as_strided`` view of it addresses replaced by ``src``."""
    x, src = args
    index = _strided_positions(x, attrs)
    if len(np.unique(index)) != index.size:
        raise AtenUnsupported("as_strided_scatter through a view that addresses an element twice")
    flat = np.reshape(_array(xp, x), (-1,)).copy()
    flat[index.reshape(-1)] = np.reshape(to_kind(xp, src, kind_of(xp, x)), (-1,))
    return [_array(xp, np.reshape(flat, np.shape(x)))]


aten("aten.as_strided.default", _as_strided)
aten("aten.as_strided_scatter.default", _as_strided_scatter)
for _name in ("view_as.default", "reshape_as.default"):
    aten(f"aten.{_name}", lambda xp, args, attrs, ctx: [call("reshape", xp, [args[0]], shape=list(np.shape(args[1])))])


def _t(xp, args, attrs, ctx):
    x = args[0]
    if np.ndim(x) > 2:
        raise ShapeError(f"t() expects a tensor with <= 2 dims, got {np.ndim(x)}")
    return [call("transpose", xp, [x], dim0=0, dim1=1) if np.ndim(x) == 2 else x]


aten("aten.t.default", _t)
aten("aten.transpose.int", lambda xp, args, attrs, ctx: [
    call("transpose", xp, args, dim0=int(attrs.get("dim0", 0)), dim1=int(attrs.get("dim1", 1)))])
aten("aten.permute.default", lambda xp, args, attrs, ctx: [call("permute", xp, args, dims=list(attrs["dims"]))])


def _expand(xp, args, attrs, ctx):
    x = args[0]
    size = list(attrs["size"]) if "size" in attrs else list(np.shape(args[1]))
    lead = len(size) - np.ndim(x)
    if lead < 0:
        raise ShapeError(f"expand to {size} has fewer dims than the tensor {list(np.shape(x))}")
    target = [np.shape(x)[i - lead] if int(d) == -1 else int(d) for i, d in enumerate(size)]
    return [_array(xp, np.broadcast_to(x, target))]


aten("aten.expand.default", _expand)
aten("aten.expand_as.default", _expand)


def _unsqueeze(xp, args, attrs, ctx):
    x = args[0]
    return [np.expand_dims(x, norm_dim(int(attrs["dim"]), np.ndim(x) + 1))]


def _squeeze(xp, args, attrs, ctx):
    x = args[0]
    dims = attrs.get("dim", attrs.get("dims"))
    if dims is None:
        dims = [d for d in range(np.ndim(x)) if np.shape(x)[d] == 1]
    dims = dims if isinstance(dims, (list, tuple)) else [dims]
    if np.ndim(x) == 0:
        return [x]
    drop = tuple(d for d in (norm_dim(int(d), np.ndim(x)) for d in dims) if np.shape(x)[d] == 1)
    return [np.squeeze(x, axis=drop) if drop else x]


aten("aten.unsqueeze.default", _unsqueeze)
for _overload in ("default", "dim", "dims"):
    aten(f"aten.squeeze.{_overload}", _squeeze)


def _index(ndim: int, dim: int, position) -> tuple:
    index = [slice(None)] * ndim
    index[dim] = position
    return tuple(index)


def _slice(xp, args, attrs, ctx):
    x = args[0]
    dim = norm_dim(int(attrs.get("dim", 0)), np.ndim(x))
    start, end, step = attrs.get("start"), attrs.get("end"), int(attrs.get("step", 1))
    if step == 1:
        return [call("slice", xp, [x], dim=dim, start=start, end=end)]
    if step < 1:
        raise ShapeError(f"slice step must be positive, got {step}")
    return [x[_index(np.ndim(x), dim, slice(start, end, step))]]


def _select(xp, args, attrs, ctx):
    x = args[0]
    dim = norm_dim(int(attrs["dim"]), np.ndim(x))
    size, index = np.shape(x)[dim], int(attrs["index"])
    if not -size <= index < size:
        raise ShapeError(f"select index {index} out of range for dim {dim} of size {size}")
    return [_array(xp, x[_index(np.ndim(x), dim, index % size)])]


def _flip(xp, args, attrs, ctx):
    """``x.flip(dims)``: the order of every named dim reversed (a causal conv1d's kernel)."""
    x = args[0]
    dims = tuple(norm_dim(int(d), max(np.ndim(x), 1)) for d in attrs.get("dims", ()))
    return [_array(xp, np.flip(np.asarray(x), axis=dims) if dims else np.asarray(x))]


aten("aten.flip.default", _flip)
aten("aten.slice.Tensor", _slice)
aten("aten.select.int", _select)
aten("aten.narrow.default", lambda xp, args, attrs, ctx: _slice(
    xp, args, {"dim": attrs.get("dim", 0), "start": int(attrs["start"]),
               "end": int(attrs["start"]) + int(attrs["length"])}, ctx))


def _slice_scatter(xp, args, attrs, ctx):
    x, src = args
    out = _array(xp, x)
    dim = norm_dim(int(attrs.get("dim", 0)), np.ndim(x))
    region = _index(np.ndim(x), dim, slice(attrs.get("start"), attrs.get("end"), int(attrs.get("step", 1))))
    if out[region].shape != np.shape(src):
        raise ShapeError(f"slice_scatter of a {list(np.shape(src))} source into a {list(out[region].shape)} slice")
    out[region] = to_kind(xp, src, kind_of(xp, x))
    return [out]


def _select_scatter(xp, args, attrs, ctx):
    x, src = args
    out = _array(xp, x)
    dim = norm_dim(int(attrs["dim"]), np.ndim(x))
    region = _index(np.ndim(x), dim, int(attrs["index"]) % np.shape(x)[dim])
    if out[region].shape != np.shape(src):
        raise ShapeError(f"select_scatter of a {list(np.shape(src))} source into a {list(out[region].shape)} slice")
    out[region] = to_kind(xp, src, kind_of(xp, x))
    return [out]


def _constant_pad_nd(xp, args, attrs, ctx):
    """``F.pad(x, (left_last, right_last, left_prev, ...), value=c)``: negative amounts crop."""
    x = _array(xp, args[0])
    pad = [int(p) for p in attrs["pad"]]
    if len(pad) % 2 or len(pad) // 2 > np.ndim(x):
        raise ShapeError(f"constant_pad_nd pads {len(pad)} values for a {np.ndim(x)}-d tensor")
    crop, place, shape = [], [], list(np.shape(x))
    for dim in range(np.ndim(x)):
        back = np.ndim(x) - 1 - dim
        left, right = (pad[2 * back], pad[2 * back + 1]) if 2 * back < len(pad) else (0, 0)
        crop.append(slice(max(-left, 0), shape[dim] - max(-right, 0)))
        kept = shape[dim] - max(-left, 0) - max(-right, 0)
        if kept < 0:
            raise ShapeError(f"constant_pad_nd crops dim {dim} of size {shape[dim]} below zero")
        place.append(slice(max(left, 0), max(left, 0) + kept))
        shape[dim] = kept + max(left, 0) + max(right, 0)
    kind = kind_of(xp, x)
    out = _array(xp, literal(xp, np.full(shape, attrs.get("value", 0) or 0), kind))
    out[tuple(place)] = x[tuple(crop)]
    return [out]


aten("aten.constant_pad_nd.default", _constant_pad_nd)
aten("aten.slice_scatter.default", _slice_scatter)
aten("aten.select_scatter.default", _select_scatter)


def _pieces(attrs, size: int) -> list[int]:
    if "split_sizes" in attrs:
        return [int(s) for s in attrs["split_sizes"]]
    step = int(attrs.get("split_size", size))
    if step <= 0:
        raise ShapeError(f"split size must be positive, got {step}")
    return [min(step, size - start) for start in range(0, size, step)] or [0]


def _split(xp, args, attrs, ctx):
    x = args[0]
    dim = norm_dim(int(attrs.get("dim", 0)), np.ndim(x))
    return REGISTRY["split"].evaluate(xp, [x], {"dim": dim, "sizes": _pieces(attrs, np.shape(x)[dim])}, UNIT)


for _name in ("split.Tensor", "split_with_sizes.default"):
    aten(f"aten.{_name}", _split)


def _chunk(xp, args, attrs, ctx):
    """``chunk(n)``: pieces of ``ceil(size / n)`` (the last smaller), so sometimes fewer than n."""
    x = args[0]
    dim = norm_dim(int(attrs.get("dim", 0)), np.ndim(x))
    chunks = int(attrs["chunks"])
    if chunks <= 0:
        raise ShapeError(f"chunk expects a positive number of chunks, got {chunks}")
    step = max(1, -(-np.shape(x)[dim] // chunks))
    return _split(xp, [x], {"dim": dim, "split_size": step}, ctx)


aten("aten.chunk.default", _chunk)


def _unbind(xp, args, attrs, ctx):
    x = args[0]
    dim = norm_dim(int(attrs.get("dim", 0)), np.ndim(x))
    return [_array(xp, x[_index(np.ndim(x), dim, i)]) for i in range(np.shape(x)[dim])]


aten("aten.unbind.int", _unbind)


def _cat(xp, args, attrs, ctx):
    tensors = [a for a in args if not (np.ndim(a) == 1 and np.shape(a)[0] == 0)] or list(args[:1])
    kinds = {kind_of(xp, a) for a in tensors}
    if len(kinds) > 1:  # torch promotes to the widest dtype
        kind = "float" if "float" in kinds else "int"
        tensors = [to_kind(xp, a, kind) for a in tensors]
    return [call("cat", xp, tensors, dim=int(attrs.get("dim", 0)))]


def _stack(xp, args, attrs, ctx):
    dim = norm_dim(int(attrs.get("dim", 0)), np.ndim(args[0]) + 1)
    return _cat(xp, [np.expand_dims(a, dim) for a in args], {"dim": dim}, ctx)


def _chunk_cat(xp, args, attrs, ctx):
    """``torch._chunk_cat``: each tensor viewed as ``shape[:dim] + (num_chunks, rest)`` (its ``dim``
    and everything after it split into ``num_chunks`` rows), then concatenated along ``dim + 1``."""
    chunks = int(attrs["num_chunks"])
    dim = norm_dim(int(attrs.get("dim", 0)), np.ndim(args[0]))
    rows = []
    for tensor in args:
        shape = [int(n) for n in np.shape(tensor)]
        if shape[dim] % chunks:
            raise AtenUnsupported(f"_chunk_cat of a dim of {shape[dim]} into {chunks} chunks (padding)")
        rows.append(call("reshape", xp, [tensor], shape=shape[:dim] + [chunks, int(np.prod(shape[dim:])) // chunks]))
    return _cat(xp, rows, {"dim": dim + 1}, ctx)


def _split_with_sizes_copy(xp, args, attrs, ctx):
    """``split_with_sizes_copy(x, sizes, dim, out=[...])``: the pieces, the new values of ``out``."""
    x, outs = args[0], args[1:]
    sizes = [int(n) for n in attrs["all_gather_input_split_sizes" if "all_gather_input_split_sizes" in attrs
                                    else "split_sizes"]]
    dim = norm_dim(int(attrs.get("dim", 0)), np.ndim(x))
    if len(sizes) != len(outs) or sum(sizes) != np.shape(x)[dim]:
        raise ShapeError(f"split_with_sizes_copy of {np.shape(x)[dim]} into {sizes} for {len(outs)} outputs")
    bounds = np.cumsum([0] + sizes)
    pieces = [_array(xp, x)[tuple(slice(int(a), int(b)) if d == dim else slice(None) for d in range(np.ndim(x)))]
              for a, b in zip(bounds[:-1], bounds[1:])]
    for piece, out in zip(pieces, outs):
        if np.shape(piece) != np.shape(out):
            raise ShapeError(f"split_with_sizes_copy: a piece of shape {np.shape(piece)} into out {np.shape(out)}")
    return [to_kind(xp, piece, kind_of(xp, out)) for piece, out in zip(pieces, outs)]


def _all_gather_copy_in(xp, args, attrs, ctx):
    """FSDP2's ``all_gather_copy_in(inputs, output, sizes, numel, rank)``: the inputs, flattened and
    concatenated, written into ``output[numel * rank : numel * (rank + 1)]``; returns that slice and
    the whole output."""
    inputs, output = args[:-1], args[-1]
    numel, rank = int(attrs["all_gather_input_numel"]), int(attrs["rank"])
    sizes = [int(n) for n in attrs["inp_split_sizes"]]
    flat = [call("reshape", xp, [x], shape=[int(np.prod(np.shape(x)))]) for x in inputs]
    if [int(np.shape(f)[0]) for f in flat] != sizes or sum(sizes) != numel or np.ndim(output) != 1 \
            or numel * (rank + 1) > np.shape(output)[0]:
        raise ShapeError(f"all_gather_copy_in: inputs of {[np.shape(x) for x in inputs]} for sizes {sizes} into "
                         f"{np.shape(output)} at rank {rank}")
    piece = to_kind(xp, _cat(xp, flat, {"dim": 0}, ctx)[0], kind_of(xp, output))
    whole = _array(xp, output)
    start = numel * rank
    new = _cat(xp, [whole[:start], piece, whole[start + numel:]], {"dim": 0}, ctx)[0]
    return [piece, new]


aten("aten.cat.default", _cat)
aten("aten.stack.default", _stack)
aten("aten._chunk_cat.default", _chunk_cat)
aten("fsdp.split_with_sizes_copy.default", _split_with_sizes_copy)
aten("fsdp.all_gather_copy_in.default", _all_gather_copy_in)


# --- reductions ----------------------------------------------------------------------------------

def _dims(attrs) -> list[int] | None:
    """``dim=None`` and ``dim=[]`` both reduce every dim (torch's sum/mean/amax)."""
    dim = attrs.get("dim")
    if dim is None or (isinstance(dim, (list, tuple)) and not dim):
        return None
    return list(dim) if isinstance(dim, (list, tuple)) else [dim]


def _reduce(rule: str):
    def evaluate(xp, args, attrs, ctx):
        x = args[0]
        kind = dtype_kind(attrs.get("dtype"))
        if kind is not None:
            x = to_kind(xp, x, kind)
        elif kind_of(xp, x) == "bool" or (rule == "mean" and kind_of(xp, x) == "int"):
            x = to_kind(xp, x, "int" if rule == "sum" else "float")
        if rule == "amax" and np.size(x) == 0:
            raise ShapeError("amax of an empty tensor")
        return [call(rule, xp, [x], dim=_dims(attrs), keepdim=bool(attrs.get("keepdim", False)))]
    return evaluate


aten("aten.sum.dim_IntList", _reduce("sum"))
aten("aten.sum.default", _reduce("sum"))
aten("aten.mean.dim", _reduce("mean"))
aten("aten.mean.default", _reduce("mean"))
aten("aten.amax.default", _reduce("amax"))
aten("aten.max.default", _reduce("amax"))


def _fold(xp, x, dim: int, keepdim: bool, combine):
    parts = [np.take(x, i, axis=dim) for i in range(np.shape(x)[dim])]
    if not parts:
        raise ShapeError("reduction over an empty dim")
    result = parts[0]
    for part in parts[1:]:
        result = combine(result, part)
    result = _array(xp, result)
    return np.expand_dims(result, dim) if keepdim else result


def _amin(xp, args, attrs, ctx):
    x = args[0]
    dims = _dims(attrs)
    dims = sorted(norm_dim(int(d), np.ndim(x)) for d in dims) if dims is not None else list(range(np.ndim(x)))
    keep = bool(attrs.get("keepdim", False))
    for d in reversed(dims):
        x = _fold(xp, x, d, keep, xp.minimum)
    return [x]


aten("aten.amin.default", _amin)
aten("aten.min.default", _amin)


def _aminmax(xp, args, attrs, ctx):
    """(min, max) over ``dim``, or over every element when none is named (a vision-language rotary
    embedding's position range)."""
    dim = attrs.get("dim")
    over = {"dim": None if dim is None else [dim], "keepdim": bool(attrs.get("keepdim", False))}
    return [_amin(xp, args[:1], over, ctx)[0], _reduce("amax")(xp, args[:1], over, ctx)[0]]


aten("aten.aminmax.default", _aminmax)


def _truth(combine: str):
    """``all``/``any`` over dims (every dim when none is named): ``x != 0`` folded with and/or
    (megatron-core's RNG tracker checks ``(states == state).all()``)."""
    def evaluate(xp, args, attrs, ctx):
        x = to_kind(xp, args[0], "bool")
        dims = _dims(attrs)
        dims = sorted(norm_dim(int(d), np.ndim(x)) for d in dims) if dims is not None else list(range(np.ndim(x)))
        keep = bool(attrs.get("keepdim", False))
        for d in reversed(dims):
            x = _fold(xp, x, d, keep, lambda a, b: xp.logical(combine, a, b))
        return [_array(xp, x)]
    return evaluate


for _overload in ("default", "dim", "dims"):
    aten(f"aten.all.{_overload}", _truth("and"))
    aten(f"aten.any.{_overload}", _truth("or"))
aten("aten._is_all_true.default", _truth("and"))   # torch.distributions' argument check


def _max_dim(pick_max: bool):
    """(values, indices) along a dim; the index is the first position holding the extremum."""
    def evaluate(xp, args, attrs, ctx):
        x = args[0]
        dim = norm_dim(int(attrs.get("dim", 0)), np.ndim(x))
        keep = bool(attrs.get("keepdim", False))
        parts = [_array(xp, np.take(x, i, axis=dim)) for i in range(np.shape(x)[dim])]
        best, index = parts[0], literal(xp, np.zeros(np.shape(parts[0])), "int")
        for position, part in enumerate(parts[1:], start=1):
            better = xp.compare("gt" if pick_max else "lt", part, best)
            index = xp.where(better, literal(xp, np.full(np.shape(part), position), "int"), index)
            best = xp.maximum(best, part) if pick_max else xp.minimum(best, part)
        values = _fold(xp, x, dim, keep, xp.maximum if pick_max else xp.minimum)
        index = _array(xp, index)
        return [values, np.expand_dims(index, dim) if keep else index]
    return evaluate


aten("aten.max.dim", _max_dim(True))
aten("aten.min.dim", _max_dim(False))


def _argmax(xp, args, attrs, ctx):
    x = args[0]
    if attrs.get("dim") is None:
        x, attrs = np.reshape(x, (-1,)), {"dim": 0}
    return [_max_dim(True)(xp, [x], attrs, ctx)[1]]


aten("aten.argmax.default", _argmax)


def _topk(xp, args, attrs, ctx):
    """(values, indices) of the k largest (smallest) along a dim, best first: pick after pick, the first
    position not taken yet holding the extremum (a mixture-of-experts router picks its experts so)."""
    x = args[0]
    dim = norm_dim(int(attrs.get("dim", -1)), np.ndim(x))
    k, largest = int(attrs["k"]), bool(attrs.get("largest", True))
    parts = [_array(xp, np.take(x, i, axis=dim)) for i in range(np.shape(x)[dim])]
    if k > len(parts):
        raise ShapeError(f"topk of {k} along a dim of {len(parts)}")
    shape = np.shape(parts[0]) if parts else ()
    taken = [literal(xp, np.zeros(shape, dtype=bool), "bool") for _ in parts]
    values, indices = [], []
    for _ in range(k):
        best, index, have = parts[0], literal(xp, np.zeros(shape), "int"), xp.logical("not", taken[0])
        for position, part in enumerate(parts[1:], start=1):
            free = xp.logical("not", taken[position])
            beats = xp.logical("or", xp.logical("not", have), xp.compare("gt" if largest else "lt", part, best))
            better = xp.logical("and", free, beats)
            best = xp.where(better, part, best)
            index = xp.where(better, literal(xp, np.full(shape, position), "int"), index)
            have = xp.logical("or", have, free)
        taken = [xp.logical("or", mark, xp.compare("eq", index, literal(xp, np.full(shape, position), "int")))
                 for position, mark in enumerate(taken)]
        values.append(_array(xp, best))
        indices.append(_array(xp, index))
    if not values:
        empty = list(np.shape(x))
        empty[dim] = 0
        return [_array(xp, np.zeros(empty)), literal(xp, np.zeros(empty), "int")]
    return [_array(xp, np.stack(values, axis=dim)), _array(xp, np.stack(indices, axis=dim))]


aten("aten.topk.default", _topk)


def _var(xp, args, attrs, ctx):
    x = to_kind(xp, args[0], "float")
    dims = _dims(attrs)
    axes = tuple(range(np.ndim(x))) if dims is None else tuple(norm_dim(int(d), np.ndim(x)) for d in dims)
    count = int(np.prod([np.shape(x)[d] for d in axes])) if axes else 1
    correction = attrs.get("correction")
    correction = 1 if correction is None else correction
    mean = call("mean", xp, [x], dim=list(axes), keepdim=True)
    centred = x - mean
    total = call("sum", xp, [centred * centred], dim=list(axes), keepdim=bool(attrs.get("keepdim", False)))
    if count - correction <= 0:
        raise AtenUnsupported("variance with no degrees of freedom")
    return [total / (count - correction)]


aten("aten.var.correction", _var)
aten("aten.std.correction", lambda xp, args, attrs, ctx: [call("sqrt", xp, _var(xp, args, attrs, ctx))])


def _repeat(xp, args, attrs, ctx):
    """``x.repeat(*sizes)``: the tensor tiled, with leading dims added when ``sizes`` has more."""
    sizes = [int(n) for n in attrs["repeats"]]
    x = args[0]
    if len(sizes) < np.ndim(x):
        raise ShapeError(f"repeat with {len(sizes)} sizes of a {np.ndim(x)}-dim tensor")
    return [_array(xp, np.tile(np.reshape(x, (1,) * (len(sizes) - np.ndim(x)) + np.shape(x)), sizes))]


aten("aten.repeat.default", _repeat)


def _cumsum(xp, args, attrs, ctx):
    x = args[0]
    kind = dtype_kind(attrs.get("dtype"))
    x = to_kind(xp, x, kind) if kind else (to_kind(xp, x, "int") if kind_of(xp, x) == "bool" else x)
    return [_array(xp, np.cumsum(x, axis=norm_dim(int(attrs["dim"]), np.ndim(x))))]


aten("aten.cumsum.default", _cumsum)


# --- indexing ----------------------------------------------------------------------------------------

def _index_select(xp, args, attrs, ctx):
    x, index = args
    dim = norm_dim(int(attrs["dim"]), max(np.ndim(x), 1))
    moved = np.moveaxis(x, dim, 0)
    rows = xp.take_rows(moved, np.reshape(index, (-1,)))
    return [_array(xp, np.moveaxis(rows, 0, dim))]


def _gather(xp, args, attrs, ctx):
    """out[..., k, ...] = self[..., index[..., k, ...], ...] along ``dim``."""
    x, index = args
    dim = norm_dim(int(attrs["dim"]), np.ndim(x))
    if np.ndim(index) != np.ndim(x) or any(np.shape(index)[d] > np.shape(x)[d] for d in range(np.ndim(x)) if d != dim):
        raise ShapeError(f"gather index of shape {list(np.shape(index))} does not fit {list(np.shape(x))}")
    rows = np.moveaxis(x, dim, -1)
    picks = np.moveaxis(index, dim, -1)
    rows = rows[tuple(slice(0, n) for n in np.shape(picks)[:-1])]
    columns = [xp.pick(rows, picks[..., k]) for k in range(np.shape(picks)[-1])]
    out = np.stack([_array(xp, c) for c in columns], axis=-1) if columns else _array(xp, picks)
    return [_array(xp, np.moveaxis(out, -1, dim))]


aten("aten.index_select.default", _index_select)
aten("aten.gather.default", _gather)


def _index_tensor(xp, args, attrs, ctx):
    """``self[idx]`` with one integer index tensor on the first dim (the common lookup), or
    ``self[rows, cols]`` of a matrix with two (``logits[arange(n), target]``)."""
    if attrs.get("indices_none") or len(args) < 2 or len(args) - 1 > np.ndim(args[0]):
        raise AtenUnsupported("advanced indexing other than x[i0, i1, ...] with index tensors on the leading dims")
    x, *indices = args
    if any(kind_of(xp, index) == "bool" for index in indices):
        raise AtenUnsupported("boolean-mask indexing has a data-dependent shape")
    if len(indices) == 1:
        return [_array(xp, xp.take_rows(x, indices[0]))]
    if np.ndim(x) > 2:
        return [_array(xp, _leading_index(xp, x, indices))]
    rows, cols = np.broadcast_arrays(np.asarray(indices[0], dtype=object if xp.symbolic else None),
                                     np.asarray(indices[1], dtype=object if xp.symbolic else None))
    return [_array(xp, xp.pick(xp.take_rows(x, rows), cols))]


def _leading_index(xp, x, indices):
    """``x[i0, i1, ..., ik]`` on the leading dims (a router's ``weights[token_idx, top_k_pos, None]``):
    the leading dims flattened into one, looked up at ``i0 * s1 * ... + i1 * ... + ik``; each index is
    checked against its own dim where it is a number."""
    sizes, flat = _leading_rows(xp, x, indices, TorchRaises)
    table = np.reshape(x, (int(np.prod(sizes)),) + np.shape(x)[len(indices):])
    return xp.take_rows(table, flat)


def _leading_rows(xp, x, indices, out_of_range: type[Exception]):
    """(the leading dims' sizes, the row ``i0 * s1 * ... + i1 * ... + ik`` of each index) for index
    tensors on the leading dims of ``x``; an index out of its dim raises ``out_of_range`` where the
    indices are numbers."""
    sizes = np.shape(x)[: len(indices)]
    for index, size in zip(indices, sizes):
        if not xp.symbolic and np.size(index) and (np.min(index) < 0 or np.max(index) >= size):
            raise out_of_range(f"index out of range: ids in [{np.min(index)}, {np.max(index)}] for a dim of {size}")
    kind = object if xp.symbolic else None
    parts = np.broadcast_arrays(*[np.asarray(i, dtype=kind) for i in indices])
    flat = parts[0]
    for part, size in zip(parts[1:], sizes[1:]):
        flat = flat * int(size) + part
    return sizes, flat


aten("aten.index.Tensor", _index_tensor)


# --- backward of views and index writes ------------------------------------------------------------

def _zeros_like_sizes(xp, grad, sizes):
    return _array(xp, literal(xp, np.zeros([int(s) for s in sizes]), "float" if kind_of(xp, grad) == "float"
                              else kind_of(xp, grad)))


def _select_backward(xp, args, attrs, ctx):
    """The gradient of ``x.select(dim, index)``: zeros with the incoming gradient at ``index``."""
    (grad,) = args
    out = _zeros_like_sizes(xp, grad, attrs["input_sizes"])
    dim = norm_dim(int(attrs["dim"]), out.ndim)
    return _select_scatter(xp, [out, grad], {"dim": dim, "index": int(attrs["index"])}, ctx)


def _slice_backward(xp, args, attrs, ctx):
    (grad,) = args
    out = _zeros_like_sizes(xp, grad, attrs["input_sizes"])
    return _slice_scatter(xp, [out, grad], {k: attrs.get(k) for k in ("dim", "start", "end", "step")}, ctx)


aten("aten.select_backward.default", _select_backward)
aten("aten.slice_backward.default", _slice_backward)


def _rows_written(xp, out, index, values, accumulate: bool):
    """``out[index[j]] = values[j]`` (or ``+=``) for every j in order, exact for symbolic ids:
    every row becomes a choice between its old value and each write that may land on it.  Added
    writes (``+=``) commute, so a row is its old value plus one ``If(index[j] == row, values[j], 0)``
    per write, a flat sum rather than choices nested as deep as the writes: the form in which a
    sum over ranks of such rows (a mixture-of-experts layer's ``index_add_`` of partial sums, then
    the all-reduce) merges term by term with the single device's."""
    rows = out.shape[0]
    flat_ids = np.reshape(index, (-1,))
    flat_values = np.reshape(np.broadcast_to(values, tuple(np.shape(index)) + out.shape[1:]),
                             (len(flat_ids),) + out.shape[1:])
    if not xp.symbolic:
        ids = np.asarray(flat_ids)
        if ids.size and (ids.min() < -rows or ids.max() >= rows):
            raise AtenUnsupported(f"index out of range for {rows} rows")
    zero = literal(xp, np.zeros(out.shape), kind_of(xp, out)) if accumulate else None
    for j in range(len(flat_ids)):
        hits = xp.compare("eq", literal(xp, np.arange(rows), "int"),
                          np.full(rows, flat_ids[j], dtype=object if xp.symbolic else None))
        hits = np.broadcast_to(np.reshape(hits, (rows,) + (1,) * (out.ndim - 1)), out.shape)
        if accumulate:
            out = _array(xp, out + xp.where(hits, np.broadcast_to(flat_values[j], out.shape), zero))
        else:
            out = _array(xp, xp.where(hits, np.broadcast_to(flat_values[j], out.shape), out))
    return out


def _index_put(xp, args, attrs, ctx):
    """``x[mask] = v`` (a boolean mask over leading dims) or ``x[ids] = v`` (ids on dim 0)."""
    if not attrs.get("indices_none") and len(args) == 4 and np.ndim(args[0]) == 2:
        return [_cells_written(xp, *args, bool(attrs.get("accumulate", False)))]
    if not attrs.get("indices_none") and 4 <= len(args) <= np.ndim(args[0]) + 2:
        return [_leading_cells_written(xp, args[0], args[1:-1], args[-1], bool(attrs.get("accumulate", False)))]
    if attrs.get("indices_none") or len(args) != 3:
        raise AtenUnsupported("index_put with more than two index tensors or an index on a later dim")
    x, index, values = args
    values = to_kind(xp, values, kind_of(xp, x))
    accumulate = bool(attrs.get("accumulate", False))
    if kind_of(xp, index) == "bool":
        mask_shape = np.shape(index)
        if tuple(np.shape(x)[:len(mask_shape)]) != tuple(mask_shape) or np.ndim(values) > np.ndim(x) - len(mask_shape):
            raise AtenUnsupported("index_put with a boolean mask selecting a data-dependent number of rows")
        mask = np.reshape(index, tuple(mask_shape) + (1,) * (np.ndim(x) - len(mask_shape)))
        target = np.broadcast_to(values, np.shape(x))
        written = x + target if accumulate else target
        return [_array(xp, xp.where(np.broadcast_to(mask, np.shape(x)), written, x))]
    return [_rows_written(xp, _array(xp, x), index, values, accumulate)]


def _leading_cells_written(xp, x, indices, values, accumulate: bool):
    """``x[i0, i1, ...] = values`` (``+=``) with index tensors on the leading dims of a tensor of any
    rank (the backward of ``weights[token_idx, top_k_pos]``): the leading dims flattened into rows,
    written at ``i0 * s1 * ... + i1 * ... + ik`` in index order."""
    if any(kind_of(xp, index) == "bool" for index in indices):
        raise AtenUnsupported("index_put with boolean masks on several dims")
    sizes, flat = _leading_rows(xp, x, indices, AtenUnsupported)
    kind = object if xp.symbolic else None
    rest = tuple(np.shape(x)[len(indices):])
    table = _array(xp, np.reshape(x, (int(np.prod(sizes)),) + rest))
    values = np.broadcast_to(np.asarray(to_kind(xp, values, kind_of(xp, x)), dtype=kind), flat.shape + rest)
    return _array(xp, np.reshape(_rows_written(xp, table, flat, values, accumulate), np.shape(x)))


def _cells_written(xp, x, rows, cols, values, accumulate: bool):
    """``matrix[rows, cols] = values`` (``+=`` with ``accumulate``), written in index order."""
    if kind_of(xp, rows) == "bool" or kind_of(xp, cols) == "bool":
        raise AtenUnsupported("index_put with boolean masks on two dims")
    symbolic = object if xp.symbolic else None
    rows, cols = np.broadcast_arrays(np.asarray(rows, dtype=symbolic), np.asarray(cols, dtype=symbolic))
    values = np.broadcast_to(np.asarray(to_kind(xp, values, kind_of(xp, x)), dtype=symbolic), rows.shape)
    out = _array(xp, x)
    row_ids = literal(xp, np.arange(out.shape[0])[:, None] * np.ones(out.shape, dtype=np.int64), "int")
    col_ids = literal(xp, np.ones(out.shape, dtype=np.int64) * np.arange(out.shape[1])[None, :], "int")
    zero = literal(xp, np.zeros(out.shape), kind_of(xp, out))  # added writes as a flat sum (_rows_written)
    for position in np.ndindex(*rows.shape):
        hits = xp.logical("and", xp.compare("eq", row_ids, np.full(out.shape, rows[position], dtype=symbolic)),
                          xp.compare("eq", col_ids, np.full(out.shape, cols[position], dtype=symbolic)))
        value = np.full(out.shape, values[position], dtype=symbolic)
        out = _array(xp, out + xp.where(hits, value, zero) if accumulate else xp.where(hits, value, out))
    return out


aten("aten.index_put.default", _index_put)
aten("aten.index_put_.default", _index_put)


def _index_add(xp, args, attrs, ctx):
    x, index, source = args
    dim = norm_dim(int(attrs.get("dim", 0)), max(np.ndim(x), 1))
    alpha = attrs.get("alpha", 1)
    source = source if alpha in (None, 1) else call("mul", xp, [source], scalar=alpha)
    moved = _rows_written(xp, _array(xp, np.moveaxis(x, dim, 0)), index, np.moveaxis(source, dim, 0), True)
    return [_array(xp, np.moveaxis(moved, 0, dim))]


aten("aten.index_add.default", _index_add)


def _nonzero(xp, args, attrs, ctx):
    """The coordinates of the nonzero elements in row-major order, as many rows as the recording saw
    (``count``: the size is data-dependent, and the recorder states the path taken as an assumption).
    Row j holds the coordinates of the element with exactly j nonzero elements before it (zeros where
    fewer than j+1 are nonzero): exact in Z3 too (a mixture-of-experts loop's experts and tokens)."""
    if attrs.get("count") is None:
        raise AtenUnsupported("nonzero without the number of elements the recording found")
    x = args[0]
    shape = np.shape(x)
    flags = np.reshape(to_kind(xp, x, "bool"), -1)
    ones = np.reshape(to_kind(xp, flags, "int"), -1)
    before = _array(xp, np.cumsum(ones) - ones) if np.size(ones) else ones
    coords = np.array(list(np.ndindex(*shape)), dtype=np.int64).reshape(-1, len(shape))
    zeros = literal(xp, np.zeros(np.size(ones)), "int")
    rows = []
    for j in range(int(attrs["count"])):
        hit = xp.logical("and", flags, xp.compare("eq", before, literal(xp, np.full(np.size(ones), j), "int")))
        rows.append([call("sum", xp, [xp.where(hit, literal(xp, coords[:, d], "int"), zeros)], dim=[0])
                     for d in range(len(shape))])
    if not rows:
        return [literal(xp, np.zeros((0, len(shape))), "int")]
    table = np.array([[np.asarray(v, dtype=object).reshape(())[()] for v in row] for row in rows], dtype=object)
    return [_array(xp, table if xp.symbolic else table.astype(np.int64))]


aten("aten.nonzero.default", _nonzero)


def _mask_counts(xp, mask, shape):
    """(flags, before): the mask broadcast to ``shape`` and flattened, and for each position how many
    set positions come before it in row-major order (exact in Z3: a sum of the flags)."""
    flags = np.reshape(np.broadcast_to(to_kind(xp, mask, "bool"), shape), -1)
    ones = np.reshape(to_kind(xp, flags, "int"), -1)
    return flags, (_array(xp, np.cumsum(ones) - ones) if np.size(ones) else ones)


def _masked_scatter(xp, args, attrs, ctx):
    """``x.masked_scatter(mask, source)``: the j-th set position of the mask (row-major) takes the
    j-th element of the flattened source, the others keep x; positions past the source's end take
    an unknown value (torch raises there)."""
    x, mask, source = args
    shape = np.shape(x)
    flags, before = _mask_counts(xp, mask, shape)
    table = np.reshape(np.asarray(to_kind(xp, source, kind_of(xp, x)), dtype=object if xp.symbolic else None), (-1,))
    if not xp.symbolic and int(np.sum(flags)) > table.size:
        raise TorchRaises(f"masked_scatter: the mask sets {int(np.sum(flags))} positions, the source has {table.size}")
    if not table.size:
        return [x]
    picked = xp.take_rows(table, np.minimum(before, table.size - 1) if not xp.symbolic else before)
    return [_array(xp, np.reshape(xp.where(flags, picked, np.reshape(x, -1)), shape))]


def _masked_scatter_backward(xp, args, attrs, ctx):
    """The source's gradient of ``masked_scatter``: element j is the incoming gradient at the j-th set
    position of the mask, zeros past the number set, in the source's shape (``sizes``)."""
    grad, mask = args[:2]
    sizes = [int(n) for n in attrs["sizes"]]
    flags, before = _mask_counts(xp, mask, np.shape(grad))
    values = np.reshape(grad, -1)
    zero = literal(xp, np.zeros(np.size(values)), kind_of(xp, grad))
    out = []
    for j in range(int(np.prod(sizes))):
        hit = xp.logical("and", flags, xp.compare("eq", before, literal(xp, np.full(np.size(values), j), "int")))
        out.append(np.asarray(call("sum", xp, [xp.where(hit, values, zero)], dim=[0])).reshape(())[()])
    return [_array(xp, np.reshape(np.array(out, dtype=object if xp.symbolic else None), sizes))]


aten("aten.masked_scatter.default", _masked_scatter)
aten("aten.masked_scatter_backward.default", _masked_scatter_backward)


def _scatter_add(xp, args, attrs, ctx):
    """out[..., index[..., k, ...], ...] += src[..., k, ...] along ``dim`` (gather's backward)."""
    x, index, src = args
    dim = norm_dim(int(attrs["dim"]), np.ndim(x))
    out = _array(xp, np.moveaxis(x, dim, -1))
    picks, values = np.moveaxis(index, dim, -1), np.moveaxis(src, dim, -1)
    size = out.shape[-1]
    zero = literal(xp, np.zeros(size), kind_of(xp, out))  # added writes as a flat sum (_rows_written)
    for position in np.ndindex(*np.shape(picks)):
        row = position[:-1]
        hits = xp.compare("eq", literal(xp, np.arange(size), "int"),
                          np.full(size, picks[position], dtype=object if xp.symbolic else None))
        out[row] = _array(xp, out[row] + xp.where(hits, np.full(size, values[position], dtype=object
                                                                 if xp.symbolic else None), zero))
    return [_array(xp, np.moveaxis(out, -1, dim))]


aten("aten.scatter_add.default", _scatter_add)


def _scatter(xp, args, attrs, ctx):
    """out[..., index[..., k, ...], ...] = src[..., k, ...] (or ``value``) along ``dim``; a later
    position wins when an index repeats, as torch's CPU kernel writes them in order."""
    if attrs.get("reduce") is not None:
        raise AtenUnsupported(f"scatter with reduce={attrs['reduce']!r}")
    x, index = args[0], args[1]
    dim = norm_dim(int(attrs["dim"]), np.ndim(x))
    out = _array(xp, np.moveaxis(x, dim, -1))
    picks = np.moveaxis(index, dim, -1)
    values = np.moveaxis(args[2], dim, -1) if len(args) > 2 else None
    size = out.shape[-1]
    for position in np.ndindex(*np.shape(picks)):
        row = position[:-1]
        hits = xp.compare("eq", literal(xp, np.arange(size), "int"),
                          np.full(size, picks[position], dtype=object if xp.symbolic else None))
        new = values[position] if values is not None else scalar_term(xp, attrs["value"])
        out[row] = _array(xp, xp.where(hits, np.full(size, new, dtype=object if xp.symbolic else None), out[row]))
    return [to_kind(xp, _array(xp, np.moveaxis(out, -1, dim)), kind_of(xp, x))]


aten("aten.scatter.src", _scatter)
aten("aten.scatter.value", _scatter)
