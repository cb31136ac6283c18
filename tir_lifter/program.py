"""The lifted kernel: what a TileLang / TIR kernel does, as plain frozen dataclasses.

Both frontends (``text_frontend`` reading source with ``ast``, ``tvm_frontend`` walking real
``PrimFunc`` objects) produce a :class:`Kernel`; everything downstream (size reduction,
interpretation, checks) reads only this module's types, so the two frontends can be
compared for equality.

Expressions are one small closed family used both for index arithmetic (``by * block_M``)
and for element values (``T.max(C_local[i, j], 0)``).  Sizes stay symbolic (``Var("K")``)
with their values kept separately in ``Kernel.sizes`` so the checker can instantiate them
on reduced shapes.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Union


# --- expressions --------------------------------------------------------------------------

@dataclass(frozen=True)
class Const:
    value: Any  # int, float or bool

    def __str__(self) -> str:
        return repr(self.value) if isinstance(self.value, float) else str(self.value)


@dataclass(frozen=True)
class Var:
    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class BinOp:
    """``op`` is one of + - * / // % ceildiv min max < <= > >= == != and or."""

    op: str
    a: "Expr"
    b: "Expr"

    def __str__(self) -> str:
        if self.op in ("ceildiv", "min", "max"):
            return f"{self.op}({self.a}, {self.b})"
        return f"({self.a} {self.op} {self.b})"


@dataclass(frozen=True)
class UnOp:
    op: str  # "neg" | "not"
    a: "Expr"

    def __str__(self) -> str:
        return f"-{self.a}" if self.op == "neg" else f"not {self.a}"


@dataclass(frozen=True)
class Call:
    """An intrinsic on values: exp, exp2, log, sqrt, rsqrt, abs, tanh, sigmoid, infinity, cast."""

    fn: str
    args: tuple["Expr", ...]
    dtype: str | None = None
    source: str | None = None  # a cast's operand dtype (what the conversion starts from)

    def __str__(self) -> str:
        return f"{self.fn}({', '.join(map(str, self.args))})"


@dataclass(frozen=True)
class Load:
    buffer: str
    indices: tuple["Expr", ...]

    def __str__(self) -> str:
        return f"{self.buffer}[{', '.join(map(str, self.indices))}]"


@dataclass(frozen=True)
class Select:
    cond: "Expr"
    a: "Expr"
    b: "Expr"

    def __str__(self) -> str:
        return f"select({self.cond}, {self.a}, {self.b})"


Expr = Union[Const, Var, BinOp, UnOp, Call, Load, Select]


def expr_children(expr: Expr) -> tuple[Expr, ...]:
    """The direct sub-expressions of ``expr``, in order."""
    if isinstance(expr, BinOp):
        return (expr.a, expr.b)
    if isinstance(expr, UnOp):
        return (expr.a,)
    if isinstance(expr, Call):
        return expr.args
    if isinstance(expr, Load):
        return expr.indices
    if isinstance(expr, Select):
        return (expr.cond, expr.a, expr.b)
    return ()


def walk_expr(expr: Expr):
    """Yield ``expr`` and all its sub-expressions (pre-order)."""
    yield expr
    for child in expr_children(expr):
        yield from walk_expr(child)


def fold_const(expr: Expr) -> Expr:
    """Fold negation and arithmetic of two float constants (``-T.infinity()`` and TVM's
    ``inf * -1.0`` both become ``Const(-inf)``), so both frontends agree."""
    if isinstance(expr, UnOp) and expr.op == "neg" and isinstance(expr.a, Const) and not isinstance(expr.a.value, bool):
        return Const(-expr.a.value)
    if isinstance(expr, BinOp) and isinstance(expr.a, Const) and isinstance(expr.b, Const) and \
            (isinstance(expr.a.value, float) or isinstance(expr.b.value, float)) and expr.op in ("*", "+", "-"):
        a, b = expr.a.value, expr.b.value
        return Const(a * b if expr.op == "*" else a + b if expr.op == "+" else a - b)
    return expr


# --- buffers, regions, statements ----------------------------------------------------------

GLOBAL, SHARED, FRAGMENT, LOCAL = "global", "shared", "fragment", "local"


@dataclass(frozen=True)
class Buffer:
    name: str
    shape: tuple[Expr, ...]
    dtype: str
    scope: str
    line: int | None = None


@dataclass(frozen=True)
class Region:
    """A rectangular piece of a buffer; ``extents`` is None when the tile op infers it
    from the other operand (TileLang's ``T.copy(A[by * bm, k * bk], A_shared)``)."""

    buffer: str
    starts: tuple[Expr, ...]
    extents: tuple[Expr, ...] | None = None

    def __str__(self) -> str:
        if self.extents is None:
            return f"{self.buffer}[{', '.join(map(str, self.starts))}]"
        parts = [f"{s}:+{e}" for s, e in zip(self.starts, self.extents)]
        return f"{self.buffer}[{', '.join(parts)}]"


