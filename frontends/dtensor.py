"""DTensor: device meshes, placements, ``parallelize_module`` plans and DTensor methods.

A DTensor is a local tensor plus its placements (``Tensor.dt``); redistributing emits the
collective that moves between them (``S(d)->R``: all_gather, ``P->R``: all_reduce,
``P->S(d)``: reduce_scatter, ``R->S(d)``: local_chunk, ``S(a)->S(b)``: all_to_all).

Parallel styles, as ``torch.distributed.tensor.parallel`` defines them:

* ``ColwiseParallel`` on ``nn.Linear``: weight ``[out, in]`` and bias ``S(0)``; the input is
  read with ``input_layouts`` (default ``Replicate``) and redistributed to ``Replicate``; the
  output is ``Shard(-1)``, redistributed to ``output_layouts``; a local tensor is returned
  when ``use_local_output`` (default).  On ``nn.Embedding`` the table is ``S(1)``.
* ``RowwiseParallel`` on ``nn.Linear``: weight ``S(1)``, bias replicated and added after the
  reduction; input read as ``Shard(-1)``; output ``Replicate`` (all_reduce) or ``Shard(d)``
  (reduce_scatter).  On ``nn.Embedding`` the table is ``S(0)`` (a vocab-parallel lookup).
* ``SequenceParallel``: the module (a norm) runs on the sequence shard, parameters replicated.
* ``PrepareModuleInput`` / ``PrepareModuleOutput``: layouts of a module's inputs / outputs.

A local output that later code treats as the global tensor is translated as exactly what
the local code computes, so a wrong plan shows up as a verification failure.
"""
from __future__ import annotations

import fnmatch
from typing import Any

import sympy as sp

from verifier.placements import Partial, Replicate, Shard

from .library import Call, CONSTANTS, function, method, object_method
from .values import (MISSING, GroupObj, LossParallel, MeshObj, ModuleObj, StyleObj, Tensor, UnsupportedError)

STYLES = ("ColwiseParallel", "RowwiseParallel", "SequenceParallel", "PrepareModuleInput", "PrepareModuleOutput")


# --- meshes ----------------------------------------------------------------------------------

@function("dist.init_device_mesh", "dtensor.init_device_mesh")
def init_device_mesh(cx: Call, device_type, mesh_shape, *, mesh_dim_names=None):
    names = cx.it.dims.mesh.names
    shape = tuple(mesh_shape) if isinstance(mesh_shape, (list, tuple)) else (mesh_shape,)
    if mesh_dim_names is not None:
        unknown = [n for n in mesh_dim_names if n not in names]
        if unknown:
            raise UnsupportedError(cx.line, "init_device_mesh", f"mesh dim {unknown[0]!r} is not in the mesh "
                                                                f"{cx.it.dims.mesh}")
        return MeshObj(tuple(mesh_dim_names))
    if len(shape) != len(names):
        raise UnsupportedError(cx.line, "init_device_mesh", f"a {len(shape)}-d mesh does not match the mesh "
                                                            f"{cx.it.dims.mesh}")
    return MeshObj(tuple(names))


@function("dist.DeviceMesh", "dtensor.DeviceMesh")
def device_mesh(cx: Call, *args, **kwargs):
    raise UnsupportedError(cx.line, "DeviceMesh", "build the mesh with init_device_mesh(...)")


def submesh(cx: Call, mesh: MeshObj, key: Any) -> MeshObj:
    keys = tuple(key) if isinstance(key, (list, tuple)) else (key,)
    if not all(isinstance(k, str) and k in mesh.dims for k in keys):
        raise UnsupportedError(cx.line, "mesh[...]", f"unknown mesh dim {key!r} (mesh has {', '.join(mesh.dims)})")
    return MeshObj(keys)


@object_method(MeshObj, "size")
def mesh_size(cx: Call, mesh: MeshObj, mesh_dim=None):
    if mesh_dim is None:
        return cx.it.dims.world(mesh.dims)
    return cx.it.dims.size[_mesh_dim(cx, mesh, mesh_dim)]


@object_method(MeshObj, "get_local_rank")
def mesh_local_rank(cx: Call, mesh: MeshObj, mesh_dim=None):
    if mesh_dim is None:
        if len(mesh.dims) != 1:
            raise UnsupportedError(cx.line, "get_local_rank", "needs mesh_dim= on a mesh with several dims")
        return cx.it.dims.rank[mesh.dims[0]]
    return cx.it.dims.rank[_mesh_dim(cx, mesh, mesh_dim)]


