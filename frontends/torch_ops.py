"""torch operations -> IR ops, shared by every style.

Each entry names the torch spellings it recognises (``torch.softmax``, ``F.softmax``,
``x.softmax``) and the IR it emits.  Arguments the IR cannot express (an attention mask, a
non-default ``ignore_index``) are reported as unsupported rather than dropped.
"""
from __future__ import annotations

from typing import Any

import sympy as sp

from .sizes import to_sym
from .library import CONSTANTS, Call, function, method
from .ops import FLOATS
from .values import (MISSING, DType, MaxResult, NoOpContext, Tensor, UnsupportedError, WorldPieces)

# --- dtypes ----------------------------------------------------------------------------------

_DTYPES = {"float32": "f32", "float": "f32", "float16": "f16", "half": "f16", "bfloat16": "bf16", "float64": "f64",
           "double": "f64", "int64": "i64", "long": "i64", "int32": "i32", "int": "i32", "bool": "bool",
           "int8": "i32", "int16": "i32", "uint8": "i32"}
for _name, _ir in _DTYPES.items():
    CONSTANTS[f"torch.{_name}"] = DType(_ir)


def dtype_of(value: Any, cx: Call) -> str | None:
    if value is None or value is MISSING:
        return None
    if isinstance(value, DType):
        return value.name
    if isinstance(value, str):
        return None  # a device string
    raise UnsupportedError(cx.line, "dtype", f"{value!r} is not a dtype")


# --- helpers ---------------------------------------------------------------------------------

def _tensor(cx: Call, value: Any, what: str) -> Tensor:
    if not isinstance(value, Tensor):
        raise UnsupportedError(cx.line, what, f"expected a tensor, got {type(value).__name__}")
    return value


def _sizes(cx: Call, args: tuple) -> tuple:
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        args = tuple(args[0])
    out = []
    for a in args:
        if isinstance(a, Tensor):
            raise UnsupportedError(cx.line, "size", "a size given by a tensor")
        out.append(to_sym(a))
    return tuple(out)


def _dim_arg(dim: Any, default: Any = MISSING) -> Any:
    return default if dim is MISSING else dim


# --- tensor attributes, indexing, operators --------------------------------------------------

def tensor_attribute(cx: Call, t: Tensor, name: str) -> Any:
    from .values import BoundMethod
    it = cx.it
    if name == "shape":
        return logical_shape(it, t)
    if name == "T":
        return it.transpose(t, 0, 1, cx.line) if t.ndim == 2 else it.permute(t, list(reversed(range(t.ndim))),
                                                                              cx.line)
    if name == "mT":
        return it.transpose(t, -2, -1, cx.line)
    if name == "dtype":
        return DType(t.dtype)
    if name == "ndim":
        return sp.Integer(t.ndim)
    if name in ("device", "is_cuda", "requires_grad", "layout"):
        return False if name != "device" else "device"
    if name == "data":
        return t
    if name == "grad":
        raise UnsupportedError(cx.line, ".grad", "gradients are not modelled in the forward translation")
    return BoundMethod(t, name)


def tensor_binary(cx: Call, operator: str, left: Any, right: Any) -> Tensor:
    it = cx.it
    if operator == "MatrixMultiply":
        return it.matmul(_tensor(cx, left, "@"), _tensor(cx, right, "@"), cx.line)
    kinds = {"Add": "add", "Subtract": "sub", "Multiply": "mul", "Divide": "div", "Power": "pow",
             "FloorDivide": "floordiv", "Modulo": "mod"}
    if operator in kinds:
        if operator == "Power" and isinstance(right, Tensor):
            raise UnsupportedError(cx.line, "**", "a tensor exponent is not modelled")
        return it.binary(kinds[operator], left, right, cx.line)
    if operator in ("BitAnd", "BitOr"):
        a, b = _tensor(cx, left, "&"), _tensor(cx, right, "|")
        if a.dtype != "bool" or b.dtype != "bool":
            raise UnsupportedError(cx.line, "& / |", "bitwise ops on non-bool tensors are not modelled")
        return it.binary("logical_and" if operator == "BitAnd" else "logical_or", a, b, cx.line)
    raise UnsupportedError(cx.line, operator, "tensor operator not modelled")


def _rank_block(it, start, stop, size) -> tuple[str, ...] | None:
    """``start:stop`` is this rank's 1/world block of a dim of ``size``: the mesh dims, or None."""
    if not (it.dims.depends_on_rank(start) or it.dims.depends_on_rank(stop)):
        return None
    length = sp.cancel(stop - start)
    if it.dims.depends_on_rank(length):
        return None
    dims = tuple(name for name in it.dims.mesh.names if it.dims.rank[name] in to_sym(start).free_symbols)
    if not dims:
        return None
    rank = it.dims.global_rank(dims)
    if sp.cancel(start - rank * length) != 0:
        return None
    world = it.dims.world(dims)
    if sp.cancel(length * world - size) != 0:
        try:
            it.dims.unify(length * world, size, "rank block")
        except Exception:  # noqa: BLE001 - not a block of the whole dim
            return None
    return dims


