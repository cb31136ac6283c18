"""Semantics of TileLang tile ops: one registered handler per op kind.

Each handler executes one :class:`TileOp` for the current block on the interpreter's
memory.  Semantics follow TileLang's own lowering:

* ``copy`` (and region ``atomic_add``) guard every element against the buffers' shapes:
  an out-of-bounds source element reads 0, an out-of-bounds destination element is not
  written (``CopyNode::MakePredicate`` in TileLang) — this is what makes boundary tiles
  safe, and what the reduced shapes exercise;
* ``gemm``: ``C += op(A) @ op(B)`` (``clear_accum`` overwrites); a tcgen05 or WGMMA one
  asynchronously, ordered with the threads through ``sync`` (a barrier arrival, ``wait_wgmma``);
* ``reduce``: ``dst = op over dim of src``; with ``clear=False`` the result is combined
  with the old ``dst``;
* ``fill``: every element of the region (``T.clear`` is ``fill 0``).

Adding an op is adding a function here with ``@handler("kind")``.
"""
from __future__ import annotations

import itertools
from typing import Any, Callable

from .errors import Unsupported
from .program import Region, TileOp

Handler = Callable[[Any, TileOp, dict], None]
HANDLERS: dict[str, Handler] = {}


def handler(kind: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        HANDLERS[kind] = fn
        return fn
    return register


def _box(machine: Any, region: Region, env: dict, partner: tuple[int, ...] | None, line: int | None
         ) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Concrete (starts, extents) of a region; missing extents come from the partner's
    non-unit extents, right-aligned (TileLang's region legalisation)."""
    starts = tuple(machine.index(s, env) for s in region.starts)
    if region.extents is not None:
        return starts, tuple(machine.index(e, env) for e in region.extents)
    if partner is None:
        return starts, tuple(1 for _ in starts)
    core = [e for e in partner if e != 1] or [1]
    if len(core) > len(starts):
        raise Unsupported(line, f"cannot fit a {list(partner)} tile into {region}")
    return starts, tuple([1] * (len(starts) - len(core)) + core)


def _elements(starts: tuple[int, ...], extents: tuple[int, ...]) -> list[tuple[int, ...]]:
    return [tuple(s + o for s, o in zip(starts, offset)) for offset in itertools.product(*(range(e) for e in extents))]


def _squeeze(extents: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(e for e in extents if e != 1)


def _pair(machine: Any, op: TileOp, env: dict) -> tuple[list, list]:
    """Matching element lists of a two-region op (src, dst)."""
    src, dst = op.operands[0], op.operands[1]
    if src.extents is None and dst.extents is None:
        raise Unsupported(op.line, "copy with neither side's extent known")
    if src.extents is not None:
        s_start, s_ext = _box(machine, src, env, None, op.line)
        d_start, d_ext = _box(machine, dst, env, s_ext, op.line)
    else:
        d_start, d_ext = _box(machine, dst, env, None, op.line)
        s_start, s_ext = _box(machine, src, env, d_ext, op.line)
    if _squeeze(s_ext) != _squeeze(d_ext):
        raise Unsupported(op.line, f"{op.kind} between regions of different extents {list(s_ext)} and {list(d_ext)}")
    return _elements(s_start, s_ext), _elements(d_start, d_ext)


@handler("copy")
def copy(machine: Any, op: TileOp, env: dict) -> None:
    barrier = op.attr("barrier")
    if barrier is not None:  # tma_copy: asynchronous, its writes seen through the barrier's phase
        if machine.sync is None:
            raise Unsupported(op.line, "a tma_copy outside a kernel with barriers is not modelled")
        key = _barrier_key(machine, barrier, env)
        machine.sync.async_copy(key, op.line)
        try:
            _copy(machine, op, env)
        finally:
            machine.sync.end_async_copy(key)
        return
    _copy(machine, op, env)


def _barrier_key(machine: Any, barrier: Region, env: dict) -> tuple[str, tuple[int, ...]]:
    return barrier.buffer, tuple(machine.index(i, env) for i in barrier.starts)


@handler("barrier_arrive")
def barrier_arrive(machine: Any, op: TileOp, env: dict) -> None:
    if machine.sync is None:
        raise Unsupported(op.line, "a barrier outside a kernel with barriers is not modelled")
    machine.sync.arrive(_barrier_key(machine, op.operands[0], env), op.line)


@handler("barrier_wait")
def barrier_wait(machine: Any, op: TileOp, env: dict) -> None:
    if machine.sync is None:
        raise Unsupported(op.line, "a barrier outside a kernel with barriers is not modelled")
    machine.sync.wait(_barrier_key(machine, op.operands[0], env), machine.index(op.operands[1], env), op.line)


def _copy(machine: Any, op: TileOp, env: dict) -> None:
    src, dst = op.operands[0], op.operands[1]
    have, want = machine.dtypes.get(src.buffer), machine.dtypes.get(dst.buffer)
    for s, d in zip(*_pair(machine, op, env)):
        value = machine.load(src.buffer, s, op.line, guarded=True)
        if have != want:  # a copy between dtypes converts each element as a cast does
            value = machine.convert(value, have, want)
        machine.store(dst.buffer, d, value, op.line, atomic=False, guarded=True)


@handler("atomic_add")
def atomic_add(machine: Any, op: TileOp, env: dict) -> None:
    src, dst = op.operands[0], op.operands[1]
    for s, d in zip(*_pair(machine, op, env)):
        if not machine.in_bounds(dst.buffer, d):
            continue
        value = machine.backend.add(machine.load(dst.buffer, d, op.line, guarded=True),
                                    machine.load(src.buffer, s, op.line, guarded=True))
        machine.store(dst.buffer, d, value, op.line, atomic=True, guarded=True)


@handler("fill")
def fill(machine: Any, op: TileOp, env: dict) -> None:
    region, value_expr = op.operands
    starts, extents = _box(machine, region, env, None, op.line)
    value = machine.value(value_expr, env, op.line)
    value = machine.backend.const(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value
    for index in _elements(starts, extents):
        machine.store(region.buffer, index, value, op.line, atomic=False, guarded=True)


def _matrix(machine: Any, region: Region, env: dict, transpose: bool, line: int | None) -> list[list[tuple]]:
    starts, extents = _box(machine, region, env, None, line)
    core = [(axis, e) for axis, e in enumerate(extents) if e != 1]
    if len(core) > 2 or len(extents) < 2:
        raise Unsupported(line, f"gemm operand {region} is not a 2-D tile")
    rows_axis, cols_axis = (len(extents) - 2, len(extents) - 1)
    rows = [[tuple(starts[a] + (r if a == rows_axis else c if a == cols_axis else 0) for a in range(len(starts)))
             for c in range(extents[cols_axis])] for r in range(extents[rows_axis])]
    if transpose:
        rows = [list(col) for col in zip(*rows)]
    return rows


@handler("gemm")
def gemm(machine: Any, op: TileOp, env: dict) -> None:
    if op.attr("wgmma"):  # Hopper: asynchronous, seen by its threads after a wait_wgmma retires it
        if machine.sync is None:
            raise Unsupported(op.line, "an asynchronous wgmma_gemm outside a kernel whose order is tracked is "
                              "not modelled")
        machine.sync.async_wgmma(op.line)
        try:
            _gemm(machine, op, env)
        finally:
            machine.sync.end_async_wgmma()
        return
    barrier = op.attr("mma_barrier")
    if barrier is None:
        _gemm(machine, op, env)
        return
    # tcgen05: the tensor core reads A, B and C and writes C after the issue, seen only through
    # the one arrival its commit makes on the barrier
    if machine.sync is None:
        raise Unsupported(op.line, "a tcgen05_gemm outside a kernel with barriers is not modelled")
    key = _barrier_key(machine, barrier, env)
    machine.sync.async_mma(key, op.line)
    try:
        _gemm(machine, op, env)
    finally:
        machine.sync.end_async_mma(key, op.line)


@handler("wgmma_wait")
def wgmma_wait(machine: Any, op: TileOp, env: dict) -> None:
    if machine.sync is None:
        raise Unsupported(op.line, "a wait_wgmma outside a kernel whose order is tracked is not modelled")
    machine.sync.wgmma_wait(machine.index(op.operands[0], env), op.line)


def _gemm(machine: Any, op: TileOp, env: dict) -> None:
    a_reg, b_reg, c_reg = op.operands
    clear = op.attr("clear_accum")
    if not isinstance(clear, bool):  # an expression: T.tcgen05_gemm(..., clear_accum=k == 0)
        clear = machine.value(clear, env, op.line)
        if type(clear).__name__ not in ("bool", "bool_"):
            raise Unsupported(op.line, "a gemm whose clear_accum depends on tensor data is not modelled")
    a = _matrix(machine, a_reg, env, bool(op.attr("transpose_A")), op.line)
    b = _matrix(machine, b_reg, env, bool(op.attr("transpose_B")), op.line)
    c = _matrix(machine, c_reg, env, False, op.line)
    m, k, n = len(a), len(a[0]), len(b[0])
    if len(b) != k or len(c) != m or len(c[0]) != n:
        raise Unsupported(op.line, f"gemm shapes do not match: A {m}x{k}, B {len(b)}x{n}, C {len(c)}x{len(c[0])}")
    backend = machine.backend
    a_vals = [[machine.load(a_reg.buffer, idx, op.line, guarded=False) for idx in row] for row in a]
    b_vals = [[machine.load(b_reg.buffer, idx, op.line, guarded=False) for idx in row] for row in b]
    for i in range(m):
        for j in range(n):
            acc = backend.const(0) if clear else machine.load(c_reg.buffer, c[i][j], op.line, guarded=False)
            for kk in range(k):
                acc = backend.add(acc, backend.mul(a_vals[i][kk], b_vals[kk][j]))
            if machine.record_origins:  # C[i, j] came through row i of A and column j of B
                machine._reads |= {line for idx in a[i] for line in machine.origin.get((a_reg.buffer, idx), ())}
                machine._reads |= {line for row in b for line in machine.origin.get((b_reg.buffer, row[j]), ())}
            machine.store(c_reg.buffer, c[i][j], acc, op.line, atomic=False, guarded=False)


def _combine(backend: Any, op: str) -> Callable[[Any, Any], Any]:
    if op in ("sum", "abssum"):
        return backend.add
    if op in ("max", "absmax"):
        return backend.max
    if op == "min":
        return backend.min
    raise KeyError(op)


@handler("reduce")
def reduce(machine: Any, op: TileOp, env: dict) -> None:
    src, dst = op.operands
    kind, dim, clear = op.attr("op"), op.attr("dim"), op.attr("clear", True)
    backend = machine.backend
    try:
        combine = _combine(backend, kind)
    except KeyError:
        raise Unsupported(op.line, f"reduce_{kind} is not modelled") from None
    s_start, s_ext = _box(machine, src, env, None, op.line)
    rank = len(s_ext)
    dim = dim % rank
    kept = tuple(e for axis, e in enumerate(s_ext) if axis != dim)
    d_start, d_ext = _box(machine, dst, env, kept, op.line)
    if _squeeze(d_ext) != _squeeze(kept):
        raise Unsupported(op.line, f"reduce destination {list(d_ext)} does not match {list(kept)}")
    for out_offset, d_index in zip(itertools.product(*(range(e) for e in kept)), _elements(d_start, d_ext)):
        acc = None
        for r in range(s_ext[dim]):
            offset = list(out_offset)
            offset.insert(dim, r)
            value = machine.load(src.buffer, tuple(s + o for s, o in zip(s_start, offset)), op.line, guarded=False)
            if kind.startswith("abs"):
                value = backend.call("abs", [value])
            acc = value if acc is None else combine(acc, value)
        if not clear:
            acc = combine(machine.load(dst.buffer, d_index, op.line, guarded=False), acc)
        machine.store(dst.buffer, d_index, acc, op.line, atomic=False, guarded=False)