@object_method(MeshObj, "get_rank")
def mesh_rank(cx: Call, mesh: MeshObj):
    return cx.it.dims.global_rank(cx.it.dims.mesh.names)


@object_method(MeshObj, "get_group")
def mesh_group(cx: Call, mesh: MeshObj, mesh_dim=None):
    if mesh_dim is None:
        if len(mesh.dims) != 1:
            raise UnsupportedError(cx.line, "get_group", "needs mesh_dim= on a mesh with several dims")
        return GroupObj(mesh.dims)
    return GroupObj((_mesh_dim(cx, mesh, mesh_dim),))


def _mesh_dim(cx: Call, mesh: MeshObj, mesh_dim: Any) -> str:
    if isinstance(mesh_dim, str):
        if mesh_dim not in mesh.dims:
            raise UnsupportedError(cx.line, "mesh", f"unknown mesh dim {mesh_dim!r}")
        return mesh_dim
    return mesh.dims[cx.it.as_int(mesh_dim, cx.line, "mesh dim")]


# --- placements ------------------------------------------------------------------------------

@function("dtensor.Shard")
def shard(cx: Call, dim):
    return Shard(cx.it.as_int(dim, cx.line, "Shard"))


@function("dtensor.Replicate")
def replicate(cx: Call):
    return Replicate()


@function("dtensor.Partial")
def partial(cx: Call, reduce_op="sum"):
    if reduce_op not in ("sum", "avg", "max", "min"):
        raise UnsupportedError(cx.line, "Partial", f"reduce_op={reduce_op!r}")
    return Partial(reduce_op)


def _placements(cx: Call, value: Any, mesh: MeshObj, what: str) -> tuple:
    items = tuple(value) if isinstance(value, (list, tuple)) else (value,)
    if len(items) != len(mesh.dims):
        raise UnsupportedError(cx.line, what, f"{len(items)} placements for a {len(mesh.dims)}-d mesh")
    for item in items:
        if not isinstance(item, (Shard, Replicate, Partial)):
            raise UnsupportedError(cx.line, what, f"{item!r} is not a placement")
    return items


def _normal(placements: tuple, ndim: int) -> tuple:
    return tuple(Shard(p.dim % ndim) if isinstance(p, Shard) else p for p in placements)


# --- DTensor values --------------------------------------------------------------------------

def as_dtensor(cx: Call, t: Tensor, placements: tuple, mesh: MeshObj) -> Tensor:
    name = cx.it.use(t, cx.line)
    out = Tensor(name, t.shape, t.dtype)
    out.dt, out.dt_mesh = _normal(placements, t.ndim), mesh
    return out


def to_local(t: Tensor) -> Tensor:
    return Tensor(t.name, t.shape, t.dtype)


def redistribute(cx: Call, t: Tensor, target: tuple, line: int | None = None) -> Tensor:
    """Emit the collectives that take DTensor ``t`` to placements ``target``."""
    it = cx.it
    line = cx.line if line is None else line
    mesh = t.dt_mesh
    target = _normal(target, t.ndim)
    current = list(t.dt)
    out = t
    for i, mesh_dim in enumerate(mesh.dims):
        src, dst = current[i], target[i]
        if src == dst:
            continue
        size = it.dims.size[mesh_dim]
        shape = list(out.shape)
        if isinstance(dst, Replicate) and isinstance(src, Shard):
            shape[src.dim] = sp.expand(shape[src.dim] * size)
            out = it.op("all_gather", [out], {"mesh_dim": mesh_dim, "dim": src.dim}, shape, out.dtype, line)
        elif isinstance(dst, Replicate) and isinstance(src, Partial):
            out = it.op("all_reduce", [out], {"mesh_dim": mesh_dim, "op": src.op}, shape, out.dtype, line)
        elif isinstance(dst, Shard) and isinstance(src, Partial):
            it.divisible(shape[dst.dim], size, "reduce_scatter", line)
            shape[dst.dim] = sp.cancel(shape[dst.dim] / size)
            out = it.op("reduce_scatter", [out], {"mesh_dim": mesh_dim, "dim": dst.dim, "op": src.op}, shape,
                        out.dtype, line)
        elif isinstance(dst, Shard) and isinstance(src, Replicate):
            out = it.local_chunk(Tensor(out.name, out.shape, out.dtype), dst.dim, (mesh_dim,), line)
        elif isinstance(dst, Shard) and isinstance(src, Shard):
            it.divisible(shape[dst.dim], size, "all_to_all", line)
            shape[dst.dim] = sp.cancel(shape[dst.dim] / size)
            shape[src.dim] = sp.expand(shape[src.dim] * size)
            out = it.op("all_to_all", [out], {"mesh_dim": mesh_dim, "split_dim": dst.dim, "concat_dim": src.dim},
                        shape, out.dtype, line)
        else:
            raise UnsupportedError(line, "redistribute", f"from {src} to {dst} is not modelled")
        current[i] = dst
        out = Tensor(out.name, out.shape, out.dtype)
    result = Tensor(out.name, out.shape, out.dtype)
    result.dt, result.dt_mesh = tuple(current), mesh
    return result