def tensor_getitem(cx: Call, t: Tensor, index: list) -> Tensor:
    it = cx.it
    if any(isinstance(i, Tensor) for i in index):
        raise UnsupportedError(cx.line, "tensor indexing", "indexing with a tensor (gather / boolean mask) is not "
                                                           "modelled")
    consumed = sum(1 for i in index if i is not None and i is not Ellipsis)
    if consumed > t.ndim:
        raise UnsupportedError(cx.line, "indexing", f"too many indices for a {t.ndim}-d tensor")
    expanded: list = []
    for i in index:
        if i is Ellipsis:
            expanded.extend([slice(None)] * (t.ndim - consumed))
        else:
            expanded.append(i)
    while sum(1 for i in expanded if i is not None) < t.ndim:
        expanded.append(slice(None))
    out = t
    dim = 0
    final_shape: list = []
    needs_reshape = False
    for item in expanded:
        if item is None:
            final_shape.append(sp.Integer(1))
            needs_reshape = True
            continue
        if isinstance(item, slice):
            if item.step not in (None, 1) and not (isinstance(item.step, sp.Basic) and item.step == 1):
                raise UnsupportedError(cx.line, "slice", "strided slices are not modelled")
            start, stop = item.start, item.stop
            size = out.shape[dim]
            if start is None and stop is None:
                final_shape.append(out.shape[dim])
                dim += 1
                continue
            block = _rank_block(it, to_sym(start if start is not None else 0),
                                to_sym(stop if stop is not None else size), size)
            if block is not None:
                out = it.local_chunk(out, dim, block, cx.line)
            else:
                out = it.slice(out, dim, start, stop, cx.line)
            final_shape.append(out.shape[dim])
            dim += 1
            continue
        value = to_sym(item)
        if it.dims.depends_on_rank(value):
            dims = _rank_block(it, value, value + 1, out.shape[dim])
            if dims is None:
                raise UnsupportedError(cx.line, "indexing", "an index that depends on the rank, other than this "
                                                            "rank's own block, is not modelled")
            out = it.local_chunk(out, dim, dims, cx.line)
        else:
            out = it.slice(out, dim, value, value + 1 if value != -1 else None, cx.line)
        needs_reshape = True
        dim += 1
    if needs_reshape:
        out = it.reshape(out, final_shape, cx.line, "indexing")
    return out


def tensor_setitem(cx: Call, t: Tensor, index: list, value: Any) -> None:
    it = cx.it
    masks = [i for i in index if isinstance(i, Tensor)]
    rest = [i for i in index if not isinstance(i, Tensor)]
    if len(masks) == 1 and index[0] is masks[0] and masks[0].dtype == "bool" and all(
            i is Ellipsis or (isinstance(i, slice) and i == slice(None)) for i in rest):
        mask = masks[0]
        if mask.ndim < t.ndim:
            mask = it.reshape(mask, list(mask.shape) + [1] * (t.ndim - mask.ndim), cx.line, "mask")
        new = it.masked_fill(t, mask, value, cx.line)
        it.mutate(t, new, cx.line, "an indexed assignment")
        return
    raise UnsupportedError(cx.line, "indexed assignment", "writing into part of a tensor is not modelled (only "
                                                          "x[bool_mask] = value)")


# --- creation --------------------------------------------------------------------------------

def buffer(cx: Call, shape: tuple, dtype: str, fill: str | None, origin: str) -> Tensor:
    """``torch.empty`` (nothing until written) or ``torch.zeros/ones`` (an op on first read)."""
    it = cx.it
    t = Tensor(None, tuple(shape), dtype, origin=origin)
    if fill is not None:
        line = cx.line

        def make() -> None:
            attr = [it.attr_dim(s, line, f"torch.{fill}") for s in t.shape]
            made = it.op(fill, [], {"shape": attr, "dtype": dtype}, t.shape, dtype, line)
            t.name = made.name

        t.lazy = make
    return t


@function("torch.empty", "torch.zeros", "torch.ones")
def _create(cx: Call, *size, dtype=None, device=None, requires_grad=False, pin_memory=False, layout=None,
            out=None):
    name = cx.name.split(".")[-1]
    fill = None if name == "empty" else name
    return buffer(cx, _sizes(cx, size), dtype_of(dtype, cx) or "f32", fill, f"torch.{name}")


