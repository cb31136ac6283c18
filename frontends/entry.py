"""What to translate: the entry, its inputs, the mesh.

* Entry: ``--entry NAME``; else (as the ground-truth runner does) ``build(mesh)``, then
  ``forward(...)``, then the ``nn.Module`` class no other class uses (the one with distributed
  constructs if several), then the one function that uses distributed constructs.
* Inputs: ``example_inputs()`` returning ``torch.randn/rand/zeros/ones/empty/randint(...)`` calls
  (sizes: literals, module constants, arithmetic on them), overridden by ``--input x=8x16``.
  Integer inputs get the bounds of ``randint`` or ``[0, VOCAB)`` when the file defines ``VOCAB``.
* Mesh: ``--mesh tp=2,dp=2``; else ``init_device_mesh(...)`` / ``initialize_model_parallel(...)``
  in the file; else ``tp=2``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import libcst as cst
import libcst.matchers as m
import sympy as sp

from verifier.ir import Mesh

from .sizes import to_sym
from .library import Call
from .source import SourceFile, dotted, library_name, uses_distributed
from .values import DType, UnsupportedError, UserError

DEFAULT_MESH = Mesh((("tp", 2),))


@dataclass
class InputSpec:
    shape: tuple
    dtype: str
    bounds: tuple | None
    line: int | None


# --- mesh ------------------------------------------------------------------------------------

def parse_mesh(text: str) -> Mesh:
    dims = []
    for part in text.split(","):
        match = re.fullmatch(r"\s*([A-Za-z_][A-Za-z_0-9]*)\s*=\s*(\d+)\s*", part)
        if not match or int(match.group(2)) < 1:
            raise UserError(None, f"bad --mesh {text!r}: expected NAME=SIZE[,NAME=SIZE...], e.g. tp=2 or dp=2,tp=4")
        dims.append((match.group(1), int(match.group(2))))
    names = [name for name, _ in dims]
    if len(set(names)) != len(names):
        raise UserError(None, f"bad --mesh {text!r}: a mesh dim is named twice")
    if any(name == "world" or name.endswith("_size") for name in names):
        raise UserError(None, f"bad --mesh {text!r}: 'world' and names ending in '_size' are reserved")
    return Mesh(tuple(dims))


def infer_mesh(source: SourceFile) -> Mesh | None:
    """The mesh the file builds for itself, if it says so with literal sizes."""
    for call in m.findall(source.module, m.Call()):
        name = library_name(source, call.func)
        if name in ("dist.init_device_mesh", "dtensor.init_device_mesh"):
            sizes = _arg(call, 1, "mesh_shape")
            names = _arg(call, None, "mesh_dim_names")
            values = _ints(source, sizes)
            labels = _strings(names)
            if values is None:
                continue
            if labels is None:
                labels = ("tp",) if len(values) == 1 else ("dp", "tp") if len(values) == 2 else tuple(
                    f"d{i}" for i in range(len(values)))
            if len(labels) != len(values):
                continue
            return Mesh(tuple(zip(labels, values)))
        if name == "megatron.initialize_model_parallel":
            tp = _ints(source, _arg(call, 0, "tensor_model_parallel_size"))
            if tp:
                return Mesh((("tp", tp[0]),))
    return None


def _arg(call: cst.Call, position: int | None, keyword: str) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    positional = [a for a in call.args if a.keyword is None]
    if position is not None and position < len(positional):
        return positional[position].value
    return None


def _ints(source: SourceFile, node: cst.BaseExpression | None) -> tuple[int, ...] | None:
    if node is None:
        return None
    items = [e.value for e in node.elements] if isinstance(node, (cst.Tuple, cst.List)) else [node]
    out = []
    for item in items:
        if isinstance(item, cst.Integer):
            out.append(int(item.evaluated_value))
        elif isinstance(item, cst.Name) and item.value in source.assignments and isinstance(
                source.assignments[item.value][0], cst.Integer) and source.assignments[item.value][2] is None:
            out.append(int(source.assignments[item.value][0].evaluated_value))
        else:
            return None
    return tuple(out)


def _strings(node: cst.BaseExpression | None) -> tuple[str, ...] | None:
    if node is None:
        return None
    items = [e.value for e in node.elements] if isinstance(node, (cst.Tuple, cst.List)) else [node]
    out = []
    for item in items:
        if not isinstance(item, cst.SimpleString):
            return None
        out.append(item.evaluated_value)
    return tuple(out)


# --- entry -----------------------------------------------------------------------------------

def find_entry(source: SourceFile, entry: str | None) -> tuple[str, str]:
    """(name, kind) with kind in build | function | module."""
    if entry is not None:
        if entry in source.functions:
            return entry, "build" if entry == "build" else "function"
        if entry in source.classes:
            return entry, "module"
        raise UserError(None, f"--entry {entry}: no top-level function or class of that name "
                              f"(found: {', '.join(source.order) or 'none'})")
    if "build" in source.functions:
        return "build", "build"
    if "forward" in source.functions:
        return "forward", "function"
    classes = [name for name in source.order if name in source.classes and _is_module_class(source, name)]
    if classes:
        used = {name for name in classes for other in classes if other != name and m.findall(
            source.classes[other], m.Name(name))}
        top = [name for name in classes if name not in used] or classes
        distributed = [name for name in top if _uses_distributed_deep(source, name, set())]
        if len(distributed) == 1:
            return distributed[0], "module"
        return (distributed or top)[-1], "module"
    functions = [name for name in source.order if name in source.functions and name != "example_inputs"]
    if len(functions) == 1:
        return functions[0], "function"
    called = {name for name in functions for other in functions if other != name and m.findall(
        source.functions[other], m.Call(func=m.Name(name)))}
    candidates = [name for name in functions if name not in called and uses_distributed(source,
                                                                                         source.functions[name])]
    if len(candidates) == 1:
        return candidates[0], "function"
    raise UserError(None, "no entry found: expected build(mesh), forward(...), an nn.Module class, or one function "
                          "that uses torch.distributed; name it with --entry"
                    + (f" (candidates: {', '.join(candidates)})" if candidates else ""))


def _is_module_class(source: SourceFile, name: str) -> bool:
    node = source.classes[name]
    for base in node.bases:
        text = dotted(base.value) or ""
        if text.split(".")[-1] == "Module" or text in source.classes and _is_module_class(source, text):
            return True
    return False


def _uses_distributed_deep(source: SourceFile, name: str, seen: set[str]) -> bool:
    if name in seen:
        return False
    seen.add(name)
    node = source.classes.get(name) or source.functions.get(name)
    if node is None:
        return False
    if uses_distributed(source, node):
        return True
    for ref in m.findall(node, m.Name()):
        if ref.value in source.classes or ref.value in source.functions:
            if _uses_distributed_deep(source, ref.value, seen):
                return True
    return False


def entry_params(source: SourceFile, node: cst.FunctionDef, skip_self: bool) -> list[str]:
    params = [p.name.value for p in node.params.params]
    if skip_self and params:
        params = params[1:]
    return params


# --- example inputs --------------------------------------------------------------------------

def example_inputs(it: Any, source: SourceFile) -> list[InputSpec] | None:
    node = source.functions.get("example_inputs")
    if node is None:
        return None
    from .interpreter import FunctionObj
    it.input_mode = True
    try:
        value = it.call_function(FunctionObj(node, it.globals.root), [], {}, node)
    finally:
        it.input_mode = False
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    for item in items:
        if not isinstance(item, InputSpec):
            raise UserError(source.line(node), "example_inputs() must return torch.randn/zeros/ones/empty/randint(...) "
                                               "tensors")
    return items


def input_spec(cx: Call, name: str, args: tuple, kwargs: dict) -> InputSpec:
    """``torch.randn(...)`` & co. inside ``example_inputs()``."""
    from .torch_ops import _sizes, dtype_of
    it = cx.it
    kwargs = dict(kwargs)
    for ignored in ("device", "generator", "requires_grad", "pin_memory", "layout"):
        kwargs.pop(ignored, None)
    dtype = dtype_of(kwargs.pop("dtype", None), cx)
    bounds = None
    if name == "randint":
        args = list(args)
        if "size" in kwargs:
            args.append(kwargs.pop("size"))
        if "high" in kwargs:
            args.insert(0 if "low" not in kwargs else 1, kwargs.pop("high"))
        if "low" in kwargs:
            args.insert(0, kwargs.pop("low"))
        if len(args) == 2:
            args.insert(0, sp.Integer(0))
        if len(args) != 3:
            raise UnsupportedError(cx.line, "torch.randint", "expected randint(low, high, size)")
        low, high, size = args
        bounds = (it.attr_dim(low, cx.line, "randint") if to_sym(low) != 0 else 0,
                  it.attr_dim(high, cx.line, "randint"))
        shape = _sizes(cx, (size,))
        dtype = dtype or "i64"
    else:
        if kwargs:
            raise UnsupportedError(cx.line, f"torch.{name}", f"arguments {sorted(kwargs)} are not modelled")
        shape = _sizes(cx, tuple(args))
        dtype = dtype or "f32"
        if dtype.startswith("i"):
            try:
                vocab = it.globals.lookup("VOCAB")
            except (KeyError, UnsupportedError):
                vocab = None
            if isinstance(vocab, sp.Basic):
                bounds = (0, it.attr_dim(vocab, cx.line, "VOCAB"))
    for size in shape:
        if it.dims.depends_on_mesh(size):
            raise UserError(cx.line, "example_inputs() sizes must not depend on the world size")
    return InputSpec(shape, dtype, bounds, cx.line)


def override_shape(text: list[int]) -> tuple:
    return tuple(sp.Integer(int(d)) for d in text)


__all__ = ["InputSpec", "parse_mesh", "infer_mesh", "find_entry", "example_inputs", "input_spec", "DEFAULT_MESH",
           "entry_params", "override_shape", "DType"]