@function("dtensor.distribute_tensor")
def distribute_tensor(cx: Call, tensor, device_mesh=None, placements=None, *, src_data_rank=0):
    mesh = _mesh(cx, device_mesh)
    placements = _placements(cx, placements if placements is not None else [Replicate()] * len(mesh.dims), mesh,
                             "distribute_tensor")
    if any(isinstance(p, Partial) for p in placements):
        raise UnsupportedError(cx.line, "distribute_tensor", "to a Partial placement")
    replicated = as_dtensor(cx, _plain(cx, tensor, "distribute_tensor"), (Replicate(),) * len(mesh.dims), mesh)
    return redistribute(cx, replicated, placements)


@function("dtensor.from_local")
def from_local(cx: Call, local_tensor, device_mesh=None, placements=None, *, run_check=False, shape=None,
               stride=None):
    mesh = _mesh(cx, device_mesh)
    placements = _placements(cx, placements if placements is not None else [Replicate()] * len(mesh.dims), mesh,
                             "DTensor.from_local")
    return as_dtensor(cx, _plain(cx, local_tensor, "DTensor.from_local"), placements, mesh)


def _mesh(cx: Call, mesh: Any) -> MeshObj:
    if isinstance(mesh, MeshObj):
        return mesh
    if mesh is None:
        return MeshObj(cx.it.dims.mesh.names)
    raise UnsupportedError(cx.line, "device_mesh", f"expected a DeviceMesh, got {type(mesh).__name__}")


def _plain(cx: Call, t: Any, what: str) -> Tensor:
    if not isinstance(t, Tensor):
        raise UnsupportedError(cx.line, what, f"expected a tensor, got {type(t).__name__}")
    if t.dt is not None:
        raise UnsupportedError(cx.line, what, "expects a local tensor, got a DTensor")
    return t


def _dtensor(cx: Call, t: Any, what: str) -> Tensor:
    if not isinstance(t, Tensor) or t.dt is None:
        raise UnsupportedError(cx.line, what, "expects a DTensor (this value is a local tensor)")
    return t


@method("redistribute")
def redistribute_method(cx: Call, t, device_mesh=None, placements=None, *, async_op=False, forward_dtype=None,
                        backward_dtype=None):
    t = _dtensor(cx, t, ".redistribute()")
    if device_mesh is not None and device_mesh != t.dt_mesh:
        raise UnsupportedError(cx.line, ".redistribute()", "to another mesh")
    return redistribute(cx, t, _placements(cx, placements, t.dt_mesh, ".redistribute()"))


@method("to_local")
def to_local_method(cx: Call, t, *, grad_placements=None):
    return to_local(_dtensor(cx, t, ".to_local()"))


@method("full_tensor")
def full_tensor(cx: Call, t, *, grad_placements=None):
    t = _dtensor(cx, t, ".full_tensor()")
    return to_local(redistribute(cx, t, (Replicate(),) * len(t.dt_mesh.dims)))


# --- parallel styles -------------------------------------------------------------------------

