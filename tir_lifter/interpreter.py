"""Run a lifted kernel on concrete sizes, block by block, over a value backend.

Indices are plain ints (sizes are concrete after reduction); element values are whatever
the backend makes (floats, Z3 terms).  Besides the final tensors the run records what the
grid checks need: which block wrote each output element and how (plain or atomic),
reads of never-written on-chip memory, and out-of-bounds element accesses.  Tile ops are
executed by the handlers registered in ``tile_ops``.

Blocks run one after another in grid order.  That is a faithful model only when no two
blocks write one element non-atomically — exactly the condition the write-conflict check
reports, so a verified kernel's result does not depend on the order.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .backends import InfinityArithmetic
from .bits import BIT_OPERATIONS, IN_RANGE, REINTERPRET, bit_operation, fits, reinterpret
from .errors import InfiniteValue, Unsupported
from .program import (FRAGMENT, GLOBAL, PARALLEL, SYNC_THREADS, THREAD_INDEX, WARP_GROUP, WARP_SHUFFLE, BinOp, Call,
                      Const, Expr, GridAxis, GridLaunch, If, Kernel, Load, Loop, Region, Select, Stmt, Store, TileOp, UnOp,
                      Var, While, stmt_exprs, uses_thread_index, walk_expr, walk_stmts)
from .size_env import eval_size, int_bits
from .sync import WarpGroups

_MAX_WHILE = 10_000  # iterations of one while loop at the reduced sizes


class _Kept:
    """An on-chip element of a block continued after a ``T.sync_grid()``: whatever the block
    left there (or nothing) before the barrier."""

    def __repr__(self) -> str:
        return "kept"


KEPT = _Kept()


@dataclass
class Fault:
    """A run-time defect of the kernel on the reduced shapes."""

    check: str  # "out-of-bounds" | "uninitialized-read"
    line: int | None
    message: str
    buffer: str | None = None


@dataclass
class Conflict:
    buffer: str
    index: tuple[int, ...]
    blocks: tuple[tuple[int, ...], tuple[int, ...]]
    line: int | None


@dataclass
class Trace:
    outputs: dict[str, np.ndarray]
    writers: dict[str, np.ndarray]  # -1: no block wrote the element
    conflicts: list[Conflict] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    written_values: dict[tuple[str, tuple[int, ...]], list[tuple[tuple[int, ...], Any]]] = field(default_factory=dict)
    lines: dict[str, np.ndarray] = field(default_factory=dict)  # source line of each element's last write
    conflict_cells: dict[str, set[tuple[int, ...]]] = field(default_factory=dict)
    auto_guarded: list[Fault] = field(default_factory=list)  # global accesses TileLang's lowering guards
    # source lines each global element's value came through (its writes, the reads they used, the
    # loops around them), kept when the run is asked to (the float re-run of a witness)
    origins: dict[str, np.ndarray] = field(default_factory=dict)
    # (input tensor, element) -> source lines of the statements that read it from global memory
    reads: dict[tuple[str, tuple[int, ...]], set[int]] = field(default_factory=dict)
    edge_reads: set[int] = field(default_factory=set)  # lines reading a global tensor past its edge (0 there)
    # global tensor (a view counted as its tensor) -> element stores the blocks issued, those past
    # its edge included: as many as it has elements, and some unwritten, means misplaced stores
    stores: dict[str, int] = field(default_factory=dict)
    # (input tensor, element) -> (source line, block id) of each read of it from global memory
    read_by: dict[tuple[str, tuple[int, ...]], set[tuple[int, int]]] = field(default_factory=dict)


class Machine:
    """One run of one kernel.  ``tensors`` holds the global tensors (inputs and the initial
    contents of outputs) as numpy object arrays of backend values."""

    def __init__(self, kernel: Kernel, sizes: dict[str, int], backend: Any, tensors: dict[str, np.ndarray],
                 record_values: bool = False, record_origins: bool = False):
        self.kernel, self.sizes, self.backend = kernel, dict(sizes), backend
        self.globals = {name: array.copy() for name, array in tensors.items()}
        self.shapes = {buf.name: tuple(eval_size(d, sizes) for d in buf.shape) for buf in kernel.params + kernel.allocs}
        self.scopes = {buf.name: buf.scope for buf in kernel.params + kernel.allocs}
        self.dtypes = {buf.name: buf.dtype for buf in kernel.params + kernel.allocs}
        scratch = tuple(buf for buf in kernel.allocs if buf.scope == GLOBAL)  # T.alloc_global: uninitialised, shared
        self.globals.update({buf.name: np.full(self.shapes[buf.name], None, dtype=object) for buf in scratch})
        tracked = kernel.params + scratch  # global memory: who wrote each element, how, at which line
        self.writers = {buf.name: np.full(self.shapes[buf.name], -1, dtype=np.int64) for buf in tracked}
        self.plain = {buf.name: np.zeros(self.shapes[buf.name], dtype=bool) for buf in tracked}
        self.lines = {buf.name: np.full(self.shapes[buf.name], None, dtype=object) for buf in tracked}
        for view, base in kernel.views:  # another shape of the same memory: numpy views of the tensor's arrays
            shape = tuple(eval_size(d, sizes) for d in view.shape)
            if int(np.prod(shape)) != self.globals[base].size:
                raise Unsupported(None, f"{view.name} views {base} of {list(self.shapes[base])} as {list(shape)}: "
                                  "a view of another size is not modelled")
            self.shapes[view.name], self.scopes[view.name] = shape, GLOBAL
            for arrays in (self.globals, self.writers, self.plain, self.lines):
                arrays[view.name] = arrays[base].reshape(shape)
        for view, base in kernel.onchip_views:  # T.reshape: the block's buffer under another shape
            shape = tuple(eval_size(d, sizes) for d in view.shape)
            if base not in self.shapes or int(np.prod(shape)) != int(np.prod(self.shapes[base])):
                raise Unsupported(None, f"{view.name} reshapes the on-chip buffer {base} to {list(shape)}: another "
                                  "size is not modelled")
            self.shapes[view.name], self.scopes[view.name] = shape, self.scopes[base]
            self.dtypes[view.name] = self.dtypes[base]
        self.conflicts: list[Conflict] = []
        self.conflict_cells: dict[str, set[tuple[int, ...]]] = {}
        self.faults: list[Fault] = []
        self._fault_lines: set[tuple[str, int | None]] = set()
        self.auto_guarded: dict[tuple[str, int | None], Fault] = {}
        self.record_values = record_values
        self.written_values: dict[tuple[str, tuple[int, ...]], list[tuple[tuple[int, ...], Any]]] = {}
        self.block: tuple[int, ...] = ()
        self.block_id = 0
        self.blocks: list[tuple[int, ...]] = []  # block id -> its indices (ids go on across launches)
        self.launch_start = 0  # first block id of the running launch: earlier writes are finished ones
        self.locals: dict[str, np.ndarray] = {}
        self.record_origins = record_origins
        self.origin: dict[tuple[str, tuple[int, ...]], frozenset[int]] = {}  # (buffer, index) -> lines
        self._reads: set[int] = set()  # lines the values read since the last store came through
        self._loop_lines: list[int] = []
        self.reads: dict[tuple[str, tuple[int, ...]], set[int]] = {}
        self.read_by: dict[tuple[str, tuple[int, ...]], set[tuple[int, int]]] = {}
        self.edge_reads: set[int] = set()
        self.stores: dict[str, int] = {}
        self._view_base = {view.name: base for view, base in kernel.views}
        self._onchip_base = {view.name: base for view, base in kernel.onchip_views}
        # warp groups (T.ws) and mbarriers: the order between them is checked as the block runs
        grouped = any(isinstance(s, If) and _warp_group(s) for s in walk_stmts(kernel.body))
        wgmma = any(isinstance(s, TileOp) and s.kind == "wgmma_wait" for s in walk_stmts(kernel.body)) or \
            any(isinstance(s, TileOp) and s.attr("wgmma") for s in walk_stmts(kernel.body))
        # per-thread code (the thread index in an index or a condition): each thread runs it
        self.per_thread = uses_thread_index(kernel.body)
        self.thread: int | None = None  # the thread running now (per-thread code), None: the whole block
        self.thread_dims = kernel.block_threads
        self._thread_locals: dict[int, dict[str, np.ndarray]] = {}  # thread -> its registers (T.alloc_local)
        self._kept_locals = False
        self._window: dict[str, dict[tuple[str, tuple[int, ...]], _Touch]] = {"shared": {}, "global": {}}
        self._in_atomic = False
        self._shuffling = False  # a statement every thread runs together, its values before its stores
        self._collective_cache: dict[int, bool] = {}
        if self.per_thread:
            if kernel.barriers or wgmma:
                raise Unsupported(None, "per-thread code in a kernel with mbarriers or asynchronous WGMMAs is not "
                                  "modelled")
            if kernel.onchip_views:
                raise Unsupported(None, "T.reshape of an on-chip buffer in per-thread code is not modelled")
            grouped = False  # a branch on a range of the thread index is a per-thread condition
        self.sync = WarpGroups(kernel.threads or 128, dict(kernel.barriers)) if grouped or kernel.barriers or wgmma \
            else None
        if self.sync is not None and kernel.onchip_views:  # the groups' ordering is tracked per buffer name
            raise Unsupported(None, "T.reshape of an on-chip buffer in a kernel with warp groups or barriers is not "
                              "modelled")
        self._default_group = (0, kernel.threads or 128)  # the whole block, outside its warp groups
        self._fragment_group: dict[str, tuple[int, int]] = {}
        self._groups: Any = None  # the warp groups running side by side now (schedule.Groups)

    # -- driving --
    def run(self) -> Trace:
        from .tile_ops import HANDLERS  # handlers need Machine; imported late to keep one direction
        self.handlers = HANDLERS
        self.launch(self.kernel.grid, self.kernel.body, dict(self.sizes))
        origins = {}
        if self.record_origins:
            for buf in self.kernel.params:
                array = np.full(self.shapes[buf.name], frozenset(), dtype=object)
                for (name, index), lines in self.origin.items():
                    if name == buf.name:
                        array[index] = lines
                origins[buf.name] = array
        return Trace(self.globals, self.writers, self.conflicts, self.faults, self.written_values, self.lines,
                     self.conflict_cells, list(self.auto_guarded.values()), origins, self.reads, self.edge_reads,
                     self.stores, self.read_by)

    def launch(self, grid: tuple[GridAxis, ...], body: tuple[Stmt, ...], env: dict[str, Any],
               continues: bool = False) -> None:
        """Every block of ``grid`` runs ``body`` with fresh on-chip buffers, one after another
        (``continues``: the blocks after a ``T.sync_grid()``, their on-chip memory ``KEPT``)."""
        extents = [eval_size(axis.extent, self.sizes) for axis in grid]
        outer, self.launch_start = self.launch_start, len(self.blocks)
        for block in itertools.product(*(range(max(e, 0)) for e in extents)):
            self.block, self.block_id = block, len(self.blocks)
            self.blocks.append(block)
            self.locals = {buf.name: np.full(self.shapes[buf.name], KEPT if continues else None, dtype=object)
                           for buf in self.kernel.allocs if buf.scope != GLOBAL}
            for view, base in self.kernel.onchip_views:  # the same memory: a numpy view of the block's array
                self.locals[view.name] = self.locals[base].reshape(self.shapes[view.name])
            if self.record_origins:  # on-chip memory is fresh per block
                local = {buf.name for buf in self.kernel.allocs if buf.scope != GLOBAL} | \
                    {view.name for view, _ in self.kernel.onchip_views}
                self.origin = {key: lines for key, lines in self.origin.items() if key[0] not in local}
            if self.sync is not None:
                self.sync.reset()
                self.sync.group = self._default_group
                self._fragment_group = {}
            block_env = {**env, **{axis.var: value for axis, value in zip(grid, block)}}
            if self.per_thread:
                self._thread_locals, self._kept_locals = {}, continues
                self._window = {"shared": {}, "global": {}}
                self._lockstep(body, block_env, self._all_threads())
            else:
                self.exec_block(body, block_env)
        self.launch_start = outer

    def exec_block(self, stmts: tuple[Stmt, ...], env: dict[str, Any]) -> None:
        position = 0
        while position < len(stmts):
            if self._groups is not None:
                self._groups.check()
            stmt = stmts[position]
            side_by_side = self._side_by_side(stmts, position)
            if len(side_by_side) > 1:
                self._run_side_by_side(side_by_side, env)
                position += len(side_by_side)
                continue
            try:
                self.exec_stmt(stmt, env)
            except InfinityArithmetic:
                raise InfiniteValue(getattr(stmt, "line", None), "arithmetic on an infinity is not modelled") from None
            position += 1

    def _side_by_side(self, stmts: tuple[Stmt, ...], position: int) -> list[If]:
        """The consecutive warp-group branches of the block from ``position`` on, over disjoint
        thread ranges: they run at the same time."""
        if self.sync is None or self.sync.group != self._default_group:
            return []
        chain: list[If] = []
        for stmt in stmts[position:]:
            group = _warp_group(stmt) if isinstance(stmt, If) else None
            if group is None or group == self._default_group or \
                    any(group[0] < other[1] and other[0] < group[1] for other in map(_warp_group, chain)):
                break
            chain.append(stmt)
        return chain

    def _run_side_by_side(self, chain: list[If], env: dict[str, Any]) -> None:
        """Run the groups of ``chain`` as one schedule the barriers allow (``schedule.Groups``)."""
        from .schedule import Groups
        outer_lines = list(self._loop_lines)

        def save() -> tuple:
            return self.sync.group, list(self._loop_lines), set(self._reads)

        def restore(state: tuple) -> None:
            self.sync.group, self._loop_lines, self._reads = state[0], list(state[1]), set(state[2])

        def body(stmt: If) -> Callable[[], None]:
            def run() -> None:
                group = _warp_group(stmt)
                self.sync.group, self._loop_lines, self._reads = self._default_group, list(outer_lines), set()
                self.sync.fork(group)
                self.sync.group = group
                self.exec_block(stmt.then, dict(env))
            return run
        groups = Groups([body(stmt) for stmt in chain], save, restore)
        self._groups, self.sync.scheduler = groups, groups
        try:
            groups.run()
        finally:
            self._groups, self.sync.scheduler = None, None

    def exec_stmt(self, stmt: Stmt, env: dict[str, Any]) -> None:
        if isinstance(stmt, Loop):
            extent = self.index(stmt.extent, env)
            self._loop_lines.append(stmt.line)
            for value in range(extent):
                env[stmt.var] = value
                self.exec_block(stmt.body, env)
            self._loop_lines.pop()
            env.pop(stmt.var, None)
        elif isinstance(stmt, If) and _warp_group(stmt) and self.per_thread:  # one thread, in per-thread code
            lo, hi = _warp_group(stmt)
            self.exec_block(stmt.then if lo <= env[THREAD_INDEX[0]] < hi else stmt.orelse, env)
        elif isinstance(stmt, If) and _warp_group(stmt):
            group = _warp_group(stmt)
            if group == self._default_group:  # every thread: the block itself
                self.exec_block(stmt.then, env)
                return
            if self.sync.group != self._default_group:
                raise Unsupported(stmt.line, f"the warp group of the threads {group[0]}..{group[1] - 1} inside the one "
                                  f"of the threads {self.sync.group[0]}..{self.sync.group[1] - 1} is not modelled")
            self.sync.fork(group)
            outer, self.sync.group = self.sync.group, group
            self.exec_block(stmt.then, env)
            self.sync.group = outer
        elif isinstance(stmt, If):
            cond = self.value(stmt.cond, env, stmt.line)
            if not isinstance(cond, (bool, np.bool_)):
                raise Unsupported(stmt.line, "branching on tensor data is not modelled")
            self._loop_lines.append(stmt.line)  # what the branch stores came through its condition too
            self.exec_block(stmt.then if cond else stmt.orelse, env)
            self._loop_lines.pop()
        elif isinstance(stmt, Store):
            index = tuple(self.index(i, env) for i in stmt.indices)
            value = self.value(stmt.value, env, stmt.line)
            guarded = self._auto_guarded(stmt.buffer, index, stmt.line, "writes")
            if stmt.atomic:
                self._in_atomic = True  # the read of the atomic update itself
                try:
                    current = self.load(stmt.buffer, index, stmt.line, guarded=guarded)
                finally:
                    self._in_atomic = False
                value = self.backend.add(current, value)
            self.store(stmt.buffer, index, value, stmt.line, atomic=stmt.atomic, guarded=guarded)
        elif isinstance(stmt, While):
            for _ in range(_MAX_WHILE):
                cond = self.value(stmt.cond, env, stmt.line)
                if not isinstance(cond, (bool, np.bool_)):
                    raise Unsupported(stmt.line, "a while loop whose condition depends on tensor data is not modelled")
                if not cond:
                    return
                self.exec_block(stmt.body, env)
            raise Unsupported(stmt.line, f"a while loop ran {_MAX_WHILE} times without ending at the reduced sizes")
        elif isinstance(stmt, GridLaunch):
            self.launch(stmt.axes, stmt.body, env, stmt.continues)
        elif isinstance(stmt, TileOp):
            handler = self.handlers.get(stmt.kind)
            if handler is None:
                raise Unsupported(stmt.line, f"tile op {stmt.kind} has no semantics")
            handler(self, stmt, env)

    # -- memory --
    def array(self, name: str) -> np.ndarray:
        if self.per_thread and self.scopes[name].startswith("local"):  # each thread's own registers
            if self.thread is None:
                raise Unsupported(None, f"{name} is in each thread's registers: its use by the whole block beside "
                                  "per-thread code is not modelled")
            registers = self._thread_locals.setdefault(self.thread, {})
            if name not in registers:
                registers[name] = np.full(self.shapes[name], KEPT if self._kept_locals else None, dtype=object)
            return registers[name]
        return self.globals[name] if self.scopes[name] == GLOBAL else self.locals[name]

    def in_bounds(self, name: str, index: tuple[int, ...]) -> bool:
        shape = self.shapes[name]
        return len(index) == len(shape) and all(0 <= i < n for i, n in zip(index, shape))

    def _auto_guarded(self, name: str, index: tuple[int, ...], line: int | None, verb: str) -> bool:
        """TileLang's lowering (LegalizeSafeMemoryAccess, on by default) guards every element
        access to a global buffer it cannot prove in bounds: an out-of-bounds store is skipped,
        a load reads 0.  Such accesses are kept as notes, not faults."""
        if self.scopes[name] != GLOBAL or not self.kernel.auto_guard:
            return False
        if not self.in_bounds(name, index) and (verb, line) not in self.auto_guarded:
            self.auto_guarded[(verb, line)] = Fault("auto-guarded", line, f"{verb} {name}{list(index)} outside its "
                                                    f"shape {list(self.shapes[name])}")
        return True

    def load(self, name: str, index: tuple[int, ...], line: int | None, guarded: bool) -> Any:
        """Read one element; ``guarded`` accesses (tile ops, global buffers) read 0 out of bounds
        as TileLang's lowering makes them do, unguarded ones (on-chip buffers) are faults."""
        if not self.in_bounds(name, index):
            if not guarded:
                self.fault("out-of-bounds", line, f"reads {name}{list(index)} outside its shape {list(self.shapes[name])}")
            elif self.scopes[name] == GLOBAL and line is not None:
                self.edge_reads.add(line)
            return False if self.dtypes.get(name) == "bool" else self.backend.const(0)
        if self.sync is not None:
            self._synced(name, index, False, line)
        if self.per_thread and not self._in_atomic:
            self._touch(name, index, False, None, line)
        value = self.array(name)[index]
        if self.scopes[name] == GLOBAL and line is not None:
            self._note_read(name, index, line)
        if self.record_origins:
            self._reads |= self.origin.get(self._cell(name, index), frozenset())
        if value is None:
            self.fault("uninitialized-read", line, f"reads {name}{list(index)} before anything was written to it", name)
            return self.backend.const(0)
        if value is KEPT:
            raise Unsupported(line, f"reads {name}{list(index)}, which the block wrote before a T.sync_grid() and "
                              "kept on chip: a value kept across the grid barrier is not modelled")
        return value

    def _cell(self, name: str, index: tuple[int, ...]) -> tuple[str, tuple[int, ...]]:
        """The element of the buffer a view's element is: a T.reshape view of the block's buffer, or
        a global tensor viewed under another shape (``T.Tensor(shape, dtype, out.data)``): origins
        follow memory, so a value stored through the view came through the same lines."""
        base = self._onchip_base.get(name) or self._view_base.get(name)
        if base is None:
            return name, index
        flat = int(np.ravel_multi_index(index, self.shapes[name]))
        return base, tuple(int(i) for i in np.unravel_index(flat, self.shapes[base]))

    def _note_read(self, name: str, index: tuple[int, ...], line: int) -> None:
        base = self._view_base.get(name)
        if base is not None:  # a view's element is its tensor's element at the same flat position
            flat = int(np.ravel_multi_index(index, self.shapes[name]))
            name, index = base, tuple(int(i) for i in np.unravel_index(flat, self.shapes[base]))
        self.reads.setdefault((name, index), set()).add(line)
        self.read_by.setdefault((name, index), set()).add((line, self.block_id))

    def store(self, name: str, index: tuple[int, ...], value: Any, line: int | None, atomic: bool, guarded: bool) -> None:
        if self.scopes[name] == GLOBAL:
            base = self._view_base.get(name, name)
            self.stores[base] = self.stores.get(base, 0) + 1
        if not self.in_bounds(name, index):
            if not guarded:
                self.fault("out-of-bounds", line, f"writes {name}{list(index)} outside its shape {list(self.shapes[name])}")
            return
        if self.sync is not None:
            self._synced(name, index, True, line)
        if self.per_thread:
            self._touch(name, index, True, value, line, atomic)
        self.array(name)[index] = value
        if self.record_origins:
            self.origin[self._cell(name, index)] = frozenset(line for line in self._reads | {line, *self._loop_lines} if line is not None)
            self._reads = set()
        if self.scopes[name] != GLOBAL:
            return
        self.lines[name][index] = line
        writer = self.writers[name]
        previous = int(writer[index])
        if previous < self.launch_start:  # unwritten, or written by a launch that has finished
            writer[index] = self.block_id
            self.plain[name][index] = False
        elif previous != self.block_id and (not atomic or self.plain[name][index]):
            self.conflict_cells.setdefault(name, set()).add(index)
            if not any(c.buffer == name and c.line == line for c in self.conflicts):
                self.conflicts.append(Conflict(name, index, (self._block_of(previous), self.block), line))
        if not atomic:
            self.plain[name][index] = True
        if self.record_values:
            self.written_values.setdefault((name, index), []).append((self.block, value))

    def _synced(self, name: str, index: tuple[int, ...], write: bool, line: int | None) -> None:
        """An access under warp groups: ordered with the other groups' (``sync.WarpGroups``); a
        fragment lives in the registers of one group's threads, so no other group may use it (its
        order with that group's asynchronous MMAs, a WGMMA accumulating into it, is tracked too)."""
        scope, group = self.scopes[name], self.sync.group
        if scope != GLOBAL and not scope.startswith("shared") and group is not None:
            owner = self._fragment_group.setdefault(name, group)
            if owner != group:
                raise Unsupported(line, f"{name} is in the registers of the threads {owner[0]}..{owner[1] - 1} and "
                                  f"used by the threads {group[0]}..{group[1] - 1} too, which is not modelled")
        self.sync.access(name, index, write, line, onchip=scope != GLOBAL)

    # -- per-thread code --
    def _all_threads(self) -> tuple[int, ...]:
        return tuple(range(int(np.prod(self.thread_dims))))

    def _thread_env(self, env: dict[str, Any], thread: int) -> dict[str, Any]:
        out, rest = dict(env), thread
        for axis, extent in enumerate(self.thread_dims):
            out[THREAD_INDEX[axis]], rest = rest % extent, rest // extent
        return out

    def _shown_thread(self, thread: int) -> str:
        if thread == _BLOCK:
            return "a tile op of the whole block"
        axes = max((a + 1 for a, extent in enumerate(self.thread_dims) if extent > 1), default=1)
        index = [self._thread_env({}, thread)[THREAD_INDEX[a]] for a in range(axes)]
        return f"thread {index[0] if axes == 1 else tuple(index)}"

    def _collective(self, stmt: Stmt) -> bool:
        """A statement the whole block runs together (a tile op, a T.Parallel loop, a barrier), or
        one that holds such a statement."""
        key = id(stmt)
        if key not in self._collective_cache:
            self._collective_cache[key] = any(isinstance(s, (TileOp, GridLaunch)) or
                                              (isinstance(s, Loop) and s.kind == PARALLEL)
                                              for s in walk_stmts((stmt,)))
        return self._collective_cache[key]

    def _lockstep(self, stmts: tuple[Stmt, ...], env: dict[str, Any], threads: tuple[int, ...]) -> None:
        """Per-thread code, statement by statement: every thread runs a statement before any runs
        the next one.  That is the order of the real kernel for on-chip memory when TileLang's
        ThreadSync pass puts a __syncthreads between two statements whose shared-memory accesses
        conflict across threads (the assumption, as for warp groups); accesses of one statement by
        different threads are unordered, and so are global accesses between two T.sync_threads()
        (``_touch`` refuses a conflict among them as a race)."""
        for stmt in stmts:
            try:
                if self._collective(stmt):
                    self._block_step(stmt, env, threads)
                else:
                    self._thread_step(stmt, env, threads)
            except InfinityArithmetic:
                raise InfiniteValue(getattr(stmt, "line", None), "arithmetic on an infinity is not modelled") from None

    def _per_thread(self, expr: Expr, env: dict[str, Any], threads: tuple[int, ...],
                    line: int | None) -> dict[int, Any]:
        """The value of ``expr`` in each thread (once when it reads neither the thread index nor a
        thread's registers)."""
        if not any(isinstance(e, Var) and e.name in THREAD_INDEX or
                   isinstance(e, Load) and self.scopes.get(e.buffer, "").startswith("local") for e in walk_expr(expr)):
            value = self.value(expr, env, line)
            return {t: value for t in threads}
        out = {}
        for t in threads:
            self.thread = t
            try:
                out[t] = self.value(expr, self._thread_env(env, t), line)
            finally:
                self.thread = None
        return out

    def _condition(self, stmt: If, env: dict[str, Any], threads: tuple[int, ...]) -> dict[int, bool]:
        group = _warp_group(stmt)
        if group is not None:
            return {t: group[0] <= self._thread_env({}, t)[THREAD_INDEX[0]] < group[1] for t in threads}
        values = self._per_thread(stmt.cond, env, threads, stmt.line)
        if not all(isinstance(v, (bool, np.bool_)) for v in values.values()):
            raise Unsupported(stmt.line, "branching on tensor data is not modelled")
        return {t: bool(v) for t, v in values.items()}

    def _block_step(self, stmt: Stmt, env: dict[str, Any], threads: tuple[int, ...]) -> None:
        """A statement every thread runs together, or a loop or branch around such statements,
        whose trip count or condition must then be the same in every thread."""
        line = getattr(stmt, "line", None)
        if isinstance(stmt, Loop) and stmt.kind != PARALLEL:
            extents = set(self._per_thread(stmt.extent, env, threads, line).values())
            if len(extents) != 1:
                raise Unsupported(line, "a loop around a tile op or barrier whose trip count differs between "
                                  "threads is not modelled")
            self._uniform_loop(stmt, env, threads, int(extents.pop()))
            return
        if isinstance(stmt, If):
            taken = set(self._condition(stmt, env, threads).values())
            if len(taken) != 1:
                raise Unsupported(line, "a tile op, T.Parallel loop or barrier that only some of the threads reach "
                                  "is not modelled")
            self._uniform_branch(stmt, env, threads, taken.pop())
            return
        if isinstance(stmt, While):
            raise Unsupported(line, "a while loop around a tile op or barrier in per-thread code is not modelled")
        if threads != self._all_threads():
            raise Unsupported(line, "a tile op, T.Parallel loop or barrier that only some of the threads reach is "
                              "not modelled")
        if isinstance(stmt, TileOp) and stmt.kind == SYNC_THREADS:  # every thread's accesses before, all after
            self._window = {"shared": {}, "global": {}}
            return
        if uses_thread_index((stmt,)):
            raise Unsupported(line, "a tile op or T.Parallel loop that reads the thread index is not modelled")
        registers = {name for s in walk_stmts((stmt,)) for name in _buffers(s)
                     if self.scopes.get(name, "").startswith("local")}
        if registers and isinstance(stmt, TileOp) and stmt.kind == "fill":  # each thread fills its own registers
            self._each_thread_runs(stmt, env, threads)
            return
        if registers:
            raise Unsupported(line, f"a tile op or T.Parallel loop on {sorted(registers)[0]}, in each thread's "
                              "registers, is not modelled")
        self.exec_stmt(stmt, env)

    def _uniform_loop(self, stmt: Loop, env: dict[str, Any], threads: tuple[int, ...], trips: int) -> None:
        """A loop every thread runs ``trips`` times: its body statement by statement, all threads together."""
        self._loop_lines.append(stmt.line)
        for value in range(trips):
            env[stmt.var] = value
            self._lockstep(stmt.body, env, threads)
        self._loop_lines.pop()
        env.pop(stmt.var, None)

    def _uniform_branch(self, stmt: If, env: dict[str, Any], threads: tuple[int, ...], taken: bool) -> None:
        """A branch every thread takes the same way: its statements, all threads together."""
        self._loop_lines.append(stmt.line)  # what the branch stores came through its condition too
        self._lockstep(stmt.then if taken else stmt.orelse, env, threads)
        self._loop_lines.pop()

    def _each_thread_runs(self, stmt: Stmt, env: dict[str, Any], threads: tuple[int, ...]) -> None:
        """``stmt`` run whole by each thread in turn, with its own index and registers."""
        for t in threads:
            self.thread = t
            try:
                self.exec_stmt(stmt, self._thread_env(env, t))
            finally:
                self.thread = None

    def _thread_step(self, stmt: Stmt, env: dict[str, Any], threads: tuple[int, ...]) -> None:
        """Per-thread statements: a loop with the same trip count in every thread and a branch every
        thread takes the same way go on statement by statement; any other statement is one step,
        each thread running it whole."""
        if isinstance(stmt, Loop):
            extents = set(self._per_thread(stmt.extent, env, threads, stmt.line).values())
            if len(extents) == 1:
                self._uniform_loop(stmt, env, threads, int(extents.pop()))
                return
        elif isinstance(stmt, If):
            taken = self._condition(stmt, env, threads)
            if len(set(taken.values())) == 1:
                self._uniform_branch(stmt, env, threads, next(iter(taken.values())))
                return
        if isinstance(stmt, Store) and threads == self._all_threads() and \
                any(isinstance(e, Call) and e.fn == WARP_SHUFFLE for e in walk_expr(stmt.value)):
            self._shuffled_store(stmt, env, threads)
        else:
            self._each_thread_runs(stmt, env, threads)
        self._window["shared"] = {}

    def _shuffled_store(self, stmt: Store, env: dict[str, Any], threads: tuple[int, ...]) -> None:
        """A store of a warp shuffle: every lane gives its value before any lane's store (the
        shuffle reads the other lane's register as it is before the statement)."""
        if stmt.atomic:
            raise Unsupported(stmt.line, "an atomic update of a warp shuffle is not modelled")
        done = []
        self._shuffling = True
        try:
            for t in threads:
                self.thread = t
                thread_env = self._thread_env(env, t)
                index = tuple(self.index(i, thread_env) for i in stmt.indices)
                done.append((t, index, self.value(stmt.value, thread_env, stmt.line)))
        finally:
            self._shuffling, self.thread = False, None
        for t, index, value in done:
            self.thread = t
            try:
                guarded = self._auto_guarded(stmt.buffer, index, stmt.line, "writes")
                self.store(stmt.buffer, index, value, stmt.line, atomic=False, guarded=guarded)
            finally:
                self.thread = None

    def _shuffle(self, expr: Call, env: dict[str, Any], line: int | None) -> Any:
        """``__shfl_sync(mask, value, lane, width)`` in the running thread: ``value`` as the lane
        ``lane % width`` of the caller's group of ``width`` lanes (a power of two up to 32) of its
        warp (32 consecutive threads) computes it.  Every lane of the warp must run it together."""
        if not self._shuffling or self.thread is None:
            raise Unsupported(line, "a warp shuffle outside a store every thread of the block runs together is not "
                              "modelled")
        mask, lane, width = (self.value(expr.args[i], env, line) for i in (0, 2, 3))
        if not all(_is_int(v) for v in (mask, lane, width)) or width not in (1, 2, 4, 8, 16, 32):
            raise Unsupported(line, f"a warp shuffle over {width} lanes (not a power of two up to 32) is not "
                              "modelled")
        count = len(self._all_threads())
        warp = self.thread - self.thread % 32
        lanes = min(32, count - warp)  # the lanes of this warp the block has
        if int(mask) & ((1 << lanes) - 1) != (1 << lanes) - 1:
            raise Unsupported(line, f"a warp shuffle with the mask {int(mask):#x}, which leaves out lanes of the "
                              "warp, is not modelled")
        own = self.thread % 32
        source = warp + (own & ~(int(width) - 1)) + int(lane) % int(width)
        if source >= count:
            raise Unsupported(line, f"a warp shuffle from lane {source - warp}, past the block's {count} threads, is "
                              "not modelled")
        caller = self.thread
        self.thread = source
        try:
            return self.value(expr.args[1], self._thread_env(env, source), line)
        finally:
            self.thread = caller

    def _touch(self, name: str, index: tuple[int, ...], write: bool, value: Any, line: int | None,
               atomic: bool = False) -> None:
        """One access in per-thread code: a conflict with another thread's unordered access (a write
        and a read or a write of one element; atomic updates commute among themselves, equal values
        written by several threads leave that value) is a race, refused."""
        scope = self.scopes[name]
        if scope.startswith("local"):  # the thread's own registers
            return
        if scope == FRAGMENT:
            if self.thread is not None:
                raise Unsupported(line, f"{name} is a fragment, its elements spread over the threads by a layout: "
                                  "its use in per-thread code is not modelled")
            return
        actor = _BLOCK if self.thread is None else self.thread
        kind = "global" if scope == GLOBAL else "shared"
        if kind == "shared" and actor == _BLOCK:  # tile ops: ordered with per-thread code by ThreadSync
            return
        cell = self._window[kind].setdefault(self._cell(name, index), _Touch())

        def other(actors: set[int]) -> int | None:
            return next((a for a in sorted(actors) if a != actor), None)
        if write and not atomic:
            clash = other(cell.readers) if other(cell.readers) is not None else other(cell.atomics)
            if clash is None and other(cell.writers) is not None and not _same_value(cell.value, value):
                clash = other(cell.writers)
        elif write:
            clash = other(cell.readers) if other(cell.readers) is not None else other(cell.writers)
        else:
            clash = other(cell.writers) if other(cell.writers) is not None else other(cell.atomics)
        if clash is not None:
            between = "before the next T.sync_threads()" if kind == "global" else "in the same statement"
            raise Unsupported(line, f"{name}{list(index)} is {'written' if write else 'read'} by "
                              f"{self._shown_thread(actor)} and used by {self._shown_thread(clash)} {between}, "
                              "with no barrier between them: a race")
        (cell.atomics if atomic else cell.writers if write else cell.readers).add(actor)
        if write and not atomic:
            cell.value = value

    def _block_of(self, block_id: int) -> tuple[int, ...]:
        return self.blocks[block_id]

    def fault(self, check: str, line: int | None, message: str, buffer: str | None = None) -> None:
        if (check, line) not in self._fault_lines:
            self._fault_lines.add((check, line))
            self.faults.append(Fault(check, line, message, buffer))

    # -- expressions --
    def convert(self, value: Any, source: str | None, target: str | None) -> Any:
        """A dtype conversion with its compiled semantics (the registry's ``convert`` rule):
        a float truncated toward zero to an integer, saturated to fp8, ..."""
        if target is None:
            return value
        if isinstance(value, (bool, np.bool_, int, np.integer)):  # indices, masks, constants: concrete
            result = _convert_index(value, target)
            return self.backend.const(result) if isinstance(result, float) else result
        return self.backend.convert(value, source or "float32", target)

    def bits(self, expr: Call, values: list[Any], line: int | None) -> Any:
        """A typed integer operation (``bits``) on integers the run knows: indices, loop
        counters, elements of sampled integer tensors; on any other value it is not modelled
        (a sum or product of such values keeps the real arithmetic it had)."""
        known = all(_is_int(v) and not isinstance(v, (bool, np.bool_)) for v in values)
        if expr.fn == IN_RANGE:
            return fits(int(values[0]), expr.dtype, line, f"{expr.args[0]}") if known else values[0]
        if not known:
            raise Unsupported(line, f"{expr.fn} of a tensor value is not modelled (only of integers the run knows: "
                              "indices and elements of sampled integer tensors)")
        values = [int(v) for v in values]
        if expr.fn == REINTERPRET:
            number = reinterpret(values[0], expr.source, expr.dtype, line)
            return number if isinstance(number, int) else self.backend.const(number)
        return bit_operation(expr.fn, values, expr.dtype, line)

    def index(self, expr: Expr, env: dict[str, Any]) -> int:
        value = self.value(expr, env, None)
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
            raise Unsupported(None, f"index {expr} does not evaluate to an integer")
        return int(value)

    def value(self, expr: Expr, env: dict[str, Any], line: int | None) -> Any:
        backend = self.backend
        if isinstance(expr, Const):
            return expr.value if isinstance(expr.value, (int, bool)) else backend.const(expr.value)
        if isinstance(expr, Var):
            if expr.name not in env:
                raise Unsupported(line, f"{expr.name} has no value on the reduced shapes")
            return env[expr.name]
        if isinstance(expr, Load):
            index = tuple(self.index(i, env) for i in expr.indices)
            return self.load(expr.buffer, index, line, guarded=self._auto_guarded(expr.buffer, index, line, "reads"))
        if isinstance(expr, BinOp):
            a, b = self.value(expr.a, env, line), self.value(expr.b, env, line)
            if _is_int(a) and _is_int(b):
                return _int_op(expr.op, a, b)
            a, b = _lift(backend, a), _lift(backend, b)
            if expr.op in ("<", "<=", ">", ">=", "==", "!="):
                return backend.compare(expr.op, a, b)
            if expr.op in ("and", "or"):
                return backend.logic(expr.op, a, b)
            method = {"+": backend.add, "-": backend.sub, "*": backend.mul, "/": backend.div,
                      "max": backend.max, "min": backend.min}.get(expr.op)
            if method is None:
                raise Unsupported(line, f"operator {expr.op} on tensor values is not modelled")
            return method(a, b)
        if isinstance(expr, UnOp):
            a = self.value(expr.a, env, line)
            if expr.op == "not":
                return not a if isinstance(a, bool) else backend.logic("not", a, a)
            return -a if _is_int(a) else backend.neg(a)
        if isinstance(expr, Call):
            if expr.fn == WARP_SHUFFLE:
                return self._shuffle(expr, env, line)
            if expr.fn == "cast":
                return self.convert(self.value(expr.args[0], env, line), expr.source, expr.dtype)
            if expr.fn in (*BIT_OPERATIONS, REINTERPRET, IN_RANGE):
                return self.bits(expr, [self.value(arg, env, line) for arg in expr.args], line)
            args = [_lift(backend, self.value(arg, env, line)) for arg in expr.args]
            return backend.call(expr.fn, args)
        if isinstance(expr, Select):
            cond = self.value(expr.cond, env, line)
            if isinstance(cond, (bool, np.bool_)):
                return self.value(expr.a if cond else expr.b, env, line)
            return backend.select(cond, _lift(backend, self.value(expr.a, env, line)),
                                  _lift(backend, self.value(expr.b, env, line)))
        raise Unsupported(line, f"expression {expr} is not modelled")


