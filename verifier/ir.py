"""The verification IR: an SPMD program over a named device mesh.

Every rank runs the same SSA op list on its local tensors; inputs are described by their
global shape and one placement per mesh dim, collectives name the mesh dim they run over.
The reference semantics is the same program on a mesh whose dims all have size 1.

Dims are ints or small expressions over named symbols (``H``, ``4*H``, ``H/8``) so a program
can be checked on reduced shapes (see ``verifier/shapes.py``).
"""
from __future__ import annotations

import ast
import functools
import os
import re
from dataclasses import dataclass, field
from typing import Any, Union

from .placements import Placement

Dim = Union[int, str]


@dataclass(frozen=True)
class Span:
    """Where an op came from: a line (and optionally column) of the user's source file."""

    line: int | None = None
    file: str | None = None
    # the innermost line of the user's own code outside this file the op ran in (a package of theirs
    # the file calls into: one under --path or beside the file), as (file, line); None when the op
    # ran in this file's own lines or in installed code only
    within: tuple[str, int] | None = None
    # names the op's statement reads that were bound on an earlier line of the same frame (the frame of
    # ``place()``): (the operand's value name, the variable, the line that bound it); set by the traced
    # frontend, so that a value bound where an op used to be (a collective dropped) is named there
    bound: tuple[tuple[str, str, int], ...] = field(default=(), compare=False, hash=False)
    # operands an earlier bare call of the user's (``dist.all_reduce(t)``, ``reduce_(t)``) read and left
    # unwritten, its last such call: (the operand's value name, the variable, that call's line, its
    # ``within``), so that an in-place collective that did nothing is named where it is
    left: tuple[tuple[str, str, int | None, tuple[str, int] | None], ...] = field(default=(), compare=False, hash=False)
    # with ``bound``: the last statement the same frame ran before the op's statement (compound statements'
    # headers aside), after which a write the op should have read may go: its first line, and the first line of
    # the compound statement (``if``, ``for``, ...) whose body holds it (None: the function's own body)
    after: tuple[int, int | None] | None = field(default=None, compare=False, hash=False)
    # operands the op's statement reads as values an earlier line of the checked file picked out of a Python
    # list or tuple by a subscript that no op records (``mine = layers[a:b]``, then ``for w in mine``):
    # (the operand's value name, the variable that line bound, the line); set by the traced frontend
    picked: tuple[tuple[str, str, int], ...] = field(default=(), compare=False, hash=False)

    def __str__(self) -> str:
        if self.line is None:
            return "?"
        return f"{self.file}:{self.line}" if self.file else str(self.line)

    def place(self) -> tuple[int | None, str | None]:
        """(line, file) a finding names: the line of the user's package the op ran in, with that file,
        else this line with no file (the checked file's)."""
        if self.within is not None:
            file, line = self.within
            return line, file
        return self.line, None

    def moved_to(self, line: int) -> "Span":
        """This span at another line of the same frame (the checked file's, or the package file's)."""
        if self.within is not None:
            return Span(self.line, self.file, (self.within[0], line))
        return Span(line, self.file)

    def where(self) -> str:
        """The place for a message: ``regions.py line 7, called from line 16``, else ``line 16``."""
        if self.within is not None:
            file, line = self.within
            called = f", called from line {self.line}" if self.line is not None else ""
            return f"{os.path.basename(file)} line {line}{called}"
        return f"line {self.line}"


@dataclass(frozen=True)
class Mesh:
    """Named mesh dims in major-to-minor order, e.g. ``(("dp", 2), ("tp", 4))``."""

    dims: tuple[tuple[str, int], ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.dims)

    def size(self, name: str) -> int:
        for dim_name, size in self.dims:
            if dim_name == name:
                return size
        raise KeyError(name)

    def index(self, name: str) -> int:
        return self.names.index(name)

    @property
    def world(self) -> int:
        total = 1
        for _, size in self.dims:
            total *= size
        return total

    def unit(self) -> "Mesh":
        """The same mesh with every dim of size 1: where the reference program runs."""
        return Mesh(tuple((name, 1) for name, _ in self.dims))

    def __str__(self) -> str:
        return ",".join(f"{name}={size}" for name, size in self.dims)


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple[Dim, ...]
    dtype: str = "f32"
    placements: tuple[Placement, ...] = ()
    span: Span = field(default_factory=Span)
    bounds: tuple[Dim, Dim] | None = None  # integer inputs (token ids): values in [low, high)
    # integer inputs: values the input also takes outside [low, high) (a label's padding value -100)
    extra_values: tuple[int, ...] = ()