@function("torch.empty_like", "torch.zeros_like", "torch.ones_like")
def _create_like(cx: Call, other, dtype=None, device=None, requires_grad=False, memory_format=None):
    name = cx.name.split(".")[-1]
    kind = name.replace("_like", "")
    other = _tensor(cx, other, name)
    return buffer(cx, other.shape, dtype_of(dtype, cx) or other.dtype, None if kind == "empty" else kind,
                  f"torch.{name}")


@method("new_empty", "new_zeros", "new_ones")
def _new_buffer(cx: Call, t: Tensor, *size, dtype=None, device=None, requires_grad=False):
    kind = cx.name.replace("new_", "")
    return buffer(cx, _sizes(cx, size), dtype_of(dtype, cx) or t.dtype, None if kind == "empty" else kind,
                  f".new_{kind}")


@function("torch.full")
def _full(cx: Call, size, fill_value, dtype=None, device=None, requires_grad=False):
    zeros = buffer(cx, _sizes(cx, (size,)), dtype_of(dtype, cx) or ("f32" if isinstance(fill_value, float) else
                                                                    "i64"), "zeros", "torch.full")
    return cx.it.binary("add", zeros, fill_value, cx.line)


@function("torch.tensor", "torch.as_tensor", "torch.scalar_tensor")
def _tensor_literal(cx: Call, data, dtype=None, device=None, requires_grad=False):
    if isinstance(data, (list, tuple)):
        raise UnsupportedError(cx.line, "torch.tensor", "tensors built from Python lists are not modelled")
    return cx.it.const_tensor(data, cx.line, dtype_of(dtype, cx))


RANDOM = "random values inside the program are not modelled (put them in example_inputs())"


@function("torch.randn", "torch.rand")
def _random(cx: Call, *size, dtype=None, device=None, generator=None, requires_grad=False, layout=None):
    """Only its shape is usable (``nn.Parameter(torch.randn(...))``: parameters are inputs)."""
    t = Tensor(None, _sizes(cx, size), dtype_of(dtype, cx) or "f32", origin=cx.name)
    t.stale = RANDOM
    return t


@function("torch.randn_like", "torch.rand_like")
def _random_like(cx: Call, other, dtype=None, device=None, requires_grad=False, memory_format=None):
    other = _tensor(cx, other, cx.name)
    t = Tensor(None, other.shape, dtype_of(dtype, cx) or other.dtype, origin=cx.name)
    t.stale = RANDOM
    return t


@function("torch.randint", "torch.randperm")
def _random_ints(cx: Call, *args, **kwargs):
    raise UnsupportedError(cx.line, cx.name, RANDOM)


@function("torch.arange")
def _arange(cx: Call, *args, **kwargs):
    raise UnsupportedError(cx.line, "torch.arange", "index tensors are not modelled")


# --- element-wise ----------------------------------------------------------------------------

def _unary_handler(kind: str):
    def handler(cx: Call, x, *, out=None, inplace=False):
        if out is not None:
            raise UnsupportedError(cx.line, kind, "out= is not modelled")
        return cx.it.unary(kind, _tensor(cx, x, kind), cx.line)
    return handler


for _kind, _names in {
    "exp": ("torch.exp", "F.exp"), "log": ("torch.log",), "tanh": ("torch.tanh", "F.tanh"),
    "sigmoid": ("torch.sigmoid", "F.sigmoid"), "sqrt": ("torch.sqrt",), "rsqrt": ("torch.rsqrt",),
    "abs": ("torch.abs",), "neg": ("torch.neg", "torch.negative"), "relu": ("torch.relu", "F.relu"),
    "silu": ("F.silu",),
}.items():
    function(*_names)(_unary_handler(_kind))
    method(_kind)(_unary_handler(_kind))
method("negative")(_unary_handler("neg"))


@function("F.gelu")
@method("gelu")
def _gelu(cx: Call, x, approximate="none"):
    kinds = {"none": "gelu", "tanh": "gelu_tanh"}
    if approximate not in kinds:
        raise UnsupportedError(cx.line, f"gelu(approximate={approximate!r})", "expected 'none' or 'tanh'")
    return cx.it.unary(kinds[approximate], _tensor(cx, x, "gelu"), cx.line)


@function("torch.square")
@method("square")
def _square(cx: Call, x):
    return cx.it.binary("mul", x, x, cx.line)


def _binary_handler(kind: str):
    def handler(cx: Call, a, b, *, alpha=1, out=None, rounding_mode=None):
        if alpha != 1 or out is not None or rounding_mode is not None:
            raise UnsupportedError(cx.line, kind, "alpha=/out=/rounding_mode= are not modelled")
        return cx.it.binary(kind, a, b, cx.line)
    return handler


