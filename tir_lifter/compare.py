"""Compare two lifted kernels at concrete sizes (the text reading vs TileLang's PrimFunc).

The text frontend keeps sizes symbolic and leaves copy extents implicit, TileLang folds
every size to a literal and spells extents out; ``normalize`` brings both to the same
concrete form (sizes substituted and folded, implicit extents filled in, source lines
dropped) so equality means "the same program".
"""
from __future__ import annotations

from dataclasses import fields, is_dataclass, replace
from typing import Any

from .program import BinOp, Const, GridAxis, GridLaunch, If, Kernel, Loop, TileOp, UnOp, Var, While
from .size_env import eval_size


def _fold(expr: Any, sizes: dict[str, int]) -> Any:
    if isinstance(expr, Var) and expr.name in sizes:
        return Const(sizes[expr.name])
    if isinstance(expr, BinOp):
        a, b = _fold(expr.a, sizes), _fold(expr.b, sizes)
        if isinstance(a, Const) and isinstance(b, Const) and _int(a.value) and _int(b.value):
            try:
                return Const(eval_size(BinOp(expr.op, a, b), {}))
            except (KeyError, ZeroDivisionError):
                pass
        if expr.op == "+" and b == Const(0):
            return a
        if expr.op == "+" and a == Const(0):
            return b
        if expr.op == "*" and (a == Const(0) or b == Const(0)) and _int_expr(a) and _int_expr(b):
            return Const(0)
        return BinOp(expr.op, a, b)
    if isinstance(expr, UnOp):
        return UnOp(expr.op, _fold(expr.a, sizes))
    if isinstance(expr, (tuple, list)):
        return type(expr)(_fold(e, sizes) for e in expr)
    if is_dataclass(expr) and not isinstance(expr, type):
        folded = replace(expr, **{f.name: _fold(getattr(expr, f.name), sizes) for f in fields(expr)
                                  if f.name not in ("line", "attrs", "source")})
        # a cast's operand dtype: only the PrimFunc says it (the source reading does not type values)
        return replace(folded, source=None) if any(f.name == "source" for f in fields(expr)) else folded
    return expr


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_expr(expr: Any) -> bool:
    return isinstance(expr, (Var, BinOp)) or (isinstance(expr, Const) and _int(expr.value))


def _fill_extents(stmt: Any, shapes: dict[str, tuple[int, ...]]) -> Any:
    if isinstance(stmt, TileOp) and stmt.kind in ("copy", "atomic_add"):
        src, dst = stmt.operands
        if src.extents is None and dst.extents is not None:
            src = replace(src, extents=_align(dst.extents, len(src.starts)))
        elif dst.extents is None and src.extents is not None:
            dst = replace(dst, extents=_align(src.extents, len(dst.starts)))
        return replace(stmt, operands=(src, dst), line=None)
    if isinstance(stmt, (Loop, While, GridLaunch)):
        return replace(stmt, body=tuple(_fill_extents(s, shapes) for s in stmt.body), line=None)
    if isinstance(stmt, If):
        return replace(stmt, then=tuple(_fill_extents(s, shapes) for s in stmt.then),
                       orelse=tuple(_fill_extents(s, shapes) for s in stmt.orelse), line=None)
    return replace(stmt, line=None)


def _align(extents: tuple, rank: int) -> tuple:
    core = [e for e in extents if e != Const(1)] or [Const(1)]
    return tuple([Const(1)] * (rank - len(core)) + core)


def normalize(kernel: Kernel, sizes: dict[str, int]) -> Kernel:
    folded = _fold(kernel, sizes)
    buffers = lambda bufs: tuple(replace(b, line=None) for b in bufs)  # noqa: E731
    shapes = {b.name: b.shape for b in folded.params + folded.allocs}
    body = tuple(_fill_extents(s, shapes) for s in folded.body)
    return Kernel(name="", params=buffers(folded.params), allocs=buffers(folded.allocs),
                  grid=tuple(GridAxis(a.var, a.extent) for a in folded.grid), body=body)


def difference(a: Kernel, b: Kernel) -> str | None:
    """None when equal, else a short description of the first difference."""
    if a == b:
        return None
    for label in ("params", "allocs", "grid"):
        if getattr(a, label) != getattr(b, label):
            return f"{label} differ: {getattr(a, label)} vs {getattr(b, label)}"
    for x, y in zip(a.body, b.body):
        if x != y:
            return f"statement differs: {x} vs {y}"
    return f"bodies have {len(a.body)} vs {len(b.body)} statements"

