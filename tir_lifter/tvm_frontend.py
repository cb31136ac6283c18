"""Lift real ``PrimFunc`` objects built by TileLang itself (needs ``pip install tilelang``).

The user's file is imported and its kernel factories are called with the sizes the
checker asks for (so TileLang builds the reduced kernel itself); the resulting PrimFunc
is walked node by node with a dispatch table from TVM node types to converters, and
every ``tl.tileop.*`` call is mapped to the same :class:`TileOp` the text frontend makes.
TVM's own ``stmt_functor.post_order_visit`` lists every intrinsic the function calls, so
an unknown one is reported as unsupported up front instead of being skipped.

PrimFuncs carry no source spans; lines are transferred from the text reading of the same
file when the two agree statement by statement.
"""
from __future__ import annotations

import importlib.util
import inspect
import os
import sys
from dataclasses import replace
from typing import Any, Callable

from .bits import IN_RANGE, REINTERPRET, is_integer_dtype, width
from .errors import LiftInputError, Unsupported
from .program import (FRAGMENT, GLOBAL, LOCAL, PARALLEL, PIPELINED, SERIAL, SHARED, BinOp, Buffer, Call, Const,
                      Expr, GridAxis, GridLaunch, If, Kernel, LiftResult, Load, Loop, Region, Select, Stmt, Store, TileOp,
                      UnOp, Var, SYNC_THREADS, THREAD_INDEX, WARP_GROUP, While, fold_const, uses_thread_index,
                      walk_stmts, without_block_barriers)


def available() -> bool:
    """True when TileLang (and its bundled TVM) can be imported here."""
    try:
        import tilelang  # noqa: F401
        import tvm  # noqa: F401
    except Exception:  # any import-time failure (missing CUDA libraries, ABI) means "not here"
        return False
    return True


def import_user_file(path: str) -> Any:
    """Import the kernel file as a module without running its ``__main__`` block."""
    name = "_lifted_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise LiftInputError("expected an importable Python file", path, 1)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the user's module failed: report where, as input error
        raise LiftInputError(f"expected the file to import with tilelang installed ({type(exc).__name__}: {exc})",
                             path, 1) from None
    finally:
        sys.path.pop(0)
    return module


def build_primfunc(module: Any, name: str, sizes: dict[str, int]) -> Any:
    """The PrimFunc named ``name``: a module-level PrimFunc, or a factory called with the
    integer sizes it accepts (other parameters keep their defaults)."""
    from tvm import tirx
    obj = getattr(module, name, None)
    if isinstance(obj, tirx.PrimFunc):
        return obj
    if not callable(obj):
        raise LiftInputError(f"expected {name!r} to be a kernel factory or a PrimFunc", getattr(module, "__file__", None), 1)
    params = inspect.signature(obj).parameters
    kwargs = {k: v for k, v in sizes.items() if k in params}
    func = obj(**kwargs)
    if not isinstance(func, tirx.PrimFunc):
        func = getattr(func, "prim_func", func)  # tilelang.jit wrappers expose the PrimFunc
    if not isinstance(func, tirx.PrimFunc):
        raise LiftInputError(f"expected {name}(...) to return a PrimFunc", getattr(module, "__file__", None), 1)
    return func


def lift_module(path: str, kernel: str | None = None, sizes: dict[str, int] | None = None) -> LiftResult:
    """Lift the kernels of ``path`` through TileLang; ``sizes`` overrides the sizes the
    file binds (the checker passes the reduced ones)."""
    from .text_frontend import lift_source
    with open(path, encoding="utf-8") as handle:
        text = lift_source(handle.read(), path, kernel)
    module = import_user_file(path)
    result = LiftResult(references=text.references)
    for text_kernel in text.kernels:
        bound = {k: v for k, v in text_kernel.sizes if v is not None}
        bound.update(sizes or {})
        func = build_primfunc(module, text_kernel.name, bound)
        try:
            lifted = from_primfunc(func, text_kernel.name, path)
        except Unsupported as exc:
            result.unsupported.append((exc.line, exc.reason))
            continue
        result.kernels.append(transfer_lines(lifted, text_kernel))
    return result


# --- PrimFunc -> Kernel -------------------------------------------------------------------

# extern calls that only record a trace event for TileLang's IKET profiler (``iket.mark``,
# ``iket.range``): the macro stores a timestamp in the profiler's own trace slot and changes no
# value of the kernel (an optional payload is only read)
_TRACE_EXTERNS = {"TL_IKET_EVENT", "TL_IKET_EVENT_PAYLOAD_U32", "TL_IKET_EVENT_PAYLOAD_F32"}
# ``T.sync_threads()`` of the whole block: kept in per-thread code, where it orders the threads; a
# kernel run block-wide keeps its statements in program order anyway (a named barrier of some threads
# is not modelled)
_BLOCK_BARRIERS = {"tirx.tvm_storage_sync:shared", "tirx.tvm_storage_sync:shared.dyn"}
# calls evaluated for their effect on the hardware only (register budgets: ``T.set_max_nreg(n,
# inc)`` moves registers between warp groups, ``setmaxnreg``, and changes no value; trace events;
# the block's barrier; ``T.fence_proxy_async()``, which orders the threads' shared-memory accesses
# with the copy engine's and tensor core's after them, the order the interpreter's program order
# and ``sync`` already give them, so a kernel missing it is not caught): no statement of the program
_NO_OPS = {"tl.no_set_max_nreg", "tl.set_max_nreg", "tl.fence_proxy_async"} | \
    {f"tirx.call_extern:{name}" for name in _TRACE_EXTERNS}