@dataclass(frozen=True)
class TileOp:
    """A whole-tile operation (copy, fill, gemm, reduce, atomic_add); ``attrs`` are
    name/value pairs so the op stays hashable and comparable."""

    kind: str
    operands: tuple[Union[Region, Expr], ...]
    attrs: tuple[tuple[str, Any], ...] = ()
    line: int | None = None

    def attr(self, name: str, default: Any = None) -> Any:
        return dict(self.attrs).get(name, default)


@dataclass(frozen=True)
class Store:
    """``buffer[indices] = value`` (``atomic``: ``T.atomic_add(buffer[indices], value)``)."""

    buffer: str
    indices: tuple[Expr, ...]
    value: Expr
    atomic: bool = False
    line: int | None = None


SERIAL, PIPELINED, PARALLEL = "serial", "pipelined", "parallel"


@dataclass(frozen=True)
class Loop:
    var: str
    extent: Expr
    kind: str
    body: tuple["Stmt", ...]
    line: int | None = None
    num_stages: int | None = None


@dataclass(frozen=True)
class If:
    cond: Expr
    then: tuple["Stmt", ...]
    orelse: tuple["Stmt", ...] = ()
    line: int | None = None


@dataclass(frozen=True)
class While:
    """``while cond: body`` (a loop whose trip count the kernel computes, as stream-K does)."""

    cond: Expr
    body: tuple["Stmt", ...]
    line: int | None = None


@dataclass(frozen=True)
class GridAxis:
    var: str
    extent: Expr


@dataclass(frozen=True)
class GridLaunch:
    """One ``T.Kernel`` of a PrimFunc that launches several in turn (split, then combine):
    ``body`` runs once per block of ``axes``, after every block of the previous launch."""

    axes: tuple[GridAxis, ...]
    body: tuple["Stmt", ...]
    line: int | None = None
    # after a ``T.sync_grid()`` of the previous launch's blocks: the same blocks go on, their
    # on-chip memory holding what they left there (a read of it is not modelled)
    continues: bool = False


Stmt = Union[TileOp, Store, Loop, If, While, GridLaunch]

# the thread index of each axis of the block, ``Var(THREAD_INDEX[0])`` in a kernel with per-thread code
# (``tx = T.get_thread_binding()`` used in an index or a condition)
THREAD_INDEX = ("threadIdx.x", "threadIdx.y", "threadIdx.z")
# ``T.tvm_warp_shuffle(mask, value, lane, width, warp_size)``: ``value`` as the thread ``lane`` of the
# caller's ``width`` lanes of its warp computes it (CUDA's ``__shfl_sync(mask, value, lane, width)``)
WARP_SHUFFLE = "tvm_warp_shuffle"
# ``T.sync_threads()``: every thread of the block waits for the others (kept in per-thread code only)
SYNC_THREADS = "sync_threads"

# ``If(Call(WARP_GROUP, (Const(lo), Const(hi))), body)``: the threads lo..hi-1 run ``body`` (``T.ws``),
# at the same time as the other groups of the block
WARP_GROUP = "warp_group"


@dataclass(frozen=True)
class Kernel:
    """One lifted kernel.  ``params`` are the global tensors in signature order,
    ``allocs`` the on-chip buffers (and ``T.alloc_global`` scratch), ``grid`` the blocks
    (empty when the body is several :class:`GridLaunch`), ``sizes`` the named size parameters with their value
    in the file (None when the file never binds it)."""

    name: str
    params: tuple[Buffer, ...]
    allocs: tuple[Buffer, ...]
    grid: tuple[GridAxis, ...]
    body: tuple[Stmt, ...]
    sizes: tuple[tuple[str, int | None], ...] = ()
    threads: int | None = None
    line: int | None = None
    grid_line: int | None = None
    source: str | None = None
    auto_guard: bool = True  # TileLang's lowering guards global accesses (off: tl.disable_safe_memory_legalize)
    views: tuple[tuple[Buffer, str], ...] = ()  # a global tensor read with another shape, and that tensor's name
    onchip_views: tuple[tuple[Buffer, str], ...] = ()  # T.reshape: an on-chip buffer used with another shape
    columns: tuple[tuple[int, int], ...] = ()  # (line, 1-based column) of each source statement
    barriers: tuple[tuple[str, tuple[int, ...]], ...] = ()  # T.alloc_barrier buffer -> arrive count of each
    samples: tuple = ()  # index_inputs.IndexSample of each integer index tensor (drawn as the file draws it)
    thread_dims: tuple[int, ...] = ()  # the block's threads per axis (x, y, z), when the frontend knows them
    built_at: int | None = None  # the line of the file's call that built it (its sizes and dtypes come from there)
    # every parameter of the PrimFunc in order, scalars (``max_seqlen: T.int32``) among the tensors: a
    # launch passes its arguments, and ``out_idx`` counts its outputs, by these positions (empty: ``params``)
    signature: tuple[str, ...] = ()

    def buffer(self, name: str) -> Buffer:
        for buf in self.params + self.allocs + tuple(view for view, _ in self.views + self.onchip_views):
            if buf.name == name:
                return buf
        raise KeyError(name)

    def tensor_of(self, name: str) -> str:
        """The global tensor a buffer name stands for (itself, or the tensor it is a view of)."""
        return next((base for view, base in self.views if view.name == name), name)

    @property
    def all_axes(self) -> tuple[GridAxis, ...]:
        """The grid's axes and those of each launch of a several-launch kernel."""
        return self.grid + tuple(a for s in walk_stmts(self.body) if isinstance(s, GridLaunch) for a in s.axes)

    @property
    def block_threads(self) -> tuple[int, ...]:
        """The block's threads per axis (TileLang's default block: 128 threads)."""
        return tuple(self.thread_dims) or (self.threads or 128,)

    @property
    def size_values(self) -> dict[str, int | None]:
        return dict(self.sizes)

    def with_sizes(self, sizes: dict[str, int | None]) -> "Kernel":
        return replace(self, sizes=tuple(sizes.items()))


