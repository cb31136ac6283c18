"""Python builtins as the interpreter sees them (``range``, ``len``, ``min``, ``isinstance``, ...)."""
from __future__ import annotations

from typing import Any

import sympy as sp

from .sizes import to_sym
from .library import Call
from .values import BufferList, HandleList, ModuleObj, QualName, Tensor, UnsupportedError, WorldPieces


def call_builtin(cx: Call, name: str, args: list, kwargs: dict) -> Any:
    it = cx.it
    from .interpreter import RangeObj, _is_number, _sym

    if name == "range":
        values = [to_sym(a) for a in args]
        start, stop, step = (sp.Integer(0), values[0], sp.Integer(1)) if len(values) == 1 else (
            values[0], values[1], values[2] if len(values) > 2 else sp.Integer(1))
        world_dims = None
        if it.dims.depends_on_mesh(stop) and start == 0 and step == 1:
            for dims in _dim_sets(it.dims.mesh.names):
                if sp.cancel(stop - it.dims.world(dims)) == 0:
                    world_dims = dims
        return RangeObj(start, stop, step, world_dims)
    if name == "len":
        (value,) = args
        if isinstance(value, (list, tuple, dict, str)):
            return sp.Integer(len(value))
        if isinstance(value, Tensor):
            return value.shape[0]
        if isinstance(value, (WorldPieces, BufferList)):
            return it.dims.world(value.dims)
        if isinstance(value, ModuleObj):
            return sp.Integer(len(value.children()))
        raise UnsupportedError(cx.line, "len", f"of {type(value).__name__}")
    if name in ("list", "tuple"):
        if not args:
            return [] if name == "list" else ()
        (value,) = args
        if isinstance(value, (WorldPieces, BufferList)):
            return value
        items = it.iterate(value, cx.node)
        return list(items) if name == "list" else tuple(items)
    if name == "int":
        (value,) = args
        if isinstance(value, float):
            return sp.Integer(int(value))
        value = to_sym(value)
        if value.is_integer:
            return value
        return sp.Integer(int(it.dims.pin(value)))
    if name == "float":
        (value,) = args
        if isinstance(value, str):
            return float(value)
        return sp.Float(value) if to_sym(value).is_number else to_sym(value) * sp.Float(1.0)
    if name in ("min", "max"):
        values = list(args[0]) if len(args) == 1 else list(args)
        if all(_is_number(v) for v in values):
            if any(it.dims.depends_on_rank(_sym(v)) for v in values):
                raise UnsupportedError(cx.line, name, "of values that depend on the rank")
            concrete = [it.dims.concrete(_sym(v)) for v in values]
            choice = concrete.index(min(concrete) if name == "min" else max(concrete))
            if any(_sym(v).free_symbols for v in values):
                for v in values:
                    it.dims.pin(_sym(v))
            return values[choice]
        raise UnsupportedError(cx.line, name, "of tensors: use torch.minimum / torch.maximum")
    if name == "sum":
        values = list(args[0])
        total: Any = args[1] if len(args) > 1 else sp.Integer(0)
        for v in values:
            total = it.binary_operator("Add", total, v, cx.node) if not (
                isinstance(total, sp.Basic) and total == 0 and isinstance(v, Tensor)) else v
        return total
    if name == "abs":
        (value,) = args
        if isinstance(value, Tensor):
            return it.unary("abs", value, cx.line)
        return sp.Abs(_sym(value))
    if name == "zip":
        return [tuple(items) for items in zip(*[it.iterate(a, cx.node) for a in args])]
    if name == "enumerate":
        start = int(args[1]) if len(args) > 1 else 0
        return [(sp.Integer(i + start), item) for i, item in enumerate(it.iterate(args[0], cx.node))]
    if name == "isinstance":
        value, kinds = args
        kinds = kinds if isinstance(kinds, (list, tuple)) else (kinds,)
        for kind in kinds:
            if isinstance(kind, QualName) and kind.name in ("torch.Tensor", "torch.nn.Parameter"):
                if isinstance(value, Tensor):
                    return True
            elif hasattr(kind, "name") and kind.name in ("int", "float"):
                if _is_number(value):
                    return True
            elif hasattr(kind, "name") and kind.name in ("list", "tuple"):
                if isinstance(value, (list, tuple)):
                    return True
            elif hasattr(kind, "name") and kind.name == "dict":
                if isinstance(value, dict):
                    return True
            else:
                raise UnsupportedError(cx.line, "isinstance", f"check against {kind!r} is not modelled")
        return False
    if name == "print":
        return None
    if name == "dict":
        out = dict(args[0]) if args else {}
        out.update(kwargs)
        return out
    if name in ("getattr", "hasattr"):
        obj, attr = args[0], args[1]
        try:
            value = it.get_attribute(obj, attr, cx.node)
        except UnsupportedError:
            if name == "hasattr":
                return False
            if len(args) > 2:
                return args[2]
            raise
        return True if name == "hasattr" else value
    if name == "setattr":
        it.set_attribute(args[0], args[1], args[2], cx.node)
        return None
    if name == "slice":
        return slice(*args)
    if name == "reversed":
        return list(reversed(it.iterate(args[0], cx.node)))
    if name == "sorted":
        return sorted(it.iterate(args[0], cx.node))
    if name == "round":
        return sp.Integer(round(float(it.dims.pin(_sym(args[0]))))) if len(args) == 1 else args[0]
    if name == "bool":
        return it.truth(args[0], cx.node)
    if name == "str":
        return str(args[0])
    if name in ("any", "all"):
        truths = [it.truth(v, cx.node) for v in it.iterate(args[0], cx.node)]
        if not all(isinstance(t, bool) for t in truths):
            raise UnsupportedError(cx.line, name, "of conditions on the rank")
        return any(truths) if name == "any" else all(truths)
    if name == "iter":
        return list(it.iterate(args[0], cx.node))
    if name == "map":
        function, *iterables = args
        return [it.call(function, list(items), {}, cx.node) for items in zip(*[it.iterate(a, cx.node)
                                                                              for a in iterables])]
    if name in ("Exception", "ValueError", "RuntimeError", "AssertionError", "NotImplementedError"):
        return None
    if name == "super":
        raise UnsupportedError(cx.line, "super", "only super() inside a method is modelled")
    if isinstance(args, HandleList):
        return args
    raise UnsupportedError(cx.line, name, "builtin not modelled")


