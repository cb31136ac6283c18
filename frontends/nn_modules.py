"""``torch.nn`` layers and parameters: each parameter becomes an IR input on first use.

A parameter is named by its path in the module tree (``up.weight``); its IR input has the
*global* shape.  A parameter whose size is written with the world size (``FFN // tp``, as
Megatron and hand-written tensor-parallel modules do) is the rank's block of a global
parameter: ``Shard(d)`` on that dim.  DTensor plans set placements the same way.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sympy as sp

from verifier.placements import Placement, Replicate, Shard

from .sizes import to_sym
from .library import Call, function, layer
from .torch_ops import dtype_of
from .values import ModuleObj, Tensor, UnsupportedError


@dataclass
class ParamInfo:
    owner: ModuleObj | None
    attr: str | None
    global_shape: tuple
    placements: dict[str, Placement] = field(default_factory=dict)  # mesh dim -> placement (default R)
    line: int | None = None
    dtype: str = "f32"
    integer_bounds: tuple | None = None

    def fqn(self) -> str:
        if self.owner is None or self.attr is None:
            return "param"
        prefix = self.owner.fqn if self.owner.fqn and not self.owner.fqn.startswith("#") else ""
        return f"{prefix}.{self.attr}" if prefix else self.attr


def make_param(cx: Call, local_shape: tuple, dtype: str, line: int | None) -> Tensor:
    """A parameter tensor from the shape this rank allocates (sizes may use the world size)."""
    it = cx.it
    placements: dict[str, Placement] = {}
    global_shape = []
    for d, size in enumerate(local_shape):
        size = to_sym(size)
        if it.dims.depends_on_rank(size):
            raise UnsupportedError(line, "parameter", "a parameter size that depends on the rank is not modelled")
        used = [name for name in it.dims.mesh.names if it.dims.size[name] in size.free_symbols]
        if used:
            for name in used:
                if name in placements:
                    raise UnsupportedError(line, "parameter", f"two dims of the parameter are divided by the size of "
                                                              f"mesh dim {name}")
                placements[name] = Shard(d)
            size = sp.cancel(size * it.dims.world(tuple(used)))
            if it.dims.depends_on_mesh(size):
                raise UnsupportedError(line, "parameter", f"size {it.describe(local_shape[d])} is not a 1/world "
                                                          f"block of a global size")
        global_shape.append(size)
    return param_tensor(cx, tuple(global_shape), placements, dtype, line)


def param_tensor(cx: Call, global_shape: tuple, placements: dict[str, Placement], dtype: str,
                 line: int | None) -> Tensor:
    it = cx.it
    info = ParamInfo(None, None, tuple(to_sym(s) for s in global_shape), dict(placements), line, dtype)
    t = Tensor(None, local_shape(it, info), dtype, origin="parameter")
    t.param = info

    def make() -> None:
        ordered = tuple(info.placements.get(name, Replicate()) for name in it.dims.mesh.names)
        dims = [it.attr_dim(s, info.line, "parameter") for s in info.global_shape]
        for name, placement in info.placements.items():
            if isinstance(placement, Shard):
                it.divisible(info.global_shape[placement.dim], it.dims.size[name], "parameter", info.line)
        t.name = it.builder.add_input(info.fqn(), tuple(dims), info.dtype, ordered, info.line, info.integer_bounds)
        it.param_inputs.append((t.name, t))

    t.lazy = make
    return t


def local_shape(it, info: ParamInfo) -> tuple:
    shape = list(info.global_shape)
    for name, placement in info.placements.items():
        if isinstance(placement, Shard):
            shape[placement.dim] = sp.cancel(shape[placement.dim] / it.dims.size[name])
    return tuple(shape)


def shard_param(it, t: Tensor, placements: dict[str, Placement], line: int | None) -> None:
    """Re-place a parameter that has not been read yet (a DTensor plan)."""
    if t.param is None or t.lazy is None:
        raise UnsupportedError(line, "parallelize_module", "a parameter was read before the plan was applied")
    normalized = {}
    for name, placement in placements.items():
        if isinstance(placement, Shard):
            placement = Shard(placement.dim % len(t.param.global_shape))
        normalized[name] = placement
    t.param.placements = normalized
    t.shape = local_shape(it, t.param)


def adopt_parameter(it, module: ModuleObj, name: str, value: Any) -> None:
    if isinstance(value, Tensor) and value.param is not None and value.param.owner is None:
        value.param.owner, value.param.attr = module, name


@function("nn.Parameter", "nn.parameter.Parameter", "nn.Buffer")
def parameter(cx: Call, data=None, requires_grad=True, persistent=True):
    if not isinstance(data, Tensor):
        raise UnsupportedError(cx.line, "nn.Parameter", "expects a tensor")
    if data.param is not None:
        return data
    if data.name is not None and data.lazy is None:
        raise UnsupportedError(cx.line, "nn.Parameter", "a parameter built from computed values is not modelled")
    return make_param(cx, data.shape, data.dtype, cx.line)


def register_on_module(cx: Call, module: ModuleObj, name: str, tensor: Any) -> None:
    if tensor is None:
        module.attrs[name] = None
        return
    value = parameter(cx, tensor)
    cx.it.set_attribute(module, name, value, cx.node)


# --- library layers --------------------------------------------------------------------------

def _module(cx: Call, kind: str, **options: Any) -> ModuleObj:
    return ModuleObj(kind, None, {}, fqn=f"#{kind}{id(options)}", line=cx.line, options=options)


def _attach(cx: Call, module: ModuleObj, name: str, shape: tuple, dtype: str = "f32") -> None:
    t = param_tensor(cx, shape, {}, dtype, cx.line)
    t.param.owner, t.param.attr = module, name
    module.attrs[name] = t


@function("nn.Linear")
def linear(cx: Call, in_features, out_features, bias=True, device=None, dtype=None):
    module = _module(cx, "Linear", in_features=in_features, out_features=out_features)
    _attach(cx, module, "weight", (out_features, in_features), dtype_of(dtype, cx) or "f32")
    if bias:
        _attach(cx, module, "bias", (out_features,), dtype_of(dtype, cx) or "f32")
    else:
        module.attrs["bias"] = None
    return module


def _normalized(cx: Call, normalized_shape) -> Any:
    if isinstance(normalized_shape, (list, tuple)):
        if len(normalized_shape) != 1:
            raise UnsupportedError(cx.line, "norm", "normalising over more than the last dim is not modelled")
        return normalized_shape[0]
    return normalized_shape


@function("nn.LayerNorm")
def layer_norm(cx: Call, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None, dtype=None):
    size = _normalized(cx, normalized_shape)
    module = _module(cx, "LayerNorm", eps=float(eps))
    if elementwise_affine:
        _attach(cx, module, "weight", (size,))
        if bias:
            _attach(cx, module, "bias", (size,))
        else:
            module.attrs["bias"] = None
    else:
        module.attrs["weight"] = module.attrs["bias"] = None
    return module


@function("nn.RMSNorm")
def rms_norm(cx: Call, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None):
    size = _normalized(cx, normalized_shape)
    module = _module(cx, "RMSNorm", eps=1.1920928955078125e-07 if eps is None else float(eps))
    if elementwise_affine:
        _attach(cx, module, "weight", (size,))
    else:
        module.attrs["weight"] = None
    return module


@function("nn.Embedding")
def embedding(cx: Call, num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False, _weight=None, _freeze=False, device=None, dtype=None):
    if max_norm is not None:
        raise UnsupportedError(cx.line, "nn.Embedding", "max_norm= is not modelled")
    module = _module(cx, "Embedding", num_embeddings=num_embeddings)
    _attach(cx, module, "weight", (num_embeddings, embedding_dim))
    return module


def _activation(kind: str):
    def constructor(cx: Call, *args, inplace=False, approximate="none", dim=None, p=0.5):
        if kind == "GELU" and approximate != "none":
            raise UnsupportedError(cx.line, "nn.GELU(approximate='tanh')", "the tanh approximation is not an IR op")
        if kind == "Dropout" and p:
            cx.it.note(f"line {cx.line}: dropout is read as the identity (evaluation mode)")
        if kind == "Softmax" and dim is None:
            dim = args[0] if args else None
            if dim is None:
                raise UnsupportedError(cx.line, "nn.Softmax", "softmax without dim= is not modelled")
        return _module(cx, kind, dim=dim)
    return constructor


for _kind in ("GELU", "SiLU", "ReLU", "Tanh", "Sigmoid", "Identity", "Dropout", "Softmax"):
    function(f"nn.{_kind}")(_activation(_kind))


@function("nn.ModuleList")
def module_list(cx: Call, modules=None):
    module = _module(cx, "ModuleList")
    for i, child in enumerate(modules or []):
        _add_child(cx, module, str(i), child)
    return module


@function("nn.Sequential")
def sequential(cx: Call, *modules):
    module = _module(cx, "Sequential")
    for i, child in enumerate(modules):
        _add_child(cx, module, str(i), child)
    return module


@function("nn.ModuleDict")
def module_dict(cx: Call, modules=None):
    module = _module(cx, "ModuleDict")
    for key, child in (modules or {}).items():
        _add_child(cx, module, str(key), child)
    return module


def _add_child(cx: Call, parent: ModuleObj, name: str, child: Any) -> None:
    if not isinstance(child, ModuleObj):
        raise UnsupportedError(cx.line, parent.kind, "holds something that is not a module")
    cx.it.set_attribute(parent, name, child, cx.node)


for _name in ("normal_", "zeros_", "ones_", "uniform_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_",
              "kaiming_normal_", "trunc_normal_", "constant_", "orthogonal_"):
    function(f"nn.init.{_name}")(lambda cx, *args, **kwargs: args[0] if args else None)


@layer("Linear")
def linear_forward(cx: Call, module: ModuleObj, x):
    return cx.it.linear(x, module.attrs["weight"], module.attrs.get("bias"), cx.line)


@layer("LayerNorm")
def layer_norm_forward(cx: Call, module: ModuleObj, x):
    affine = [t for t in (module.attrs.get("weight"), module.attrs.get("bias")) if t is not None]
    return cx.it.normalise("layer_norm", x, cx.line, affine=affine, eps=module.options["eps"])


@layer("RMSNorm")
def rms_norm_forward(cx: Call, module: ModuleObj, x):
    affine = [module.attrs["weight"]] if module.attrs.get("weight") is not None else []
    return cx.it.normalise("rms_norm", x, cx.line, affine=affine, eps=module.options["eps"])


@layer("Embedding")
def embedding_forward(cx: Call, module: ModuleObj, ids):
    from .library import FUNCTIONS
    return FUNCTIONS["F.embedding"](cx, ids, module.attrs["weight"])


@layer("GELU", "SiLU", "ReLU", "Tanh", "Sigmoid")
def activation_forward(cx: Call, module: ModuleObj, x):
    kind = {"GELU": "gelu", "SiLU": "silu", "ReLU": "relu", "Tanh": "tanh", "Sigmoid": "sigmoid"}[module.kind]
    return cx.it.unary(kind, x, cx.line)


@layer("Identity", "Dropout")
def identity_forward(cx: Call, module: ModuleObj, x, *args, **kwargs):
    return x


@layer("Softmax")
def softmax_forward(cx: Call, module: ModuleObj, x):
    return cx.it.normalise("softmax", x, cx.line, dim=module.options["dim"])


@layer("Sequential")
def sequential_forward(cx: Call, module: ModuleObj, x):
    for _, child in module.children():
        x = cx.it.call_module(child, [x], {}, cx.node)
    return x


def library_base_forward(cx: Call, sup: Any, args: list, kwargs: dict) -> Any:
    raise UnsupportedError(cx.line, "super().forward", "forward of a library base class is not modelled")


__all__ = ["ParamInfo", "make_param", "param_tensor", "shard_param", "adopt_parameter", "register_on_module",
           "local_shape"]