def walk_stmts(stmts: tuple[Stmt, ...]):
    """Yield every statement, descending into loops and ifs."""
    for stmt in stmts:
        yield stmt
        if isinstance(stmt, (Loop, While, GridLaunch)):
            yield from walk_stmts(stmt.body)
        elif isinstance(stmt, If):
            yield from walk_stmts(stmt.then)
            yield from walk_stmts(stmt.orelse)


def stmt_exprs(stmt: Stmt):
    """The expressions a statement itself holds (not those of the statements inside it)."""
    if isinstance(stmt, Store):
        yield from stmt.indices
        yield stmt.value
    elif isinstance(stmt, (Loop,)):
        yield stmt.extent
    elif isinstance(stmt, (If, While)):
        yield stmt.cond
    elif isinstance(stmt, TileOp):
        for operand in stmt.operands:
            if isinstance(operand, Region):
                yield from operand.starts
                yield from operand.extents or ()
            else:
                yield operand
        for _, value in stmt.attrs:
            if isinstance(value, (Const, Var, BinOp, UnOp, Call, Load, Select)):
                yield value
            elif isinstance(value, Region):
                yield from value.starts


def uses_thread_index(stmts: tuple[Stmt, ...]) -> bool:
    """True when a statement reads the thread index outside a warp-group branch's condition, or
    another lane's register (a warp shuffle): per-thread code."""
    return any(isinstance(e, Var) and e.name in THREAD_INDEX or isinstance(e, Call) and e.fn == WARP_SHUFFLE
               for stmt in walk_stmts(stmts) if not (isinstance(stmt, If) and _thread_range_cond(stmt.cond))
               for top in stmt_exprs(stmt) for e in walk_expr(top))


def _thread_range_cond(cond: Expr) -> bool:
    """``lo <= tx < hi`` (comparisons of threadIdx.x with constants joined by ``and``): what the
    PrimFunc reader makes a warp group of."""
    if isinstance(cond, BinOp) and cond.op == "and":
        return _thread_range_cond(cond.a) and _thread_range_cond(cond.b)
    if not isinstance(cond, BinOp) or cond.op not in ("<", "<=", ">", ">="):
        return False
    sides = {type(cond.a), type(cond.b)}
    thread = cond.a if isinstance(cond.a, Var) else cond.b
    other = cond.b if thread is cond.a else cond.a
    return sides == {Var, Const} and thread.name == THREAD_INDEX[0] and isinstance(other.value, int)


def without_block_barriers(stmts: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
    """The statements without their ``T.sync_threads()``: a kernel run block-wide keeps its
    statements in program order, the order such a barrier enforces."""
    out: list[Stmt] = []
    for stmt in stmts:
        if isinstance(stmt, TileOp) and stmt.kind == SYNC_THREADS:
            continue
        if isinstance(stmt, (Loop, While, GridLaunch)):
            stmt = replace(stmt, body=without_block_barriers(stmt.body))
        elif isinstance(stmt, If):
            stmt = replace(stmt, then=without_block_barriers(stmt.then), orelse=without_block_barriers(stmt.orelse))
        out.append(stmt)
    return tuple(out)


def count_ops(kernel: Kernel) -> int:
    return sum(1 for stmt in walk_stmts(kernel.body) if isinstance(stmt, (TileOp, Store)))


@dataclass
class LiftResult:
    """What a frontend hands back: the kernels it lifted and constructs it could not."""

    kernels: list[Kernel] = field(default_factory=list)
    unsupported: list[tuple[int | None, str]] = field(default_factory=list)
    references: dict[str, Any] = field(default_factory=dict)