def _dim_sets(names: tuple[str, ...]) -> list[tuple[str, ...]]:
    """Contiguous runs of mesh dims, longest first (the ranks of a process group)."""
    out = []
    for length in range(len(names), 0, -1):
        for start in range(0, len(names) - length + 1):
            out.append(tuple(names[start:start + length]))
    return out


# --- the math module -------------------------------------------------------------------------

def _register_math() -> None:
    from .library import CONSTANTS, function

    def unary(name: str, fn):
        @function(f"math.{name}")
        def handler(cx: Call, x):
            from .interpreter import _sym
            value = _sym(x)
            if cx.it.dims.depends_on_rank(value):
                raise UnsupportedError(cx.line, f"math.{name}", "of a value that depends on the rank")
            return fn(value)
        return handler

    unary("sqrt", sp.sqrt)
    unary("exp", sp.exp)
    unary("log", lambda v: sp.log(v))
    unary("log2", lambda v: sp.log(v, 2))
    unary("ceil", sp.ceiling)
    unary("floor", sp.floor)
    unary("isqrt", lambda v: sp.floor(sp.sqrt(v)))
    CONSTANTS["math.pi"] = sp.pi
    CONSTANTS["math.e"] = sp.E
    CONSTANTS["math.inf"] = float("inf")

    @function("math.prod")
    def prod(cx: Call, values, start=1):
        out = to_sym(start)
        for v in values:
            out = out * to_sym(v)
        return out


_register_math()