_GEMMS = ("tl.tileop.gemm", "tl.tileop.tcgen05_gemm", "tl.tileop.wgmma_gemm")
_TILE_CALLS = {"tl.tileop.copy", "tl.tileop.fill", *_GEMMS, "tl.wait_wgmma", "tl.tileop.reduce",
               "tl.tileop.atomicadd",
               "tl.atomic_add_elem_op", "tl.region", "tl.access_ptr", "tl.launch_thread_idx", "tl.infinity",
               "tirx.exp", "tirx.exp2", "tirx.log", "tirx.log2", "tirx.sqrt", "tirx.rsqrt", "tirx.fabs", "tirx.tanh",
               "tirx.sigmoid", "tirx.if_then_else", "tir.exp", "tir.if_then_else", "tl.clamp",
               "tl.tileop.im2col", "tl.tileop.tma_copy", "tl.mbarrier_wait_parity", "tirx.ptx_arrive_barrier",
               "tl.sync_grid", "tirx.tvm_warp_shuffle", "tirx.reinterpret"} | \
    _NO_OPS | _BLOCK_BARRIERS | {
                   f"tirx.{name}" for name in ("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "shift_left",
                                               "shift_right")}


# ``T.use_swizzle``: blocks are renumbered by a bijection of the grid; every block still runs
# once, and the checks never depend on the order blocks run in
_HARMLESS_ATTRS = {"threadblock_swizzle_pattern"}


def _op_name(call: Any) -> str:
    op = call.op
    name = getattr(op, "name", str(op))
    if name == "tirx.call_extern" and call.args and type(call.args[0]).__name__ == "StringImm":
        return f"{name}:{call.args[0].value}"  # an extern call is known by the function it calls
    if name == "tirx.tvm_storage_sync":  # the whole block's barrier, or a named one of some threads
        return f"{name}:{call.args[0].value}" if len(call.args) == 1 else f"{name}:named barrier"
    return name


def from_primfunc(func: Any, name: str, source: str | None = None) -> Kernel:
    from tvm import tirx
    from tvm.tirx import stmt_functor
    unknown: list[str] = []
    harmless: dict[str, int] = {}  # calls inside attributes that do not change what is computed

    def visit(node: Any) -> None:
        if isinstance(node, tirx.AttrStmt) and str(node.attr_key) in _HARMLESS_ATTRS:
            def inner(sub: Any) -> None:
                if isinstance(sub, tirx.Call):
                    harmless[_op_name(sub)] = harmless.get(_op_name(sub), 0) + 1
            stmt_functor.post_order_visit(tirx.Evaluate(node.value), inner)
    stmt_functor.post_order_visit(func.body, visit)
    counts: dict[str, int] = {}

    def count(node: Any) -> None:
        if isinstance(node, tirx.Call):
            counts[_op_name(node)] = counts.get(_op_name(node), 0) + 1
    stmt_functor.post_order_visit(func.body, count)
    unknown = [name for name in counts if name not in _TILE_CALLS and counts[name] > harmless.get(name, 0)]
    if unknown:
        raise Unsupported(None, f"TileLang intrinsic {unknown[0]} is not modelled")
    walker = _Walker()
    for p in func.params:
        if p in func.buffer_map:
            walker.size_names(func.buffer_map[p])
    params = tuple(walker.buffer(func.buffer_map[p], GLOBAL) for p in func.params if p in func.buffer_map)
    walker.tensor_data = {func.buffer_map[p].data.__chandle__(): func.buffer_map[p]
                          for p in func.params if p in func.buffer_map}
    body, grid = _one_launch(walker.stmt(func.body))
    if not uses_thread_index(body):
        body = without_block_barriers(body)
    body, allocs = _fold_reduce_staging(body, walker.allocs)
    return Kernel(name=name, params=params, allocs=tuple(allocs), grid=grid, body=body,
                  sizes=(), threads=walker.threads, source=source, views=tuple(walker.views),
                  onchip_views=tuple(walker.onchip_views),
                  barriers=tuple(walker.barriers.items()), thread_dims=walker.thread_dims,
                  signature=tuple(func.buffer_map[p].name if p in func.buffer_map else p.name for p in func.params))


_SYNC_GRID = "sync_grid"


def _grid_phases(axes: tuple[GridAxis, ...], body: tuple[Stmt, ...]) -> tuple[GridLaunch, ...]:
    """One ``T.Kernel``'s blocks; a ``T.sync_grid()`` at the top of its body (every block
    reaches it, and none goes on before all have) splits it into launches run in turn over the
    same grid, the later ones continuing the blocks (their on-chip memory is not fresh: a read of
    what a block left there before the barrier is refused).  Inside a loop or branch it is not
    modelled (a barrier some blocks may skip, or several phases per iteration)."""
    phases: list[list[Stmt]] = [[]]
    for stmt in body:
        if isinstance(stmt, TileOp) and stmt.kind == _SYNC_GRID:
            phases.append([])
        else:
            phases[-1].append(stmt)
    if any(isinstance(s, TileOp) and s.kind == _SYNC_GRID for phase in phases for s in walk_stmts(tuple(phase))):
        raise Unsupported(None, "a T.sync_grid() inside a loop or branch is not modelled")
    return tuple(GridLaunch(axes, tuple(phase), None, number > 0) for number, phase in enumerate(phases))