_BLOCK = -1  # the whole block (a tile op) as the accessor of a global element in per-thread code


@dataclass
class _Touch:
    """Who accessed one element since the last barrier (per-thread code)."""

    writers: set[int] = field(default_factory=set)
    readers: set[int] = field(default_factory=set)
    atomics: set[int] = field(default_factory=set)
    value: Any = None


def _same_value(a: Any, b: Any) -> bool:
    """The same value, whatever the order two threads write it in (a term by structure)."""
    if a is b:
        return True
    eq = getattr(a, "eq", None)
    if callable(eq) and type(a) is type(b):
        return bool(eq(b))
    return isinstance(a, (int, float)) and isinstance(b, (int, float)) and type(a) is type(b) and a == b


def _buffers(stmt: Stmt) -> set[str]:
    """The buffers a statement itself names (its regions, loads and store target)."""
    names = {stmt.buffer} if isinstance(stmt, Store) else set()
    if isinstance(stmt, TileOp):
        names |= {op.buffer for op in stmt.operands if isinstance(op, Region)}
    names |= {e.buffer for top in stmt_exprs(stmt) for e in walk_expr(top) if isinstance(e, Load)}
    return names


def _convert_index(value: Any, target: str) -> Any:
    """A cast of an index-valued (concrete) integer or truth value: exact, as compiled."""
    from verifier.rules.casts import float_format, int_range, kind, round_value
    if kind(target) == "bool":
        return bool(value)
    if kind(target) == "float":  # the integer itself when the format holds it (lifted where it meets
        fmt = float_format(target)  # tensor values), else its rounding to the format
        number = round_value(int(value), fmt) if fmt else float(np.float32(int(value))) if target == "float32" \
            else float(int(value))
        return int(value) if number == int(value) else number
    lo, hi = int_range(target)
    return (int(value) - lo) % (hi - lo + 1) + lo


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, bool, np.integer))


def _lift(backend: Any, value: Any) -> Any:
    return backend.const(value) if _is_int(value) and not isinstance(value, bool) else value


def _int_op(op: str, a: int, b: int) -> Any:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op in ("//", "/"):
        return a // b
    if op == "%":
        return a % b
    if op == "ceildiv":
        return -(-a // b)
    if op == "max":
        return max(a, b)
    if op == "min":
        return min(a, b)
    if op in ("<<", ">>", "&", "|", "^"):
        return int_bits(op, int(a), int(b))
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b,
            "and": a and b, "or": a or b}[op]


def _warp_group(stmt: If) -> tuple[int, int] | None:
    cond = stmt.cond
    if isinstance(cond, Call) and cond.fn == WARP_GROUP:
        return (int(cond.args[0].value), int(cond.args[1].value))
    return None