def _style(kind: str):
    def constructor(cx: Call, **kwargs):
        allowed = {"ColwiseParallel": {"input_layouts", "output_layouts", "use_local_output"},
                   "RowwiseParallel": {"input_layouts", "output_layouts", "use_local_output"},
                   "SequenceParallel": {"sequence_dim", "use_local_output"},
                   "PrepareModuleInput": {"input_layouts", "desired_input_layouts", "input_kwarg_layouts",
                                          "desired_input_kwarg_layouts", "use_local_output"},
                   "PrepareModuleOutput": {"output_layouts", "desired_output_layouts", "use_local_output"}}[kind]
        unknown = set(kwargs) - allowed
        if unknown:
            raise UnsupportedError(cx.line, kind, f"arguments {sorted(unknown)} are not modelled")
        if kwargs.get("input_kwarg_layouts") or kwargs.get("desired_input_kwarg_layouts"):
            raise UnsupportedError(cx.line, kind, "keyword-argument layouts are not modelled")
        return StyleObj(kind, kwargs, cx.line)
    return constructor


for _kind in STYLES:
    function(f"dtensor.{_kind}")(_style(_kind))


@function("dtensor.parallelize_module")
def parallelize_module(cx: Call, module, device_mesh=None, parallelize_plan=None, *, src_data_rank=0):
    if not isinstance(module, ModuleObj):
        raise UnsupportedError(cx.line, "parallelize_module", "expects an nn.Module")
    mesh = _mesh(cx, device_mesh)
    if parallelize_plan is None:
        return module
    if isinstance(parallelize_plan, StyleObj):
        _apply(cx, module, parallelize_plan, mesh)
        return module
    if not isinstance(parallelize_plan, dict):
        raise UnsupportedError(cx.line, "parallelize_module", "the plan must be a style or a dict of styles")
    for key, style in parallelize_plan.items():
        if not isinstance(style, StyleObj):
            raise UnsupportedError(cx.line, "parallelize_module", f"plan entry {key!r} is not a parallel style")
        targets = _match(module, str(key))
        if not targets:
            raise UnsupportedError(style.line, "parallelize_module", f"plan key {key!r} matches no submodule")
        for target in targets:
            _apply(cx, target, style, mesh)
    return module


def _match(root: ModuleObj, pattern: str) -> list[ModuleObj]:
    found = []

    def walk(module: ModuleObj, path: str) -> None:
        for name, child in module.children():
            child_path = f"{path}.{name}" if path else name
            if fnmatch.fnmatchcase(child_path, pattern):
                found.append(child)
            walk(child, child_path)

    if pattern == "":
        return [root]
    walk(root, "")
    return found


def _apply(cx: Call, module: ModuleObj, style: StyleObj, mesh: MeshObj) -> None:
    from .nn_modules import shard_param
    if module.style is not None:
        raise UnsupportedError(style.line, style.kind, "a second parallel style on the same module")
    if len(mesh.dims) != 1 and style.kind in ("ColwiseParallel", "RowwiseParallel", "SequenceParallel"):
        raise UnsupportedError(style.line, style.kind, "tensor-parallel styles take a 1-d mesh (mesh['tp'])")
    module.style, module.mesh = style, mesh
    mesh_dim = mesh.dims[0]
    if style.kind == "ColwiseParallel":
        if module.kind == "Linear":
            shard_param(cx.it, module.attrs["weight"], {mesh_dim: Shard(0)}, style.line)
            if module.attrs.get("bias") is not None:
                shard_param(cx.it, module.attrs["bias"], {mesh_dim: Shard(0)}, style.line)
        elif module.kind == "Embedding":
            shard_param(cx.it, module.attrs["weight"], {mesh_dim: Shard(1)}, style.line)
        else:
            raise UnsupportedError(style.line, "ColwiseParallel", f"on {module.kind} (only nn.Linear / nn.Embedding)")
    elif style.kind == "RowwiseParallel":
        if module.kind == "Linear":
            shard_param(cx.it, module.attrs["weight"], {mesh_dim: Shard(1)}, style.line)
        elif module.kind == "Embedding":
            shard_param(cx.it, module.attrs["weight"], {mesh_dim: Shard(0)}, style.line)
        else:
            raise UnsupportedError(style.line, "RowwiseParallel", f"on {module.kind} (only nn.Linear / nn.Embedding)")


def _layout(cx: Call, value: Any, default: Any, style: StyleObj) -> tuple:
    value = default if value is None or value is MISSING else value
    items = tuple(value) if isinstance(value, (list, tuple)) else (value,)
    for item in items:
        if not isinstance(item, (Shard, Replicate, Partial)):
            raise UnsupportedError(style.line, style.kind, f"layout {item!r} is not a placement")
    return items