for _kind, _names in {"add": ("torch.add",), "sub": ("torch.sub", "torch.subtract"),
                      "mul": ("torch.mul", "torch.multiply"), "div": ("torch.div", "torch.divide", "torch.true_divide"),
                      "lt": ("torch.lt", "torch.less"), "le": ("torch.le",), "gt": ("torch.gt", "torch.greater"),
                      "ge": ("torch.ge",), "eq": ("torch.eq",), "ne": ("torch.ne",),
                      "floordiv": ("torch.floor_divide",), "mod": ("torch.remainder",)}.items():
    function(*_names)(_binary_handler(_kind))
    method(_kind)(_binary_handler(_kind))
method("multiply")(_binary_handler("mul"))
method("subtract")(_binary_handler("sub"))
method("divide")(_binary_handler("div"))
method("floor_divide")(_binary_handler("floordiv"))
method("remainder")(_binary_handler("mod"))


@function("torch.pow")
@method("pow")
def _pow(cx: Call, x, exponent):
    if isinstance(exponent, Tensor):
        raise UnsupportedError(cx.line, "pow", "a tensor exponent is not modelled")
    return cx.it.binary("pow", _tensor(cx, x, "pow"), exponent, cx.line)


def _inplace_handler(kind: str):
    def handler(cx: Call, t, other=None, *, alpha=1):
        if alpha != 1:
            raise UnsupportedError(cx.line, f"{kind}_", "alpha= is not modelled")
        new = cx.it.binary(kind, t, other, cx.line)
        return cx.it.mutate(t, new, cx.line, f".{kind}_()")
    return handler


for _kind in ("add", "sub", "mul", "div"):
    method(f"{_kind}_")(_inplace_handler(_kind))


@method("zero_")
def _zero_(cx: Call, t):
    new = cx.it.binary("mul", t, 0, cx.line)
    return cx.it.mutate(t, new, cx.line, ".zero_()")


@method("copy_")
def _copy_(cx: Call, t, src, non_blocking=False):
    src = _tensor(cx, src, "copy_")
    new = cx.it.op("identity", [src], {}, src.shape, t.dtype, cx.line) if src.dtype == t.dtype else \
        cx.it.cast(src, t.dtype, cx.line)
    cx.it.unify(cx.it.numel(src.shape), cx.it.numel(t.shape), "copy_", cx.line)
    return cx.it.mutate(t, new, cx.line, ".copy_()")


@function("torch.logical_and")
@method("logical_and")
def _logical_and(cx: Call, a, b):
    return cx.it.binary("logical_and", a, b, cx.line)


@function("torch.logical_or")
@method("logical_or")
def _logical_or(cx: Call, a, b):
    return cx.it.binary("logical_or", a, b, cx.line)


@function("torch.logical_not")
@method("logical_not")
def _logical_not(cx: Call, a):
    return cx.it.unary("logical_not", _tensor(cx, a, "logical_not"), cx.line)


@function("torch.where")
def _where(cx: Call, condition, input=MISSING, other=MISSING):
    if input is MISSING:
        raise UnsupportedError(cx.line, "torch.where(cond)", "index results are not modelled")
    return cx.it.where(_tensor(cx, condition, "where"), input, other, cx.line)


@method("where")
def _where_method(cx: Call, t, condition, other):
    return cx.it.where(_tensor(cx, condition, "where"), t, other, cx.line)


@function("torch.masked_fill")
@method("masked_fill")
def _masked_fill(cx: Call, t, mask, value):
    return cx.it.masked_fill(_tensor(cx, t, "masked_fill"), _tensor(cx, mask, "masked_fill"), value, cx.line)


@method("masked_fill_")
def _masked_fill_(cx: Call, t, mask, value):
    new = cx.it.masked_fill(t, _tensor(cx, mask, "masked_fill_"), value, cx.line)
    return cx.it.mutate(t, new, cx.line, ".masked_fill_()")


def _clamp(cx: Call, x, min=None, max=None):
    it = cx.it
    x = _tensor(cx, x, "clamp")
    out = x
    if min is not None:
        out = it.where(it.binary("lt", out, min, cx.line), min if isinstance(min, Tensor) else
                       it.const_tensor(min, cx.line, x.dtype), out, cx.line)
    if max is not None:
        out = it.where(it.binary("gt", out, max, cx.line), max if isinstance(max, Tensor) else
                       it.const_tensor(max, cx.line, x.dtype), out, cx.line)
    return out


function("torch.clamp", "torch.clip")(_clamp)
method("clamp", "clip")(_clamp)


@method("clamp_")
def _clamp_(cx: Call, t, min=None, max=None):
    return cx.it.mutate(t, _clamp(cx, t, min, max), cx.line, ".clamp_()")