@dataclass(frozen=True)
class Op:
    """One SSA op. ``args`` name values; ``attrs`` hold everything that is not a tensor."""

    results: tuple[str, ...]
    kind: str
    args: tuple[str, ...] = ()
    attrs: dict[str, Any] = field(default_factory=dict, hash=False, compare=True)
    span: Span = field(default_factory=Span)

    def attr(self, name: str, default: Any = None) -> Any:
        return self.attrs.get(name, default)


@dataclass(frozen=True)
class Output:
    name: str
    placements: tuple[Placement, ...] = ()
    span: Span = field(default_factory=Span)


@dataclass(frozen=True)
class Gradient:
    """Check the gradient of ``input``: its final value (after any synchronisation written in
    the backward section) is ``value`` and must be placed as ``placements``."""

    input: str
    value: str
    placements: tuple[Placement, ...] = ()
    span: Span = field(default_factory=Span)


@dataclass(frozen=True)
class Function:
    """A named op list (``def``): bodies of custom autograd functions."""

    name: str
    params: tuple[str, ...]
    ops: tuple[Op, ...]
    returns: tuple[str, ...]
    span: Span = field(default_factory=Span)


@dataclass(frozen=True)
class Program:
    mesh: Mesh
    inputs: tuple[TensorSpec, ...]
    ops: tuple[Op, ...]
    outputs: tuple[Output, ...]
    dims: dict[str, int | None] = field(default_factory=dict, hash=False)
    requires: tuple[str, ...] = ()
    source: str | None = None
    gradients: tuple[Gradient, ...] = ()
    backward_ops: tuple[Op, ...] = ()  # gradient synchronisation, run after the generated backward
    functions: dict[str, Function] = field(default_factory=dict, hash=False)


# --- dim expressions -------------------------------------------------------------------

_ALLOWED = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Name, ast.Constant, ast.Load,
            ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.USub, ast.Pow)


@functools.lru_cache(maxsize=4096)
def parse_expression(text: str) -> ast.Expression:
    """Dim and predicate expressions repeat a lot; parse each text once."""
    return ast.parse(text, mode="eval")


def dim_symbols(dim: Dim) -> set[str]:
    if isinstance(dim, int):
        return set()
    return {node.id for node in ast.walk(parse_expression(dim)) if isinstance(node, ast.Name)}


def check_dim_syntax(text: str) -> None:
    """Raise ValueError unless ``text`` is an arithmetic expression over names and ints.

    The text (a model's answer, an IR file) first goes through the bounded grammar of
    ``size_expr`` (length, nesting, exponent and literal limits; ``SizeExprError`` is a
    ValueError), so ``ast.parse`` never sees a hostile expression.
    """
    from .size_expr import parse_size_expr

    parse_size_expr(text)
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"expected a dim expression, got {text!r}") from exc
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED) or (isinstance(node, ast.Constant) and not isinstance(node.value, int)):
            raise ValueError(f"expected a dim expression over names and ints, got {text!r}")


def eval_dim(dim: Dim, env: dict[str, Any]) -> Any:
    """Evaluate a dim with symbol values from ``env`` (ints, or z3 Int terms).

    ``/`` is exact division: callers prove divisibility separately (well-formedness).
    """
    if isinstance(dim, int):
        return dim

    def walk(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in env or env[node.id] is None:
                raise KeyError(node.id)
            return env[node.id]
        if isinstance(node, ast.UnaryOp):
            return -walk(node.operand)
        left, right = walk(node.left), walk(node.right)
        op = type(node.op)
        if op is ast.Add:
            return left + right
        if op is ast.Sub:
            return left - right
        if op is ast.Mult:
            return left * right
        if op is ast.Pow:
            if isinstance(right, int) and right >= 0 and not isinstance(left, int):
                result = 1  # repeated product keeps z3 Int terms integral (Int ** Int is Real)
                for _ in range(right):
                    result = result * left
                return result
            return left ** right
        if op is ast.Mod:
            return left % right
        if isinstance(left, int) and isinstance(right, int):
            return left // right
        return left / right

    return walk(parse_expression(dim))


def mesh_sizes(mesh: Mesh) -> dict[str, int]:
    """Names usable in dim expressions for the mesh: ``tp_size`` is the size of ``tp``."""
    return {f"{name}_size": size for name, size in mesh.dims}


_REQUIREMENT_RE = re.compile(r"\s*(.+?)\s*(==|>=|<=|!=|>|<)\s*(.+?)\s*")


def split_requirement(text: str) -> tuple[str, str, str] | None:
    """``H % 8 == 0`` -> ("H % 8", "==", "0"); None when there is no comparison."""
    match = _REQUIREMENT_RE.fullmatch(text)
    return (match.group(1), match.group(2), match.group(3)) if match else None