def _prepare(cx: Call, x: Any, layout: tuple, desired: tuple, mesh: MeshObj, what: str) -> Tensor:
    """A module input: a local tensor is read with ``layout``; then redistributed to ``desired``."""
    if not isinstance(x, Tensor):
        raise UnsupportedError(cx.line, what, f"expected a tensor input, got {type(x).__name__}")
    if x.dt is None:
        x = as_dtensor(cx, x, layout, mesh)
    if _normal(layout, x.ndim) != _normal(desired, x.ndim):
        x = redistribute(cx, x, desired)
    return x


def _finish(cx: Call, out: Tensor, layout: tuple, use_local: bool) -> Tensor:
    if out.dt != _normal(layout, out.ndim):
        out = redistribute(cx, out, layout)
    return to_local(out) if use_local else out


def call_with_style(cx: Call, module: ModuleObj, args: list, kwargs: dict) -> Any:
    it = cx.it
    style, mesh = module.style, module.mesh
    options = style.kwargs
    if style.kind in ("ColwiseParallel", "RowwiseParallel"):
        if kwargs or len(args) != 1:
            raise UnsupportedError(cx.line, style.kind, "the module must take one positional input")
        colwise = style.kind == "ColwiseParallel"
        default_in = Replicate() if colwise or module.kind == "Embedding" else Shard(-1)
        layout = _layout(cx, options.get("input_layouts"), default_in, style)
        desired = (Replicate(),) if colwise or module.kind == "Embedding" else (Shard(-1),)
        x = _prepare(cx, args[0], layout, desired, mesh, style.kind)
        if x.dt != _normal(desired, x.ndim):
            # the sharded matmul needs this layout: DTensor's dispatch redistributes on its own
            x = redistribute(cx, x, desired)
        out = (_colwise if colwise else _rowwise)(cx, module, x, mesh, options, style)
        return out
    if style.kind == "SequenceParallel":
        seq = it.as_int(options.get("sequence_dim", 1), style.line, "sequence_dim")
        x = args[0]
        if not isinstance(x, Tensor):
            raise UnsupportedError(cx.line, "SequenceParallel", "expects a tensor input")
        layout = (Shard(seq),)
        x = redistribute(cx, x, layout) if x.dt is not None and x.dt != _normal(layout, x.ndim) else (
            x if x.dt is not None else as_dtensor(cx, x, layout, mesh))
        out = it.module_forward(module, [to_local(x), *args[1:]], kwargs, cx.node)
        if not isinstance(out, Tensor):
            raise UnsupportedError(cx.line, "SequenceParallel", "the module must return one tensor")
        out = as_dtensor(cx, out, layout, mesh)
        return to_local(out) if options.get("use_local_output", False) else out
    if style.kind == "PrepareModuleInput":
        layouts = options.get("input_layouts")
        desired = options.get("desired_input_layouts")
        layouts = list(layouts) if isinstance(layouts, (list, tuple)) else [layouts]
        desired = list(desired) if isinstance(desired, (list, tuple)) else [desired]
        if len(layouts) != len(desired):
            raise UnsupportedError(style.line, "PrepareModuleInput", "input_layouts and desired_input_layouts differ "
                                                                     "in length")
        new_args = list(args)
        for i, (layout, want) in enumerate(zip(layouts, desired)):
            if layout is None:
                continue
            if i >= len(new_args):
                raise UnsupportedError(cx.line, "PrepareModuleInput", "more layouts than inputs")
            x = _prepare(cx, new_args[i], (layout,), (want,), mesh, "PrepareModuleInput")
            new_args[i] = to_local(x) if options.get("use_local_output", False) else x
        return it.module_forward(module, new_args, kwargs, cx.node)
    if style.kind == "PrepareModuleOutput":
        out = it.module_forward(module, args, kwargs, cx.node)
        layouts = options.get("output_layouts")
        desired = options.get("desired_output_layouts")
        outputs = list(out) if isinstance(out, tuple) else [out]
        layouts = list(layouts) if isinstance(layouts, (list, tuple)) else [layouts]
        desired = list(desired) if isinstance(desired, (list, tuple)) else [desired]
        results = []
        for value, layout, want in zip(outputs, layouts, desired):
            if layout is None or not isinstance(value, Tensor):
                results.append(value)
                continue
            x = value if value.dt is not None else as_dtensor(cx, value, (layout,), mesh)
            x = redistribute(cx, x, (want,)) if x.dt != _normal((want,), x.ndim) else x
            results.append(to_local(x) if options.get("use_local_output", True) else x)
        return tuple(results) if isinstance(out, tuple) else results[0]
    raise UnsupportedError(cx.line, style.kind, "parallel style not modelled")