@function("torch.maximum", "torch.minimum")
@method("maximum", "minimum")
def _max_min(cx: Call, a, b):
    name = cx.name.split(".")[-1]
    it = cx.it
    keep_a = it.binary("ge" if name == "maximum" else "le", a, b, cx.line)
    return it.where(keep_a, a, b, cx.line)


# --- casts and identities --------------------------------------------------------------------

def _cast_method(dtype: str):
    def handler(cx: Call, t, memory_format=None):
        return cx.it.cast(t, dtype, cx.line)
    return handler


for _name, _dtype in {"float": "f32", "half": "f16", "bfloat16": "bf16", "double": "f64", "long": "i64",
                      "int": "i32", "bool": "bool"}.items():
    method(_name)(_cast_method(_dtype))


@method("to")
def _to(cx: Call, t, *args, dtype=None, device=None, non_blocking=False, copy=False, memory_format=None):
    target = dtype_of(dtype, cx)
    for a in args:
        if isinstance(a, DType):
            target = a.name
        elif isinstance(a, Tensor):
            target = a.dtype
    return t if target is None else cx.it.cast(t, target, cx.line)


@method("type_as")
def _type_as(cx: Call, t, other):
    return cx.it.cast(t, _tensor(cx, other, "type_as").dtype, cx.line)


@method("clone")
def _clone(cx: Call, t, memory_format=None):
    return cx.it.op("identity", [t], {}, t.shape, t.dtype, cx.line, dt=t.dt, dt_mesh=t.dt_mesh)


@function("torch.clone")
def _clone_function(cx: Call, t, memory_format=None):
    return _clone(cx, t)


@method("contiguous", "detach", "cpu", "cuda", "requires_grad_", "detach_")
def _same(cx: Call, t, *args, **kwargs):
    # torch returns the same storage: no new value, and in-place updates stay visible to aliases
    return t


@function("F.dropout", "torch.dropout")
def _dropout(cx: Call, x, p=0.5, training=True, inplace=False):
    if p and training:
        cx.it.note(f"line {cx.line}: dropout is read as the identity (evaluation mode)")
    return x


@function("torch.no_grad", "torch.inference_mode", "torch.enable_grad", "torch.autograd.set_grad_enabled")
def _no_grad(cx: Call, *args, **kwargs):
    return NoOpContext("no_grad")


@function("torch.manual_seed", "torch.cuda.synchronize", "torch.cuda.manual_seed", "torch.set_default_dtype",
          "torch.cuda.set_device")
def _ignored(cx: Call, *args, **kwargs):
    return None


# --- linear algebra --------------------------------------------------------------------------

@function("torch.matmul", "torch.mm", "torch.bmm")
@method("matmul", "mm", "bmm")
def _matmul(cx: Call, a, b):
    return cx.it.matmul(_tensor(cx, a, "matmul"), _tensor(cx, b, "matmul"), cx.line)


@function("F.linear")
def _linear(cx: Call, input, weight, bias=None):
    return cx.it.linear(_tensor(cx, input, "linear"), _tensor(cx, weight, "linear"), bias, cx.line)


@function("torch.einsum")
def _einsum(cx: Call, equation, *operands):
    raise UnsupportedError(cx.line, "torch.einsum", "einsum is not modelled (write it with matmul/transpose)")


# --- shapes ----------------------------------------------------------------------------------

@method("view", "reshape")
def _view(cx: Call, t, *shape):
    if len(shape) == 1 and isinstance(shape[0], DType):
        raise UnsupportedError(cx.line, ".view(dtype)", "reinterpreting bits is not modelled")
    return cx.it.reshape(t, _sizes(cx, shape), cx.line, "view")


@function("torch.reshape")
def _reshape(cx: Call, t, shape):
    return cx.it.reshape(t, _sizes(cx, (shape,)), cx.line, "reshape")


@method("view_as", "reshape_as")
def _view_as(cx: Call, t, other):
    return cx.it.reshape(t, _tensor(cx, other, "view_as").shape, cx.line, "view_as")


@function("torch.flatten")
@method("flatten")
def _flatten(cx: Call, t, start_dim=0, end_dim=-1):
    it = cx.it
    t = _tensor(cx, t, "flatten")
    if t.ndim == 0:
        return it.reshape(t, [1], cx.line, "flatten")
    a, b = it.norm_dim(start_dim, t.ndim, cx.line), it.norm_dim(end_dim, t.ndim, cx.line)
    shape = list(t.shape[:a]) + [it.numel(t.shape[a:b + 1])] + list(t.shape[b + 1:])
    return it.reshape(t, shape, cx.line, "flatten")


@method("unflatten")
def _unflatten(cx: Call, t, dim, sizes):
    it = cx.it
    d = it.norm_dim(dim, t.ndim, cx.line)
    return it.reshape(t, list(t.shape[:d]) + list(_sizes(cx, (sizes,))) + list(t.shape[d + 1:]), cx.line,
                      "unflatten")


