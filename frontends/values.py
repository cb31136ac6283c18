"""The values a translated program computes with, at the Python level.

Integers are sympy expressions (see ``symbolic.py``); tensors are ``Tensor`` objects whose
``name`` is the current SSA value (in-place operations such as ``dist.all_reduce(t)`` give
the same Python object a new SSA name, so every alias sees the update); everything else a
model file handles (modules, meshes, placements, handles, library functions) has a small
class here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import libcst as cst

from verifier.placements import Placement


class UnsupportedError(Exception):
    """A construct the frontend does not model: becomes an ``Unsupported`` entry."""

    def __init__(self, line: int | None, construct: str, reason: str):
        self.line, self.construct, self.reason = line, construct, reason
        super().__init__(f"line {line}: {construct}: {reason}")


class UserError(Exception):
    """A mistake in the user's file or command line: becomes a ``SourceError``."""

    def __init__(self, line: int | None, message: str):
        self.line, self.message = line, message
        super().__init__(message)


@dataclass(eq=False)
class Tensor:
    """A torch tensor on one rank: its current SSA name, local shape and dtype.

    ``name`` is None for a buffer that holds nothing yet (``torch.empty``); ``lazy`` makes
    the value on first read (a parameter becomes an IR input, ``torch.zeros`` an op), so
    buffers that a collective overwrites never show up in the IR.  ``dt`` is set for a
    DTensor: its placements over the mesh dims of ``dt_mesh``.
    """

    name: str | None
    shape: tuple
    dtype: str = "f32"
    lazy: Callable[[], None] | None = None
    pending: Any = None  # a collective whose concatenation dim is fixed by the first reader
    dt: tuple[Placement, ...] | None = None
    dt_mesh: "MeshObj | None" = None
    origin: str = ""  # how the value was made, for messages
    storage: list | None = None  # the tensors that share memory with this one (views)
    stale: str | None = None  # why reading this view is no longer modelled
    param: Any = None  # ParamInfo when this tensor is a module parameter (an IR input made on first read)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def local_copy(self, name: str | None = None) -> "Tensor":
        return Tensor(name or self.name, self.shape, self.dtype)


@dataclass(frozen=True)
class QualName:
    """A library object named by its import path, e.g. ``torch.nn.functional.gelu``."""

    name: str

    def child(self, attr: str) -> "QualName":
        return QualName(f"{self.name}.{attr}")


@dataclass(frozen=True)
class DType:
    name: str  # IR dtype: f32, f16, bf16, f64, i64, i32, bool


@dataclass(frozen=True)
class ReduceOp:
    op: str  # sum | avg | max | min | product


@dataclass(frozen=True)
class MeshObj:
    """A device mesh (or a sub-mesh): the names of its dims, major to minor."""

    dims: tuple[str, ...]


@dataclass(frozen=True)
class GroupObj:
    """A process group: the ranks that differ only in these mesh dims."""

    dims: tuple[str, ...]


@dataclass
class Handle:
    """The work object of an async collective or isend/irecv."""

    name: str
    line: int | None
    waited: bool = False


@dataclass
class HandleList:
    handles: list[Handle]


@dataclass
class WorldPieces:
    """``x.chunk(world, dim)``: one piece per rank of ``dims`` (indexed by the rank)."""

    source: Tensor
    dim: int
    dims: tuple[str, ...]
    line: int | None


@dataclass
class BufferList:
    """``[torch.empty_like(t) for _ in range(world)]``: receive buffers for a list collective."""

    dims: tuple[str, ...]
    template: Tensor | None
    line: int | None
    filled: "PendingGather | None" = None


@dataclass
class PendingGather:
    """A gather-like collective already emitted whose concatenation dim is still open.

    ``dist.all_gather(parts, t)`` and ``all_gather_into_tensor(out, t)`` stack the ranks'
    tensors; ``torch.cat(parts, dim=d)`` (or ``torch.cat(out.chunk(world), dim=d)``) then
    means an all-gather along ``d``, which is what the IR op says.  The op is emitted in
    program order and its ``dim`` attribute is filled in by the first reader.
    """

    record: Any  # the builder's op record
    attr: str  # the attribute to fix ("dim" or "concat_dim")
    source: Tensor
    dims: tuple[str, ...]
    fix: Callable[[int], Tensor]
    result: Tensor | None = None
    fixed_dim: int | None = None


@dataclass
class FunctionObj:
    node: cst.FunctionDef
    scope: Any  # the defining scope (closures)
    owner: Any = None  # ClassObj for methods
    bound: Any = None  # the instance for bound methods

    @property
    def name(self) -> str:
        return self.node.name.value


@dataclass
class ClassObj:
    node: cst.ClassDef
    scope: Any
    bases: tuple[Any, ...]

    @property
    def name(self) -> str:
        return self.node.name.value


@dataclass(eq=False)
class ModuleObj:
    """An ``nn.Module`` instance: a user class, or a library layer (``kind`` names it)."""

    kind: str  # "user" or the library class (Linear, LayerNorm, ColumnParallelLinear, ...)
    cls: ClassObj | None = None
    attrs: dict[str, Any] = field(default_factory=dict)
    fqn: str = ""
    line: int | None = None
    style: Any = None  # DTensor ParallelStyle applied by parallelize_module
    mesh: MeshObj | None = None
    options: dict[str, Any] = field(default_factory=dict)  # constructor arguments of library layers
    children_order: list[str] = field(default_factory=list)

    def children(self) -> list[tuple[str, "ModuleObj"]]:
        out = []
        for key in self.children_order:
            value = self.attrs.get(key)
            if isinstance(value, ModuleObj):
                out.append((key, value))
        return out


@dataclass
class BoundMethod:
    obj: Any
    name: str


@dataclass
class StyleObj:
    """A DTensor ParallelStyle (ColwiseParallel, RowwiseParallel, ...) with its arguments."""

    kind: str
    kwargs: dict[str, Any]
    line: int | None


@dataclass
class ConfigObj:
    """Megatron's TransformerConfig / ModelParallelConfig: only the fields we read matter."""

    fields: dict[str, Any]


@dataclass
class AutogradCtx:
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass
class MaxResult:
    """``torch.max(x, dim)``: ``values`` is modelled, ``indices`` is not."""

    values: Tensor
    line: int | None


@dataclass(frozen=True)
class LossParallel:
    pass


@dataclass(frozen=True)
class NoOpContext:
    """``torch.no_grad()`` and friends: a ``with`` block that changes nothing we model."""

    name: str


class Missing:
    """An argument that was not passed (distinct from None)."""


MISSING = Missing()