def _colwise(cx: Call, module: ModuleObj, x: Tensor, mesh: MeshObj, options: dict, style: StyleObj) -> Tensor:
    it = cx.it
    local = to_local(x)
    if module.kind == "Linear":
        y = it.linear(local, module.attrs["weight"], module.attrs.get("bias"), cx.line)
    elif module.kind == "Embedding":
        from .library import FUNCTIONS
        y = FUNCTIONS["F.embedding"](cx, local, module.attrs["weight"])
    else:
        raise UnsupportedError(cx.line, "ColwiseParallel", f"on {module.kind}")
    out = as_dtensor(cx, y, (Shard(-1),), mesh)
    layout = _layout(cx, options.get("output_layouts"), Shard(-1), style)
    return _finish(cx, out, layout, options.get("use_local_output", True))


def _rowwise(cx: Call, module: ModuleObj, x: Tensor, mesh: MeshObj, options: dict, style: StyleObj) -> Tensor:
    it = cx.it
    local = to_local(x)
    layout = _layout(cx, options.get("output_layouts"), Replicate(), style)
    if module.kind == "Linear":
        y = it.linear(local, module.attrs["weight"], None, cx.line)
        out = _finish(cx, as_dtensor(cx, y, (Partial("sum"),), mesh), layout, False)
        bias = module.attrs.get("bias")
        if bias is not None:
            if isinstance(out.dt[0], Shard) and out.dt[0].dim == out.ndim - 1:
                raise UnsupportedError(cx.line, "RowwiseParallel", "a bias with output sharded along the features "
                                                                   "is not modelled")
            summed = it.binary("add", to_local(out), bias, cx.line)
            out = as_dtensor(cx, summed, out.dt, mesh)
    elif module.kind == "Embedding":
        weight = module.attrs["weight"]
        y = it.op("vocab_parallel_embedding", [local, weight], {"mesh_dim": mesh.dims[0]},
                  tuple(local.shape) + (weight.shape[1],), weight.dtype, cx.line)
        out = as_dtensor(cx, y, (Replicate(),), mesh)
        if out.dt != _normal(layout, out.ndim):
            out = redistribute(cx, out, layout)
    else:
        raise UnsupportedError(cx.line, "RowwiseParallel", f"on {module.kind}")
    return to_local(out) if options.get("use_local_output", True) else out


# --- loss parallel ---------------------------------------------------------------------------

@function("dtensor.loss_parallel")
def loss_parallel(cx: Call):
    return LossParallel()


def loss_parallel_cross_entropy(cx: Call, logits: Tensor, labels: Tensor, reduction: str) -> Tensor:
    it = cx.it
    if not it.loss_parallel:
        raise UnsupportedError(cx.line, "cross_entropy", "cross-entropy of a DTensor outside `with loss_parallel()` "
                                                         "is not modelled")
    mesh = logits.dt_mesh
    if len(mesh.dims) != 1 or logits.dt != (Shard(logits.ndim - 1),):
        raise UnsupportedError(cx.line, "loss_parallel", "expects logits sharded along the class (last) dim")
    if labels.dt is not None and any(not isinstance(p, Replicate) for p in labels.dt):
        raise UnsupportedError(cx.line, "loss_parallel", "expects replicated targets")
    if logits.ndim != 2 or labels.ndim != 1:
        raise UnsupportedError(cx.line, "loss_parallel", "only [N, C] logits with [N] targets are modelled")
    shape = tuple(labels.shape) if reduction == "none" else ()
    loss = it.op("vocab_parallel_cross_entropy", [to_local(logits), to_local(labels)],
                 {"mesh_dim": mesh.dims[0], "reduction": reduction}, shape, logits.dtype, cx.line)
    return as_dtensor(cx, loss, (Replicate(),), mesh)


__all__ = ["call_with_style", "submesh", "redistribute", "loss_parallel_cross_entropy", "CONSTANTS"]