@function("torch.unsqueeze")
@method("unsqueeze")
def _unsqueeze(cx: Call, t, dim):
    it = cx.it
    t = _tensor(cx, t, "unsqueeze")
    d = it.norm_dim(dim, t.ndim + 1, cx.line)
    shape = list(t.shape)
    shape.insert(d, sp.Integer(1))
    return it.reshape(t, shape, cx.line, "unsqueeze")


@function("torch.squeeze")
@method("squeeze")
def _squeeze(cx: Call, t, dim=None):
    it = cx.it
    t = _tensor(cx, t, "squeeze")
    if dim is None:
        shape = [s for s in t.shape if not (s.is_number and s == 1)]
    else:
        d = it.norm_dim(dim, t.ndim, cx.line)
        shape = [s for i, s in enumerate(t.shape) if i != d or not (s.is_number and s == 1)]
    return t if len(shape) == t.ndim else it.reshape(t, shape, cx.line, "squeeze")


@function("torch.transpose", "torch.swapaxes")
@method("transpose", "swapaxes")
def _transpose(cx: Call, t, dim0, dim1):
    return cx.it.transpose(_tensor(cx, t, "transpose"), dim0, dim1, cx.line)


@method("t")
def _t(cx: Call, t):
    return cx.it.transpose(t, 0, 1, cx.line) if t.ndim == 2 else t


@function("torch.permute")
@method("permute")
def _permute(cx: Call, t, *dims):
    if len(dims) == 1 and isinstance(dims[0], (list, tuple)):
        dims = tuple(dims[0])
    return cx.it.permute(_tensor(cx, t, "permute"), dims, cx.line)


@method("expand", "repeat", "expand_as", "repeat_interleave")
def _expand(cx: Call, t, *args, **kwargs):
    raise UnsupportedError(cx.line, f".{cx.name}()", "broadcast copies are not modelled")


def logical_shape(it, t: Tensor) -> tuple:
    """What ``t.shape`` says in the program: the local shape, or a DTensor's global shape."""
    if t.dt is None:
        return tuple(t.shape)
    from verifier.placements import Shard
    shape = list(t.shape)
    for mesh_dim, placement in zip(t.dt_mesh.dims, t.dt):
        if isinstance(placement, Shard):
            shape[placement.dim] = sp.expand(shape[placement.dim] * it.dims.size[mesh_dim])
    return tuple(shape)


@method("size")
def _size(cx: Call, t, dim=None):
    shape = logical_shape(cx.it, t)
    if dim is None:
        return shape
    return shape[cx.it.norm_dim(dim, t.ndim, cx.line)]


@method("dim", "ndimension")
def _ndim(cx: Call, t):
    return sp.Integer(t.ndim)


@method("numel", "nelement")
def _numel(cx: Call, t):
    return cx.it.numel(t.shape)


@method("item", "tolist")
def _item(cx: Call, t):
    raise UnsupportedError(cx.line, ".item()", "reading tensor data into Python is not modelled")


def chunk_or_pieces(cx: Call, t: Tensor, count, dim) -> Any:
    """``x.chunk(n, dim)``: n pieces, or with n == world the ranks' pieces."""
    it = cx.it
    d = it.norm_dim(dim, t.ndim, cx.line)
    count = to_sym(count)
    if it.dims.depends_on_mesh(count):
        from .explicit import world_dims_of
        dims = world_dims_of(cx, count)
        it.divisible(t.shape[d], count, "chunk", cx.line)
        return WorldPieces(t, d, dims, cx.line)
    return it.chunk(t, it.as_int(count, cx.line, "chunk count"), d, cx.line)


@function("torch.chunk")
@method("chunk")
def _chunk(cx: Call, t, chunks, dim=0):
    return chunk_or_pieces(cx, _tensor(cx, t, "chunk"), chunks, dim)


@function("torch.split")
@method("split")
def _split(cx: Call, t, split_size_or_sections, dim=0):
    it = cx.it
    t = _tensor(cx, t, "split")
    d = it.norm_dim(dim, t.ndim, cx.line)
    sizes = split_size_or_sections
    if isinstance(sizes, (list, tuple)):
        return it.split(t, [to_sym(s) for s in sizes], d, cx.line)
    size = to_sym(sizes)
    count = sp.cancel(t.shape[d] / size)
    if it.dims.depends_on_mesh(count) or it.dims.depends_on_mesh(size):
        from .explicit import world_dims_of
        dims = world_dims_of(cx, count)
        return WorldPieces(t, d, dims, cx.line)
    n = it.as_int(count, cx.line, "split count") if count.is_number else int(it.dims.pin(count))
    return it.split(t, [size] * n, d, cx.line)


