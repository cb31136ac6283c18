"""Whole-tensor specifications: what a kernel is supposed to compute.

A spec is a few assignments over the kernel's global tensors, written like NumPy/PyTorch:
``C = A @ B``, ``B = A.sum(1)``, ``C = A + B``, ``B = softmax(A, 1)``, ``C = relu(A @ B)``.
It comes from ``--spec``, from a reference function in the kernel file (``def
ref_program(A, B): return A @ B.T``, parameters matched to the kernel's inputs in order),
or is inferred from the kernel's own tile ops (``infer.py``).

Specs are evaluated element-wise over the same backends as the kernel (floats or Z3
terms), with one registered evaluator per function.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .errors import LiftInputError

SpecFn = Callable[..., Any]
FUNCTIONS: dict[str, SpecFn] = {}
METHODS: dict[str, SpecFn] = {}


@dataclass(frozen=True)
class Spec:
    """``statements``: (target, expression) pairs in order; ``outputs`` are kernel tensors
    assigned by the spec, ``inputs`` the kernel tensors it reads."""

    text: str
    statements: tuple[tuple[str, ast.expr], ...]
    outputs: tuple[str, ...]
    inputs: tuple[str, ...]
    origin: str  # "--spec" | "ref_program (line 12)" | "inferred"


def parse_spec(text: str, buffers: list[str], file: str | None, origin: str = "--spec") -> Spec:
    try:
        tree = ast.parse(text.replace(";", "\n"))
    except SyntaxError as exc:
        raise LiftInputError(f"expected a spec like 'C = A @ B': {exc.msg}", "--spec", exc.lineno) from None
    statements: list[tuple[str, ast.expr]] = []
    defined: set[str] = set()
    for stmt in tree.body:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
            raise LiftInputError("expected spec statements of the form 'OUT = expression'", "--spec", stmt.lineno)
        _check_names(stmt.value, set(buffers) | defined, buffers, stmt.lineno)
        statements.append((stmt.targets[0].id, stmt.value))
        defined.add(stmt.targets[0].id)
    outputs = tuple(t for t, _ in statements if t in buffers)
    if not outputs:
        raise LiftInputError(f"expected the spec to assign a kernel tensor ({', '.join(buffers)})", "--spec", 1)
    reads = [n.id for _, e in statements for n in ast.walk(e) if isinstance(n, ast.Name) and n.id in buffers]
    inputs = tuple(dict.fromkeys(r for r in reads if r not in outputs))
    return Spec(text, tuple(statements), outputs, inputs, origin)


_KNOWN_NAMES = {"torch", "F", "np", "numpy", "T", "softmax", "relu", "exp", "sum", "max", "maximum", "matmul",
                "gelu", "sigmoid", "tanh", "log", "sqrt", "abs", "nn", "functional", "minimum", "float", "tril", "triu"}


def _check_names(expr: ast.expr, allowed: set[str], buffers: list[str], line: int) -> None:
    for node in ast.walk(expr):
        if isinstance(node, ast.Name) and node.id not in allowed and node.id not in _KNOWN_NAMES:
            raise LiftInputError(f"expected a kernel tensor ({', '.join(buffers)}) in the spec, got {node.id!r}",
                                 "--spec", line)


def spec_from_reference(func: ast.FunctionDef, inputs: list[str], outputs: list[str], file: str) -> Spec:
    """Translate ``def ref_program(A, B): return A @ B`` into a spec over kernel names."""
    params = [a.arg for a in func.args.args]
    rename = dict(zip(params, inputs))
    body: list[str] = []
    for stmt in func.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)) or (
                isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):
            continue
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            body.append(f"{stmt.targets[0].id} = {ast.unparse(_Rename(rename).visit(stmt.value))}")
        elif isinstance(stmt, ast.Return) and stmt.value is not None:
            values = stmt.value.elts if isinstance(stmt.value, ast.Tuple) else [stmt.value]
            for out, value in zip(outputs, values):
                body.append(f"{out} = {ast.unparse(_Rename(rename).visit(value))}")
        else:
            raise LiftInputError("expected the reference function to be assignments and a return", file, stmt.lineno)
    return parse_spec("; ".join(body), inputs + outputs + [a for a in _locals(func)], file,
                      origin=f"{func.name} (line {func.lineno})")


def _locals(func: ast.FunctionDef) -> list[str]:
    return [s.targets[0].id for s in func.body if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name)]


class _Rename(ast.NodeTransformer):
    def __init__(self, mapping: dict[str, str]):
        self.mapping = mapping

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return ast.copy_location(ast.Name(self.mapping.get(node.id, node.id), node.ctx), node)


# --- evaluation -------------------------------------------------------------------------------

class SpecError(Exception):
    """The spec uses something the evaluator does not know (becomes an unsupported diagnostic)."""


def evaluate(spec: Spec, tensors: dict[str, np.ndarray], backend: Any) -> dict[str, np.ndarray]:
    if getattr(spec, "traced", False):  # a reference re-run by torch (``reference.TracedSpec``)
        return spec.evaluate(tensors, backend)  # type: ignore[attr-defined]
    env: dict[str, Any] = dict(tensors)
    for target, expr in spec.statements:
        env[target] = _Evaluator(env, backend).eval(expr)
    return {name: np.asarray(env[name], dtype=object) for name in spec.outputs}


def _fn(*names: str) -> Callable[[SpecFn], SpecFn]:
    def register(fn: SpecFn) -> SpecFn:
        for name in names:
            FUNCTIONS[name] = fn
        return fn
    return register


def _method(*names: str) -> Callable[[SpecFn], SpecFn]:
    def register(fn: SpecFn) -> SpecFn:
        for name in names:
            METHODS[name] = fn
        return fn
    return register


class _Evaluator:
    def __init__(self, env: dict[str, Any], backend: Any):
        self.env, self.backend = env, backend

    def eval(self, node: ast.expr) -> Any:
        b = self.backend
        if isinstance(node, ast.Name):
            if node.id not in self.env:
                raise SpecError(f"unknown name {node.id}")
            return self.env[node.id]
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return b.const(node.value)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return _map(b.neg, self.eval(node.operand))
        if isinstance(node, ast.BinOp):
            left, right = self.eval(node.left), self.eval(node.right)
            if isinstance(node.op, ast.MatMult):
                return matmul(b, left, right)
            op = {ast.Add: b.add, ast.Sub: b.sub, ast.Mult: b.mul, ast.Div: b.div}.get(type(node.op))
            if op is None:
                raise SpecError(f"operator {type(node.op).__name__}")
            return _map2(op, left, right)
        if isinstance(node, ast.Attribute):
            if node.attr in ("T", "mT"):
                return np.asarray(self.eval(node.value), dtype=object).T
            if node.attr == "values":
                return self.eval(node.value)
            raise SpecError(f"attribute .{node.attr}")
        if isinstance(node, ast.Call):
            return self._call(node)
        raise SpecError(f"expression {ast.unparse(node)}")

    def _call(self, node: ast.Call) -> Any:
        kwargs = {k.arg: _literal(k.value) for k in node.keywords}
        func = node.func
        if isinstance(func, ast.Attribute):
            dotted = _dotted(func)
            short = func.attr
            if dotted.split(".")[0] in ("torch", "F", "np", "numpy", "T", "nn"):
                args = [self.eval(a) if not _is_literal(a) else _literal(a) for a in node.args]
                if short not in FUNCTIONS:
                    raise SpecError(f"function {dotted}")
                return FUNCTIONS[short](self.backend, *args, **kwargs)
            if short not in METHODS:
                raise SpecError(f"method .{short}()")
            target = self.eval(func.value)
            args = [_literal(a) if _is_literal(a) else self.eval(a) for a in node.args]
            return METHODS[short](self.backend, target, *args, **kwargs)
        if isinstance(func, ast.Name) and func.id in FUNCTIONS:
            args = [self.eval(a) if not _is_literal(a) else _literal(a) for a in node.args]
            return FUNCTIONS[func.id](self.backend, *args, **kwargs)
        raise SpecError(f"call {ast.unparse(node)}")


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _is_literal(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) or (isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant)) \
        or (isinstance(node, ast.Attribute) and _dotted(node).startswith("torch."))


def _literal(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except ValueError:
        return _dotted(node)


def _map(fn: Callable, x: Any) -> Any:
    if isinstance(x, np.ndarray):
        out = np.empty(x.shape, dtype=object)
        for index in np.ndindex(x.shape):
            out[index] = fn(x[index])
        return out
    return fn(x)


def _map2(fn: Callable, x: Any, y: Any) -> Any:
    x, y = np.asarray(x, dtype=object), np.asarray(y, dtype=object)
    shape = np.broadcast_shapes(x.shape, y.shape)
    x, y = np.broadcast_to(x, shape), np.broadcast_to(y, shape)
    out = np.empty(shape, dtype=object)
    for index in np.ndindex(shape):
        out[index] = fn(x[index], y[index])
    return out


def matmul(b: Any, x: Any, y: Any) -> np.ndarray:
    x, y = np.asarray(x, dtype=object), np.asarray(y, dtype=object)
    if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[0]:
        raise SpecError(f"matmul of shapes {x.shape} and {y.shape}")
    out = np.empty((x.shape[0], y.shape[1]), dtype=object)
    for i in range(x.shape[0]):
        for j in range(y.shape[1]):
            acc = b.const(0)
            for k in range(x.shape[1]):
                acc = b.add(acc, b.mul(x[i, k], y[k, j]))
            out[i, j] = acc
    return out


def _reduce(b: Any, x: Any, dim: int, combine: Callable, keepdim: bool = False) -> np.ndarray:
    x = np.asarray(x, dtype=object)
    dim = dim % x.ndim
    moved = np.moveaxis(x, dim, -1)
    out = np.empty(moved.shape[:-1], dtype=object)
    for index in np.ndindex(out.shape):
        row = moved[index]
        acc = row[0]
        for value in row[1:]:
            acc = combine(acc, value)
        out[index] = acc
    return np.expand_dims(out, dim) if keepdim else out


def _dim(args: tuple, kwargs: dict, default: int | None = None) -> int:
    dim = args[0] if args else kwargs.get("dim", kwargs.get("axis", default))
    if dim is None:
        raise SpecError("reduction over all dims")
    return int(dim)


@_method("sum")
def _sum(b: Any, x: Any, *args: Any, **kwargs: Any) -> Any:
    return _reduce(b, x, _dim(args, kwargs), b.add, bool(kwargs.get("keepdim", kwargs.get("keepdims", False))))


@_method("max", "amax")
def _max(b: Any, x: Any, *args: Any, **kwargs: Any) -> Any:
    return _reduce(b, x, _dim(args, kwargs), b.max, bool(kwargs.get("keepdim", kwargs.get("keepdims", False))))


@_method("min", "amin")
def _min(b: Any, x: Any, *args: Any, **kwargs: Any) -> Any:
    return _reduce(b, x, _dim(args, kwargs), b.min, bool(kwargs.get("keepdim", kwargs.get("keepdims", False))))


@_method("mean")
def _mean(b: Any, x: Any, *args: Any, **kwargs: Any) -> Any:
    dim = _dim(args, kwargs)
    total = _reduce(b, x, dim, b.add, bool(kwargs.get("keepdim", False)))
    count = b.const(np.asarray(x, dtype=object).shape[dim])
    return _map(lambda v: b.div(v, count), total)


@_method("to", "float", "half", "bfloat16", "contiguous", "clone", "type")
def _identity(b: Any, x: Any, *args: Any, **kwargs: Any) -> Any:
    return x


@_method("t", "transpose")
def _transpose(b: Any, x: Any, *args: Any, **kwargs: Any) -> Any:
    return np.asarray(x, dtype=object).T


@_method("tril")
@_fn("tril")
def _tril(b: Any, x: Any, diagonal: int = 0, **kwargs: Any) -> Any:
    return _triangle(b, x, int(kwargs.get("diagonal", diagonal)), lower=True)


@_method("triu")
@_fn("triu")
def _triu(b: Any, x: Any, diagonal: int = 0, **kwargs: Any) -> Any:
    return _triangle(b, x, int(kwargs.get("diagonal", diagonal)), lower=False)


def _triangle(b: Any, x: Any, diagonal: int, lower: bool) -> np.ndarray:
    x = np.asarray(x, dtype=object)
    if x.ndim != 2:
        raise SpecError(f"tril/triu of a {x.ndim}-d tensor")
    out = np.empty(x.shape, dtype=object)
    for i, j in np.ndindex(x.shape):
        keep = j - i <= diagonal if lower else j - i >= diagonal
        out[i, j] = x[i, j] if keep else b.const(0)
    return out


@_method("exp")
@_fn("exp")
def _exp(b: Any, x: Any, **kwargs: Any) -> Any:
    return _map(lambda v: b.call("exp", [v]), x)


@_method("relu")
@_fn("relu")
def _relu(b: Any, x: Any, **kwargs: Any) -> Any:
    zero = b.const(0)
    return _map(lambda v: b.max(v, zero), x)


@_fn("maximum")
def _maximum(b: Any, x: Any, y: Any) -> Any:
    y = b.const(y) if isinstance(y, (int, float)) else y
    return _map2(b.max, x, y)


@_fn("matmul", "mm")
def _matmul(b: Any, x: Any, y: Any) -> Any:
    return matmul(b, x, y)


@_method("softmax")
@_fn("softmax")
def _softmax(b: Any, x: Any, *args: Any, **kwargs: Any) -> Any:
    dim = _dim(args, kwargs, -1)
    x = np.asarray(x, dtype=object)
    peak = _reduce(b, x, dim, b.max, keepdim=True)
    shifted = _exp(b, _map2(b.sub, x, peak))
    total = _reduce(b, shifted, dim, b.add, keepdim=True)
    return _map2(b.div, shifted, total)


@_fn("sum")
def _sum_fn(b: Any, x: Any, *args: Any, **kwargs: Any) -> Any:
    return _sum(b, x, *args, **kwargs)
