"""Infer a whole-tensor spec from a kernel's own tile ops, when the user gives none.

Three idioms are recognised, each by following copies back to the global tensors:

* gemm: ``T.gemm(A_s, B_s, C_l)`` with ``A_s``/``B_s`` loaded from globals and ``C_l``
  stored to one  ->  ``C = A @ B`` (``.T`` for transposes, ``relu(...)`` when an
  element-wise ``max(C_l, 0)`` follows);
* reduction: ``T.reduce_sum/max(X_s, y_l, dim)``  ->  ``Y = X.sum(dim)`` / ``X.max(dim)``;
* element-wise: ``C[idx] = f(A[idx], B[idx])`` with the same index everywhere  ->
  ``C = f(A, B)``.

The inferred spec states what the tile ops mean at whole-tensor level; the proof then
checks the tiling (offsets, bounds, grid, accumulation) against it.
"""
from __future__ import annotations

from .program import (GLOBAL, BinOp, Call, Const, Expr, Kernel, Load, Store, TileOp, walk_expr,
                      walk_stmts)


def infer_spec(kernel: Kernel) -> str | None:
    for rule in (_gemm, _reduction, _elementwise):
        text = rule(kernel)
        if text:
            return text
    return None


def _global(kernel: Kernel, name: str) -> bool:
    return kernel.buffer(name).scope == GLOBAL


def _copies(kernel: Kernel) -> list[TileOp]:
    return [s for s in walk_stmts(kernel.body) if isinstance(s, TileOp) and s.kind == "copy"]


def _source_of(kernel: Kernel, name: str, seen: frozenset[str] = frozenset()) -> str | None:
    """The global tensor an on-chip buffer is loaded from (through chains of copies)."""
    if _global(kernel, name):
        return name
    for op in _copies(kernel):
        src, dst = op.operands
        if dst.buffer == name and src.buffer not in seen:
            return _source_of(kernel, src.buffer, seen | {name})
    return None


def _sink_of(kernel: Kernel, name: str, seen: frozenset[str] = frozenset()) -> str | None:
    """The global tensor an on-chip buffer is stored to (copy, or atomic add)."""
    if _global(kernel, name):
        return name
    for stmt in walk_stmts(kernel.body):
        if isinstance(stmt, TileOp) and stmt.kind in ("copy", "atomic_add"):
            src, dst = stmt.operands
            if src.buffer == name and dst.buffer not in seen:
                return _sink_of(kernel, dst.buffer, seen | {name})
        if isinstance(stmt, Store) and _global(kernel, stmt.buffer):
            if any(isinstance(e, Load) and e.buffer == name for e in walk_expr(stmt.value)):
                return stmt.buffer
    return None


def _gemm(kernel: Kernel) -> str | None:
    gemms = [s for s in walk_stmts(kernel.body) if isinstance(s, TileOp) and s.kind == "gemm"]
    if len(gemms) != 1:
        return None
    op = gemms[0]
    a_reg, b_reg, c_reg = op.operands
    a, b, c = _source_of(kernel, a_reg.buffer), _source_of(kernel, b_reg.buffer), _sink_of(kernel, c_reg.buffer)
    if not (a and b and c):
        return None
    text = f"{a}{'.T' if op.attr('transpose_A') else ''} @ {b}{'.T' if op.attr('transpose_B') else ''}"
    for stmt in walk_stmts(kernel.body):
        if isinstance(stmt, Store) and stmt.buffer == c_reg.buffer and _is_relu(stmt):
            text = f"relu({text})"
            break
    return f"{c} = {text}"


def _is_relu(stmt: Store) -> bool:
    value = stmt.value
    return isinstance(value, BinOp) and value.op == "max" and value.a == Load(stmt.buffer, stmt.indices) \
        and value.b == Const(0)


def _reduction(kernel: Kernel) -> str | None:
    reduces = [s for s in walk_stmts(kernel.body) if isinstance(s, TileOp) and s.kind == "reduce"]
    if len(reduces) != 1 or reduces[0].attr("op") not in ("sum", "max", "min"):
        return None
    op = reduces[0]
    src, dst = _source_of(kernel, op.operands[0].buffer), _sink_of(kernel, op.operands[1].buffer)
    if not (src and dst):
        return None
    return f"{dst} = {src}.{op.attr('op')}({op.attr('dim')})"


def _elementwise(kernel: Kernel) -> str | None:
    stores = [s for s in walk_stmts(kernel.body) if isinstance(s, Store) and _global(kernel, s.buffer)]
    tile_ops = [s for s in walk_stmts(kernel.body) if isinstance(s, TileOp)]
    if len(stores) != 1 or tile_ops or stores[0].atomic:
        return None
    store = stores[0]
    text = _render(store.value, store.indices, kernel)
    return f"{store.buffer} = {text}" if text else None


def _render(expr: Expr, indices: tuple[Expr, ...], kernel: Kernel) -> str | None:
    if isinstance(expr, Load):
        return expr.buffer if expr.indices == indices and _global(kernel, expr.buffer) else None
    if isinstance(expr, Const):
        return repr(expr.value)
    if isinstance(expr, BinOp) and expr.op in ("+", "-", "*", "/"):
        a, b = _render(expr.a, indices, kernel), _render(expr.b, indices, kernel)
        return f"({a} {expr.op} {b})" if a and b else None
    if isinstance(expr, BinOp) and expr.op == "max":
        a, b = _render(expr.a, indices, kernel), _render(expr.b, indices, kernel)
        return f"maximum({a}, {b})" if a and b else None
    if isinstance(expr, Call) and expr.fn == "exp":
        a = _render(expr.args[0], indices, kernel)
        return f"exp({a})" if a else None
    if isinstance(expr, Call) and expr.fn == "cast":
        return _render(expr.args[0], indices, kernel)
    return None