@function("torch.narrow")
@method("narrow")
def _narrow(cx: Call, t, dim, start, length):
    it = cx.it
    t = _tensor(cx, t, "narrow")
    d = it.norm_dim(dim, t.ndim, cx.line)
    start, length = to_sym(start), to_sym(length)
    block = _rank_block(it, start, start + length, t.shape[d])
    if block is not None:
        return it.local_chunk(t, d, block, cx.line)
    return it.slice(t, d, start, start + length, cx.line)


@function("torch.cat", "torch.concat", "torch.concatenate")
def _cat(cx: Call, tensors, dim=0):
    from .explicit import cat_pieces
    if not isinstance(tensors, (list, tuple)):
        return cat_pieces(cx, tensors, dim)
    return cx.it.cat([_tensor(cx, t, "torch.cat") for t in tensors], dim, cx.line)


@function("torch.stack")
def _stack(cx: Call, tensors, dim=0):
    it = cx.it
    if not isinstance(tensors, (list, tuple)):
        raise UnsupportedError(cx.line, "torch.stack", "stacking the ranks' pieces is not modelled")
    tensors = [_tensor(cx, t, "torch.stack") for t in tensors]
    d = it.norm_dim(dim, tensors[0].ndim + 1, cx.line)
    expanded = []
    for t in tensors:
        shape = list(t.shape)
        shape.insert(d, sp.Integer(1))
        expanded.append(it.reshape(t, shape, cx.line, "torch.stack"))
    return it.cat(expanded, d, cx.line)


# --- reductions and normalisations -----------------------------------------------------------

def _reduction_handler(kind: str):
    def handler(cx: Call, t, dim=None, keepdim=False, *, dtype=None, axis=None):
        t = _tensor(cx, t, kind)
        dim = axis if axis is not None else dim
        out = cx.it.reduction(kind, t, dim, bool(keepdim), cx.line)
        target = dtype_of(dtype, cx)
        return cx.it.cast(out, target, cx.line) if target else out
    return handler


for _kind, _names in {"sum": ("torch.sum",), "mean": ("torch.mean",), "amax": ("torch.amax",)}.items():
    function(*_names)(_reduction_handler(_kind))
    method(_kind)(_reduction_handler(_kind))


@function("torch.max")
@method("max")
def _max(cx: Call, t, dim=None, keepdim=False):
    it = cx.it
    t = _tensor(cx, t, "max")
    if isinstance(dim, Tensor):
        return _max_min_pair(cx, t, dim)
    if dim is None:
        return it.reduction("amax", t, None, False, cx.line)
    return MaxResult(it.reduction("amax", t, dim, bool(keepdim), cx.line), cx.line)


def _max_min_pair(cx: Call, a: Tensor, b: Tensor) -> Tensor:
    it = cx.it
    return it.where(it.binary("ge", a, b, cx.line), a, b, cx.line)


@function("torch.min", "torch.amin", "torch.var", "torch.std", "torch.prod", "torch.cumsum", "torch.argmax",
          "torch.topk", "torch.sort", "torch.norm", "torch.logsumexp")
@method("min", "amin", "var", "std", "prod", "cumsum", "argmax", "topk", "sort", "norm", "logsumexp")
def _unmodelled_reduction(cx: Call, *args, **kwargs):
    name = cx.name
    raise UnsupportedError(cx.line, name, "this reduction is not an IR op")


def _softmax_handler(kind: str):
    def handler(cx: Call, t, dim=MISSING, _stacklevel=3, dtype=None):
        t = _tensor(cx, t, kind)
        if dim is MISSING or dim is None:
            raise UnsupportedError(cx.line, kind, "softmax without dim= is not modelled")
        target = dtype_of(dtype, cx)
        if target:
            t = cx.it.cast(t, target, cx.line)
        return cx.it.normalise(kind, t, cx.line, dim=dim)
    return handler


function("torch.softmax", "F.softmax")(_softmax_handler("softmax"))
method("softmax")(_softmax_handler("softmax"))
function("torch.log_softmax", "F.log_softmax")(_softmax_handler("log_softmax"))
method("log_softmax")(_softmax_handler("log_softmax"))


def _normalized_shape(cx: Call, t: Tensor, normalized_shape, what: str) -> None:
    shape = _sizes(cx, (normalized_shape,)) if isinstance(normalized_shape, (list, tuple)) else \
        (to_sym(normalized_shape),)
    if len(shape) != 1:
        raise UnsupportedError(cx.line, what, "normalising over more than the last dim is not modelled")
    cx.it.unify(shape[0], t.shape[-1], what, cx.line)