def _one_launch(body: tuple[Stmt, ...]) -> tuple[tuple[Stmt, ...], tuple[GridAxis, ...]]:
    """A PrimFunc with one ``T.Kernel``: its statements over its grid; several launches stay
    :class:`GridLaunch` statements run in turn (the kernel's own grid is then empty)."""
    launches = [s for s in walk_stmts(body) if isinstance(s, GridLaunch)]
    if len(launches) != 1 or not any(stmt is launches[0] for stmt in body):  # several, or inside a loop/branch
        return body, ()
    out: list[Stmt] = []
    for stmt in body:
        out.extend(stmt.body if stmt is launches[0] else (stmt,))
    return tuple(out), launches[0].axes


def _fold_reduce_staging(body: tuple[Stmt, ...], allocs: list[Buffer]) -> tuple[tuple[Stmt, ...], list[Buffer]]:
    """TileLang stages a shared-memory reduce source through a fragment it creates
    (``copy(A_s, A_s_frag); reduce(A_s_frag, ...)``); reading ``A_s`` directly is the same
    program, and is what the source says."""
    created = {b.name for b in allocs if "_frag" in b.name}
    dropped: set[str] = set()

    def walk(stmts: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        out: list[Stmt] = []
        items = list(stmts)
        i = 0
        while i < len(items):
            stmt = items[i]
            nxt = items[i + 1] if i + 1 < len(items) else None
            if isinstance(stmt, TileOp) and stmt.kind == "copy" and stmt.operands[1].buffer in created \
                    and isinstance(nxt, TileOp) and nxt.kind == "reduce" and nxt.operands[0].buffer == stmt.operands[1].buffer:
                dropped.add(stmt.operands[1].buffer)
                out.append(replace(nxt, operands=(stmt.operands[0],) + nxt.operands[1:]))
                i += 2
                continue
            if isinstance(stmt, (Loop, While, GridLaunch)):
                stmt = replace(stmt, body=walk(stmt.body))
            elif isinstance(stmt, If):
                stmt = replace(stmt, then=walk(stmt.then), orelse=walk(stmt.orelse))
            out.append(stmt)
            i += 1
        return tuple(out)
    new_body = walk(body)
    used = {getattr(op, "buffer", None) for s in walk_stmts(new_body) if isinstance(s, TileOp) for op in s.operands}
    return new_body, [b for b in allocs if b.name not in dropped or b.name in used]


class _Walker:
    """Dispatch on TVM node type names; one converter per node kind."""

    def __init__(self) -> None:
        self.allocs: list[Buffer] = []
        self.grid: list[GridAxis] = []
        self.launching = False  # inside a T.Kernel's block axes
        self.threads: int | None = None
        # let-bound values and thread indices by TIR variable (identity), not by name: TileLang
        # names a T.Persistent tile index ``bx`` like the block index it is computed from
        self.lets: dict[int, Expr] = {}
        self.thread_vars: dict[int, int] = {}  # thread index variable -> its axis (0: x, 1: y, 2: z)
        self.thread_x: int | None = None  # threadIdx.x (T.get_thread_binding()), when the block is 1-D
        self.thread_dims: tuple[int, ...] = ()
        self.im2cols = 0  # T.im2col calls lowered so far (names their loop variables)
        self.tensor_data: dict[int, Any] = {}  # data pointer of a global tensor -> its TIR buffer
        self.views: list[tuple[Buffer, str]] = []  # T.Tensor(shape, dtype, X.data): another shape of X
        self.onchip_data: dict[int, str] = {}  # data pointer of an on-chip buffer -> its name
        self.onchip_views: list[tuple[Buffer, str]] = []  # T.reshape of an on-chip buffer: another shape of it
        self.barriers: dict[str, tuple[int, ...]] = {}  # T.alloc_barrier buffer -> arrive count of each
        self._names: dict[int, str] = {}  # TIR variable (by identity) -> its name in the lifted kernel
        self._owners: dict[str, int] = {}

    def var_name(self, var: Any) -> str:
        """A loop variable ``k`` and a run-time size ``T.dynamic("k")`` are two variables with
        one name in TIR: a variable named like a size (met first, in the tensors' shapes)
        but not that size gets a suffix.  Loop variables may share names (their scopes nest)."""
        handle = var.__chandle__()
        if handle in self._names:
            return self._names[handle]
        owner = self._owners.get(var.name)
        if owner is None or owner == handle:
            return var.name
        name, number = f"{var.name}_{1}", 1
        while name in self._owners:
            number += 1
            name = f"{var.name}_{number}"
        self._names[handle] = name
        return name

    def size_names(self, buf: Any) -> None:
        """Register the variables in a global tensor's shape: they are the kernel's sizes."""
        from tvm import tirx
        from tvm.tirx import stmt_functor
        for dim in buf.shape:
            def visit(node: Any) -> None:
                if isinstance(node, tirx.Var) and node.name not in self._owners:
                    self._owners[node.name] = node.__chandle__()
            stmt_functor.post_order_visit(tirx.Evaluate(dim), visit)

    def name_of(self, buf: Any) -> str:
        """A buffer's name; a buffer over a global tensor's memory under another name
        (``T.Tensor(shape, dtype, X.data)``) is recorded as a view of that tensor."""
        tensor = self.tensor_data.get(buf.data.__chandle__())
        base = tensor.name if tensor is not None else None
        onchip = self.onchip_data.get(buf.data.__chandle__())
        if onchip is not None and onchip != buf.name:
            if all(view.name != buf.name for view, _ in self.onchip_views):
                base_buf = next(b for b in self.allocs if b.name == onchip)
                offset = self.expr(buf.elem_offset) if buf.elem_offset is not None else Const(0)
                if str(buf.dtype) != base_buf.dtype or offset != Const(0) or not _row_major(buf):
                    raise Unsupported(None, f"{buf.name} reads the on-chip buffer {onchip} with another element type, "
                                      "offset or stride order, which is not modelled")
                self.onchip_views.append((self.buffer(buf, base_buf.scope), onchip))
            return buf.name
        if base is not None and base != buf.name and all(view.name != buf.name for view, _ in self.views):
            offset = self.expr(buf.elem_offset) if buf.elem_offset is not None else Const(0)
            if str(buf.dtype) != str(tensor.dtype) or offset != Const(0) or not _row_major(buf):
                raise Unsupported(None, f"{buf.name} reads the memory of {base} with another element type, offset "
                                  "or stride order, which is not modelled")
            self.views.append((self.buffer(buf, GLOBAL), base))
        return buf.name

    def buffer(self, buf: Any, scope: str | None = None) -> Buffer:
        text = buf.scope()
        scope = scope or (SHARED if text.startswith("shared") else FRAGMENT if "fragment" in text
                          else LOCAL if text.startswith("local") else GLOBAL)
        shape = tuple(self.expr(d) for d in buf.shape)
        return Buffer(buf.name, shape, _dtype_name(buf.dtype), scope)

    # -- statements --
    def stmt(self, node: Any) -> tuple[Stmt, ...]:
        handler: Callable[[Any], tuple[Stmt, ...]] | None = getattr(self, "_s_" + type(node).__name__, None)
        if handler is None:
            raise Unsupported(None, f"TIR statement {type(node).__name__} is not modelled")
        return handler(node)

    def _s_SBlockRealize(self, node: Any) -> tuple[Stmt, ...]:
        return self.stmt(node.block)

    def _s_SBlock(self, node: Any) -> tuple[Stmt, ...]:
        for buf in node.alloc_buffers:
            self.allocs.append(self.buffer(buf))
            self.onchip_data[buf.data.__chandle__()] = buf.name
        for key, value in (node.annotations or {}).items():
            if str(key) == "tl.launch_threads":
                self.threads = int(value[0])
                self.thread_dims = tuple(int(v) for v in value)
            if str(key) == "barrier_init":  # T.alloc_barrier: the arrive count of each barrier
                for data, counts in value.items():
                    name = next((b.name for b in node.alloc_buffers if b.data.same_as(data)), None)
                    if name is not None:
                        self.barriers[name] = tuple(int(c) for c in counts)
        return self.stmt(node.body)

    _s_BlockRealize = _s_SBlockRealize
    _s_Block = _s_SBlock

    def _s_SeqStmt(self, node: Any) -> tuple[Stmt, ...]:
        out: list[Stmt] = []
        for child in node.seq:
            out.extend(self.stmt(child))
        return tuple(out)

    def _s_For(self, node: Any) -> tuple[Stmt, ...]:
        var = self.var_name(node.loop_var)
        start = self.expr(node.min)
        if start != Const(0):  # for v in range(lo, hi): a counter from 0 and v = counter + lo
            if node.thread_binding is not None:
                raise Unsupported(None, "a block index with a non-zero start is not modelled")
            counter = f"{var}_from_0"
            self.lets[node.loop_var.__chandle__()] = BinOp("+", Var(counter), start)
            var = counter
        kind = int(node.kind)
        if node.thread_binding is not None:
            tag = node.thread_binding.thread_tag
            if tag.startswith("threadIdx.") and tag[-1] in "xyz":  # the block's own thread index, by a loop
                axis = "xyz".index(tag[-1])
                extent = self.expr(node.extent)
                if self.thread_dims and (len(self.thread_dims) <= axis or extent != Const(self.thread_dims[axis])):
                    raise Unsupported(None, f"a {tag} loop over {extent} threads in a block of "
                                      f"{list(self.thread_dims)} threads is not modelled")
                self.thread_vars[node.loop_var.__chandle__()] = axis
                return self.stmt(node.body)
            if not tag.startswith("blockIdx"):
                raise Unsupported(None, f"explicit {tag} binding is not modelled")
            self.grid.append(GridAxis(var, self.expr(node.extent)))
            if self.launching:  # an inner axis of the same T.Kernel
                return self.stmt(node.body)
            first, self.launching = len(self.grid) - 1, True
            body = self.stmt(node.body)
            self.launching = False
            return _grid_phases(tuple(self.grid[first:]), body)
        stages = node.annotations.get("num_stages") if node.annotations else None
        stages = int(stages) if stages is not None and type(stages).__name__ == "IntImm" or isinstance(stages, int) \
            else None if stages is None else 1
        loop_kind = PARALLEL if kind in (1, 2) else PIPELINED if stages is not None else SERIAL
        return (Loop(var, self.expr(node.extent), loop_kind, self.stmt(node.body), None, stages),)

    def _s_Bind(self, node: Any) -> tuple[Stmt, ...]:
        from tvm import tirx
        if isinstance(node.value, tirx.Call) and _op_name(node.value) == "tl.launch_thread_idx":
            axis = int(node.value.args[0]) if node.value.args and type(node.value.args[0]).__name__ == "IntImm" \
                else None
            if axis is None or axis not in (0, 1, 2):
                raise Unsupported(None, "a thread index of an unknown axis is not modelled")
            self.thread_vars[node.var.__chandle__()] = axis
            if axis == 0:
                self.thread_x = node.var.__chandle__()
        else:
            self.lets[node.var.__chandle__()] = self.expr(node.value)
        return self.stmt(node.body) if hasattr(node, "body") and node.body is not None else ()

    _s_LetStmt = _s_Bind

    def _s_AssertStmt(self, node: Any) -> tuple[Stmt, ...]:
        # a run-time check of the sizes (the kernel stops when it fails); what follows is the program
        body = getattr(node, "body", None)
        return self.stmt(body) if body is not None else ()

    def _s_AttrStmt(self, node: Any) -> tuple[Stmt, ...]:
        return self.stmt(node.body)

    def _s_DeclBuffer(self, node: Any) -> tuple[Stmt, ...]:
        return self.stmt(node.body) if hasattr(node, "body") and node.body is not None else ()

    def _s_AllocBuffer(self, node: Any) -> tuple[Stmt, ...]:
        self.allocs.append(self.buffer(node.buffer))
        self.onchip_data[node.buffer.data.__chandle__()] = node.buffer.name
        return self.stmt(node.body) if hasattr(node, "body") and node.body is not None else ()

    def _s_IfThenElse(self, node: Any) -> tuple[Stmt, ...]:
        group = self.warp_group(node)
        if group is not None:  # T.ws(k): these threads run the body, beside the other groups
            return (If(Call(WARP_GROUP, (Const(group[0]), Const(group[1]))), self.stmt(node.then_case.body)),)
        if self.threads is not None and self._thread_range(node.condition) is not None:
            return tuple(If(Call(WARP_GROUP, (Const(lo), Const(hi))), self.stmt(body))
                         for (lo, hi), body in self.thread_branches(node, [(0, self.threads)]) if lo < hi)
        orelse = self.stmt(node.else_case) if node.else_case is not None else ()
        return (If(self.expr(node.condition), self.stmt(node.then_case), orelse),)

    def warp_group(self, node: Any) -> tuple[int, int] | None:
        """``if lo <= tx < hi`` around an ``AttrStmt("warp_specialize")`` (what ``T.ws(k)`` makes): (lo, hi)."""
        then = node.then_case
        if node.else_case is not None or type(then).__name__ != "AttrStmt" or str(then.attr_key) != "warp_specialize":
            return None
        cond, lo, hi = node.condition, 0, None
        parts = [cond.a, cond.b] if type(cond).__name__ == "And" else [cond]
        for part in parts:
            kind = type(part).__name__
            if kind not in ("GE", "LT") or type(part.a).__name__ != "Var" or type(part.b).__name__ != "IntImm" \
                    or part.a.__chandle__() not in self.thread_vars:
                return None
            if kind == "GE":
                lo = int(part.b.value)
            else:
                hi = int(part.b.value)
        return (lo, hi) if hi is not None else None

    def thread_branches(self, node: Any, within: list[tuple[int, int]]) -> list[tuple[tuple[int, int], Any]]:
        """``if tx < 128: ... elif 160 <= tx < 192: ... else: ...`` on the thread index of a 1-D
        block: each branch is the warp group of the threads its condition leaves of ``within``
        (ranges of threads), as ``T.ws`` makes them; a branch over two separate ranges is not."""
        lo, hi = self._thread_range(node.condition)
        then = [(max(lo, a), min(hi, b)) for a, b in within if max(lo, a) < min(hi, b)]
        rest = [(a, b) for a0, b0 in within for a, b in ((a0, min(b0, lo)), (max(a0, hi), b0)) if a < b]
        branches = [(_one_range(then, lo, hi), node.then_case)]
        inner = node.else_case
        if inner is None:
            return branches
        if type(inner).__name__ == "IfThenElse" and self._thread_range(inner.condition) is not None:
            return branches + self.thread_branches(inner, rest)
        return branches + [(_one_range(rest, lo, hi), inner)]

    def _thread_range(self, cond: Any) -> tuple[int, int] | None:
        """The threads ``[lo, hi)`` a condition on threadIdx.x alone holds for (comparisons with
        constants joined by ``and``), when the block's threads are 1-D; None otherwise."""
        if self.thread_x is None or any(d != 1 for d in self.thread_dims[1:]) or self.threads is None:
            return None
        lo, hi = 0, self.threads
        parts = [cond]
        while any(type(p).__name__ == "And" for p in parts):
            parts = [q for p in parts for q in ((p.a, p.b) if type(p).__name__ == "And" else (p,))]
        for part in parts:
            kind = type(part).__name__
            if kind not in ("LT", "LE", "GT", "GE"):
                return None
            a, b = part.a, part.b
            if type(a).__name__ == "IntImm" and type(b).__name__ == "Var":  # c < tx is tx > c
                a, b, kind = b, a, {"LT": "GT", "LE": "GE", "GT": "LT", "GE": "LE"}[kind]
            if type(a).__name__ != "Var" or a.__chandle__() != self.thread_x or type(b).__name__ != "IntImm":
                return None
            c = int(b.value)
            if kind == "LT":
                hi = min(hi, c)
            elif kind == "LE":
                hi = min(hi, c + 1)
            elif kind == "GT":
                lo = max(lo, c + 1)
            else:
                lo = max(lo, c)
        return lo, hi

    def _s_While(self, node: Any) -> tuple[Stmt, ...]:
        return (While(self.expr(node.condition), self.stmt(node.body)),)

    def _s_BufferStore(self, node: Any) -> tuple[Stmt, ...]:
        return (Store(self.name_of(node.buffer), tuple(self.expr(i) for i in node.indices), self.expr(node.value)),)

    def _s_Evaluate(self, node: Any) -> tuple[Stmt, ...]:
        call = node.value
        name = _op_name(call)
        args = list(call.args)
        if name == "tl.tileop.copy":
            return (TileOp("copy", (self.region(args[0]), self.region(args[1]))),)
        if name == "tl.tileop.fill":
            return (TileOp("fill", (self.region(args[0]), self.expr(args[1]))),)
        if name in _GEMMS:
            return self.gemm(name, args, call.annotations or {})
        if name == "tl.wait_wgmma":  # the issuing threads wait until at most n of their WGMMAs are in flight
            return (TileOp("wgmma_wait", (self.expr(args[0]),)),)
        if name == "tl.tileop.reduce":
            attrs = (("op", str(args[2].value)), ("dim", int(args[3])), ("clear", bool(int(args[4]))))
            return (TileOp("reduce", (self.region(args[0]), self.region(args[1])), attrs),)
        if name == "tl.tileop.atomicadd":
            return (TileOp("atomic_add", (self.region(args[0]), self.region(args[1]))),)
        if name == "tl.tileop.im2col":
            return self.im2col(args)
        if name == "tl.tileop.tma_copy":  # an asynchronous copy whose completion counts towards a barrier
            barrier = (call.annotations or {}).get("barrier")
            if barrier is None or type(barrier).__name__ != "BufferLoad":
                raise Unsupported(None, "a tma_copy without a barrier is not modelled")
            return (TileOp("copy", (self.region(args[0]), self.region(args[1])), (("barrier", self.element(barrier)),)),)
        if name == "tl.mbarrier_wait_parity" and len(args) == 2 and type(args[0]).__name__ == "BufferLoad":
            return (TileOp("barrier_wait", (self.element(args[0]), self.expr(args[1]))),)
        if name == "tirx.ptx_arrive_barrier" and len(args) == 1 and type(args[0]).__name__ == "BufferLoad":
            return (TileOp("barrier_arrive", (self.element(args[0]),)),)
        if name in _BLOCK_BARRIERS:
            return (TileOp(SYNC_THREADS, ()),)
        if name in _NO_OPS:
            return ()
        if name == "tl.sync_grid":  # every block of the grid waits for all: split into launches by _grid_phases
            return (TileOp(_SYNC_GRID, ()),)
        if name == "tl.atomic_add_elem_op":
            target = args[0].args[0]
            indices = tuple(self.expr(i) for i in target.indices)
            return (Store(self.name_of(target.buffer), indices, self.expr(args[1]), True),)
        raise Unsupported(None, f"TileLang call {name} is not modelled")

    def gemm(self, name: str, args: list, annotations: Any) -> tuple[Stmt, ...]:
        """``T.gemm``, Hopper's ``T.wgmma_gemm`` and Blackwell's ``T.tcgen05_gemm`` (slots A, B, C,
        transpose_A, transpose_B, M, N, K, policy, clear_accum, mbar, ...): the same
        ``C (+)= op(A) @ op(B)``.  ``clear_accum`` may be an expression of the loop (``k == 0``).
        A tcgen05 MMA runs asynchronously: its completion is one arrival on ``mbar``
        (``tcgen05.commit``), the only way threads see C.  A WGMMA runs asynchronously too, seen by
        its issuing threads once a ``T.wait_wgmma(n)`` leaves at most n later ones in flight; a
        ``wg_wait`` annotation (``-1``: no wait, ``n``: ``wait_wgmma(n)`` right after; what
        ``T.wgmma_gemm`` sets, 0 is the synchronous ``T.gemm``) says which."""
        clear = args[9]
        clear_accum = bool(int(clear)) if type(clear).__name__ == "IntImm" else self.expr(clear)
        attrs = (("transpose_A", bool(int(args[3]))), ("transpose_B", bool(int(args[4]))),
                 ("clear_accum", clear_accum))
        if name == "tl.tileop.tcgen05_gemm":
            mbar = args[10] if len(args) > 10 else None
            if type(mbar).__name__ != "BufferLoad":
                raise Unsupported(None, "a tcgen05_gemm without mbar (its completion published by a later MMA) "
                                  "is not modelled")
            if int(annotations.get("use_2cta", 0)):
                raise Unsupported(None, "a 2-CTA tcgen05_gemm (B split across a cluster pair) is not modelled")
            attrs += (("mma_barrier", self.element(mbar)),)
        wait = annotations.get("wg_wait", -1 if name == "tl.tileop.wgmma_gemm" else 0)
        if type(wait).__name__ != "IntImm" and not isinstance(wait, int):
            raise Unsupported(None, f"a gemm whose wg_wait is {wait} is not modelled")
        wait = int(wait)
        if wait == 0 and name != "tl.tileop.wgmma_gemm":
            return (TileOp("gemm", tuple(self.region(a) for a in args[:3]), attrs),)
        if name == "tl.tileop.tcgen05_gemm":
            raise Unsupported(None, "a tcgen05_gemm with a warp-group wait (wg_wait) is not modelled")
        gemm = TileOp("gemm", tuple(self.region(a) for a in args[:3]), attrs + (("wgmma", True),))
        return (gemm,) if wait < 0 else (gemm, TileOp("wgmma_wait", (Const(wait),)))

    def im2col(self, args: list) -> tuple[Stmt, ...]:
        """``T.im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad)`` as the parallel
        loop TileLang lowers it to (``LowerIm2ColSIMT``): ``col[i, j]`` is the NHWC image element
        of output pixel ``nhw_step * block_m + i`` under filter tap ``c_step * block_k + j``
        (taps ordered kh, kw, c), 0 in the padding."""
        image, col = self.region(args[0]), self.region(args[1])
        _, h_dim, w_dim, c_dim = (self.expr(d) for d in args[0].args[0].buffer.shape)
        nhw_step, c_step = self.expr(args[2]), self.expr(args[3])
        kernel, stride, dilation, pad = (self.expr(a) for a in args[4:8])
        block_m, block_k = col.extents[-2], col.extents[-1]
        self.im2cols += 1
        i, j = Var(f"im2col_{self.im2cols}_i"), Var(f"im2col_{self.im2cols}_j")

        def b(op: str, x: Expr, y: Expr) -> Expr:
            return BinOp(op, x, y)

        def out_extent(size: Expr) -> Expr:
            span = b("-", b("-", b("+", size, b("*", Const(2), pad)), b("*", b("-", kernel, Const(1)), dilation)),
                     Const(1))
            return b("+", b("//", span, stride), Const(1))

        out_h, out_w = out_extent(h_dim), out_extent(w_dim)
        out_hw = b("*", out_h, out_w)
        tap, pixel = b("+", b("*", c_step, block_k), j), b("+", b("*", nhw_step, block_m), i)
        row = b("-", b("+", b("*", b("//", b("%", pixel, out_hw), out_w), stride),
                       b("*", b("//", tap, b("*", kernel, c_dim)), dilation)), pad)
        column = b("-", b("+", b("*", b("%", pixel, out_w), stride),
                          b("*", b("%", b("//", tap, c_dim), kernel), dilation)), pad)
        inside = b("and", b("and", b(">=", row, Const(0)), b(">=", column, Const(0))),
                   b("and", b("<", row, h_dim), b("<", column, w_dim)))
        element = Load(image.buffer, (b("//", pixel, out_hw), row, column, b("%", tap, c_dim)))
        value = Select(inside, element, Const(0.0))
        target = tuple(col.starts[:-2]) + (b("+", col.starts[-2], i), b("+", col.starts[-1], j))
        store = Store(col.buffer, target, value)
        return (Loop(i.name, block_m, PARALLEL, (Loop(j.name, block_k, PARALLEL, (store,)),)),)

    def element(self, load: Any) -> Region:
        """One element of a buffer (a barrier) as a region without extents."""
        return Region(self.name_of(load.buffer), tuple(self.expr(i) for i in load.indices))

    def region(self, call: Any) -> Region:
        load = call.args[0]
        starts = tuple(self.expr(i) for i in load.indices)
        extents = tuple(self.expr(e) for e in call.args[2:])
        extents = (Const(1),) * (len(starts) - len(extents)) + extents
        return Region(self.name_of(load.buffer), starts, extents)

    # -- expressions --
    def expr(self, node: Any) -> Expr:
        kind = type(node).__name__
        if kind == "IntImm":
            return Const(bool(node.value)) if str(node.dtype) == "bool" else Const(int(node.value))
        if kind == "FloatImm":
            return Const(float(node.value))
        if kind in ("Var", "SizeVar"):
            handle = node.__chandle__()
            if handle in self.thread_vars:  # per-thread code: each thread runs it with its own index
                return Var(THREAD_INDEX[self.thread_vars[handle]])
            return self.lets[handle] if handle in self.lets else Var(self.var_name(node))
        binary = {"Add": "+", "Sub": "-", "Mul": "*", "FloorDiv": "//", "FloorMod": "%", "Div": "/", "Mod": "%",
                  "Min": "min", "Max": "max", "LT": "<", "LE": "<=", "GT": ">", "GE": ">=", "EQ": "==", "NE": "!=",
                  "And": "and", "Or": "or"}
        if kind in binary:
            made = _ceildiv(fold_const(BinOp(binary[kind], self.expr(node.a), self.expr(node.b))))
            if kind in ("Add", "Sub", "Mul") and is_integer_dtype(str(node.dtype)) and width(str(node.dtype)) < 32:
                return Call(IN_RANGE, (made,), str(node.dtype))  # C computes it as an int; TIR wraps it
            return made
        if kind == "Not":
            return UnOp("not", self.expr(node.a))
        if kind == "BufferLoad":
            return Load(self.name_of(node.buffer), tuple(self.expr(i) for i in node.indices))
        if kind == "Cast":
            return Call("cast", (self.expr(node.value),), _dtype_name(node.dtype), _dtype_name(node.value.dtype))
        if kind == "Select":
            return Select(self.expr(node.condition), self.expr(node.true_value), self.expr(node.false_value))
        if kind == "Call":
            name = _op_name(node).split(".")[-1]
            if name == "infinity":
                return Const(float("inf"))
            if name == "if_then_else":
                return Select(*(self.expr(a) for a in node.args))
            if name.startswith(("bitwise_", "shift_")):
                return _bit_operation(name, [str(a.dtype) for a in node.args], [self.expr(a) for a in node.args],
                                      str(node.dtype))
            if name == REINTERPRET:
                source, target = _dtype_name(node.args[0].dtype), _dtype_name(node.dtype)
                if not is_integer_dtype(source) or width(target) is None or width(target) != width(source):
                    raise Unsupported(None, f"reinterpret of {source} as {target} is not modelled (only an integer's "
                                      "bits as a number of the same width)")
                return Call(REINTERPRET, (self.expr(node.args[0]),), target, source)
            if name == "clamp":
                x, lo, hi = (self.expr(a) for a in node.args)
                return BinOp("min", BinOp("max", x, lo), hi)
            fn = {"fabs": "abs"}.get(name, name)
            return Call(fn, tuple(self.expr(a) for a in node.args))
        raise Unsupported(None, f"TIR expression {kind} is not modelled")


def _one_range(ranges: list[tuple[int, int]], lo: int, hi: int) -> tuple[int, int]:
    """The threads of a branch as one range ``[lo, hi)`` (``(0, 0)``: none)."""
    if not ranges:
        return 0, 0
    if len(ranges) > 1 and any(a != b for (_, b), (a, _) in zip(ranges, ranges[1:])):
        raise Unsupported(None, f"a branch on the thread index over the separate thread ranges "
                                f"{', '.join(f'{a}..{b - 1}' for a, b in ranges)} (beside {lo}..{hi - 1}) is not modelled")
    return ranges[0][0], ranges[-1][1]


def _bit_operation(name: str, dtypes: list[str], args: list[Expr], dtype: str) -> Expr:
    """Bit operations that are exact arithmetic: on truth values (a mask ``(i < n) & (j != -1)``),
    and on integers of 32 bits or more (index arithmetic) a shift by a constant (``x << k`` =
    x * 2^k, ``x >> k`` = floor(x / 2^k) in two's complement), a low-bits mask (``x & (2^k - 1)``
    = x mod 2^k, non-negative, as two's complement gives) and ``x ^ 1`` (the lowest bit flipped).
    Any other on integers is kept as the typed operation (``bits.bit_operation``), run on the
    integers the run knows."""
    if all(dtype == "bool" for dtype in dtypes):
        if name == "bitwise_not":
            return UnOp("not", args[0])
        logical = {"bitwise_and": "and", "bitwise_or": "or", "bitwise_xor": "!="}.get(name)
        if logical is not None:
            return BinOp(logical, args[0], args[1])
    if not all(is_integer_dtype(d) for d in dtypes + [dtype]):
        raise Unsupported(None, f"bit operation {name} on {', '.join(dtypes)} is not modelled (only on truth values "
                                "and integers)")
    if len(args) == 2 and all(width(d) >= 32 for d in dtypes + [dtype]):
        value, amount = args
        if name == "bitwise_and" and _constant_int(amount) is None:  # the mask may come first
            value, amount = amount, value
        k = _constant_int(amount)
        if k is not None and k >= 0:
            if name == "shift_left":
                return BinOp("*", value, Const(2 ** k))
            if name == "shift_right":
                return BinOp("//", value, Const(2 ** k))
            if name == "bitwise_and" and k & (k + 1) == 0:
                return BinOp("%", value, Const(k + 1))
            if name == "bitwise_xor" and k == 1:  # flips the lowest bit: x + 1 - 2 (x mod 2) (a phase parity)
                return BinOp("-", BinOp("+", value, Const(1)), BinOp("*", Const(2), BinOp("%", value, Const(2))))
    # any other: the typed operation on the integers the run knows (an index, a thread index, a loop
    # counter, a sampled tensor's element: ``bits.bit_operation``); on tensor values it is refused
    return Call(name, tuple(args), dtype, dtypes[0])


def _dtype_name(dtype: Any) -> str:
    text = str(dtype)
    return {"float": "float32", "int": "int32"}.get(text, text)


def _row_major(buf: Any) -> bool:
    """No strides, or the strides of a dense row-major array of its shape."""
    from tvm import arith
    strides = list(buf.strides or [])
    if not strides:
        return True
    analyzer, dense = arith.Analyzer(), 1
    for stride, dim in zip(reversed(strides), reversed(list(buf.shape))):
        if not analyzer.can_prove_equal(stride, dense):
            return False
        dense = dense * dim
    return True


def _constant_int(expr: Expr) -> int | None:
    return expr.value if isinstance(expr, Const) and isinstance(expr.value, int) \
        and not isinstance(expr.value, bool) else None


def _ceildiv(expr: Expr) -> Expr:
    """TileLang writes ``T.ceildiv(n, d)`` as ``(n + d - 1) // d``; name it again, so the
    size reduction sees the boundary case (``n % d``) the source means."""
    if not (isinstance(expr, BinOp) and expr.op == "//" and isinstance(expr.b, Const)):
        return expr
    d, top = expr.b.value, expr.a
    if isinstance(top, BinOp) and top.op == "-" and isinstance(top.b, Const) and isinstance(top.a, BinOp) \
            and top.a.op == "+" and isinstance(top.a.b, Const) and top.a.b.value - top.b.value == d - 1:
        return BinOp("ceildiv", top.a.a, expr.b)
    if isinstance(top, BinOp) and top.op == "+" and isinstance(top.b, Const) and top.b.value == d - 1 and d > 1:
        return BinOp("ceildiv", top.a, expr.b)
    return expr


def transfer_lines(lifted: Kernel, text: Kernel) -> Kernel:
    """Give the PrimFunc's statements the source lines of the text reading, when both list
    the same statements in the same order."""
    ours = [s for s in walk_stmts(lifted.body)]
    theirs = [s for s in walk_stmts(text.body)]
    if [type(s).__name__ + getattr(s, "kind", "") for s in ours] != \
            [type(s).__name__ + getattr(s, "kind", "") for s in theirs]:
        return replace(lifted, line=text.line, grid_line=text.grid_line)
    lines = {id(a): b.line for a, b in zip(ours, theirs)}

    def relabel(stmts: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        out = []
        for stmt in stmts:
            line = lines.get(id(stmt))
            if isinstance(stmt, (Loop, While, GridLaunch)):
                stmt = replace(stmt, body=relabel(stmt.body), line=line)
            elif isinstance(stmt, If):
                stmt = replace(stmt, then=relabel(stmt.then), orelse=relabel(stmt.orelse), line=line)
            else:
                stmt = replace(stmt, line=line)
            out.append(stmt)
        return tuple(out)
    return replace(lifted, body=relabel(lifted.body), line=text.line, grid_line=text.grid_line)