@function("F.layer_norm")
def _layer_norm(cx: Call, input, normalized_shape, weight=None, bias=None, eps=1e-5):
    input = _tensor(cx, input, "layer_norm")
    _normalized_shape(cx, input, normalized_shape, "layer_norm")
    affine = [weight] if weight is not None else []
    if bias is not None:
        if weight is None:
            raise UnsupportedError(cx.line, "layer_norm", "a bias without a weight is not modelled")
        affine.append(bias)
    return cx.it.normalise("layer_norm", input, cx.line, affine=affine, eps=float(eps))


@function("F.rms_norm")
def _rms_norm(cx: Call, input, normalized_shape, weight=None, eps=None):
    input = _tensor(cx, input, "rms_norm")
    _normalized_shape(cx, input, normalized_shape, "rms_norm")
    eps = 1.1920928955078125e-07 if eps is None else float(eps)
    return cx.it.normalise("rms_norm", input, cx.line, affine=[weight] if weight is not None else [], eps=eps)


# --- nn functions ----------------------------------------------------------------------------

@function("F.embedding")
def _embedding(cx: Call, input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
               sparse=False):
    it = cx.it
    ids, table = _tensor(cx, input, "embedding"), _tensor(cx, weight, "embedding")
    if max_norm is not None:
        raise UnsupportedError(cx.line, "embedding", "max_norm= is not modelled")
    if table.ndim != 2:
        raise UnsupportedError(cx.line, "embedding", "the table must be 2-d")
    it.dtensor_guard("embedding", [ids, table], cx.line)
    return it.op("embedding", [ids, table], {}, tuple(ids.shape) + (table.shape[1],), table.dtype, cx.line)


@function("F.cross_entropy")
def _cross_entropy(cx: Call, input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                   reduction="mean", label_smoothing=0.0):
    it = cx.it
    logits, labels = _tensor(cx, input, "cross_entropy"), _tensor(cx, target, "cross_entropy")
    if weight is not None or size_average is not None or reduce is not None or label_smoothing:
        raise UnsupportedError(cx.line, "cross_entropy", "weight=/label_smoothing=/legacy arguments are not modelled")
    if int(ignore_index) != -100:
        raise UnsupportedError(cx.line, "cross_entropy", "a non-default ignore_index is not modelled")
    if reduction not in ("mean", "sum", "none"):
        raise UnsupportedError(cx.line, "cross_entropy", f"reduction={reduction!r}")
    if logits.dt is not None:
        from .dtensor import loss_parallel_cross_entropy
        return loss_parallel_cross_entropy(cx, logits, labels, reduction)
    if logits.ndim != 2 or labels.ndim != 1:
        raise UnsupportedError(cx.line, "cross_entropy", "only [N, C] logits with [N] targets are modelled (the class "
                                                         "dim of higher-rank logits is dim 1 in torch)")
    it.unify(logits.shape[0], labels.shape[0], "cross_entropy", cx.line)
    shape = tuple(labels.shape) if reduction == "none" else ()
    return it.op("cross_entropy", [logits, labels], {"reduction": reduction}, shape, logits.dtype, cx.line)


@function("F.mse_loss")
def _mse_loss(cx: Call, input, target, size_average=None, reduce=None, reduction="mean"):
    it = cx.it
    diff = it.binary("sub", input, target, cx.line)
    sq = it.binary("mul", diff, diff, cx.line)
    if reduction == "none":
        return sq
    return it.reduction("mean" if reduction == "mean" else "sum", sq, None, False, cx.line)


@function("F.scaled_dot_product_attention")
def _sdpa(cx: Call, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
          enable_gqa=False):
    it = cx.it
    q, k, v = (_tensor(cx, x, "scaled_dot_product_attention") for x in (query, key, value))
    if attn_mask is not None:
        raise UnsupportedError(cx.line, "scaled_dot_product_attention", "attn_mask= is not modelled")
    if enable_gqa:
        raise UnsupportedError(cx.line, "scaled_dot_product_attention", "enable_gqa= is not modelled")
    if dropout_p:
        it.note(f"line {cx.line}: attention dropout is read as the identity")
    it.unify(q.shape[-1], k.shape[-1], "sdpa", cx.line)
    it.unify(k.shape[-2], v.shape[-2], "sdpa", cx.line)
    attrs: dict[str, Any] = {}
    if is_causal:
        attrs["causal"] = True
    if scale is not None:
        attrs["scale"] = float(it.dims.concrete(to_sym(scale))) if isinstance(scale, sp.Basic) else float(scale)
    it.dtensor_guard("sdpa", [q, k, v], cx.line)
    return it.op("sdpa", [q, k, v], attrs, tuple(q.shape[:-1]) + (v.shape[-1],), q.dtype, cx.line)


__all__ = ["tensor_attribute", "tensor_binary", "tensor_getitem", "tensor_setitem", "buffer", "dtype_of",
           "chunk_or_pieces", "FLOATS"]
