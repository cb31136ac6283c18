"""Shape reduction: choose small concrete sizes that keep every tiling case of the kernel.

Why a small instance is enough.  A lifted kernel is a loop nest whose loop bounds, tile
offsets and buffer shapes are integer expressions over its size parameters, and whose
tile ops act on each element the same way (copy, gemm, reduce, element-wise bodies do
not look at the index value except through bounds).  What can go wrong in such a kernel
depends only on how tiles fall relative to tensor ends: interior tiles, the boundary
(partial) tile, consecutive tiles that must meet without gap or overlap, several blocks
sharing an output region.  So we keep, for every division ``n // d`` / ``ceildiv(n, d)`` /
``n % d`` in the kernel, the same *case* as the real sizes:

* tile sizes (symbols in on-chip buffer shapes) become 2, 4, 8, ... (pairwise distinct, in
  the order of their real values), so a tile has a first and a last row/column and a
  tile-size mix-up changes the program;
* grid/loop counts that are plain symbols (``split_k``) become at most 2;
* each problem size (a symbol in a global tensor's shape) becomes the smallest value for
  which every division over it has quotient >= min(original quotient, 2) — at least two
  tiles per grid axis and loop — and a zero remainder exactly when the original has one
  (a partial boundary tile stays partial).  A size the file never binds is instantiated
  with a partial tile (``tile * 2 + 1``), the case that needs the guards.

This is the TrainVerify-style reduction DESIGN.md asks for; it is an argument about the
kernel's structure, not a theorem about every integer program, and kernels whose indices
are not of this affine-tile form are reported as unsupported rather than reduced.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

from .errors import Unsupported
from .program import (THREAD_INDEX, BinOp, Const, Expr, GridLaunch, If, Kernel, Loop, Region, Store, TileOp, UnOp,
                      Var, While, walk_expr, walk_stmts)
from .size_env import eval_size

_SEARCH_LIMIT = 512
_PARTNER_LIMIT = 48  # how far a size searched earlier is raised for a later one


@dataclass(frozen=True)
class Reduction:
    """The chosen sizes and, per symbol, the value the file gives it (None = unbound)."""

    sizes: dict[str, int]
    original: dict[str, int | None]
    tile_symbols: frozenset[str]

    def where(self) -> str:
        return f"on reduced sizes {self.describe()}" if self.sizes else "at the kernel's literal sizes"

    def describe(self) -> str:
        parts = []
        for name, value in self.sizes.items():
            before = self.original.get(name)
            parts.append(f"{name}={value}" + (f" (from {before})" if before not in (None, value) else
                                               " (unbound)" if before is None else ""))
        return ", ".join(parts)


def kernel_exprs(kernel: Kernel) -> list[Expr]:
    """Every integer/value expression of the kernel (shapes, extents, indices, values)."""
    exprs: list[Expr] = [d for buf in kernel.params + kernel.allocs for d in buf.shape]
    exprs += [axis.extent for axis in kernel.all_axes]
    for stmt in walk_stmts(kernel.body):
        if isinstance(stmt, Loop):
            exprs.append(stmt.extent)
        elif isinstance(stmt, (If, While)):
            exprs.append(stmt.cond)
        elif isinstance(stmt, Store):
            exprs += list(stmt.indices) + [stmt.value]
        elif isinstance(stmt, TileOp):
            for operand in stmt.operands:
                if isinstance(operand, Region):
                    exprs += list(operand.starts) + list(operand.extents or ())
                else:
                    exprs.append(operand)
    return exprs


def symbols_of(expr: Expr) -> set[str]:
    return {e.name for e in walk_expr(expr) if isinstance(e, Var)}


def _divisions(exprs: list[Expr]) -> list[BinOp]:
    found: list[BinOp] = []
    for expr in exprs:
        for node in walk_expr(expr):
            if isinstance(node, BinOp) and node.op in ("//", "ceildiv", "%") and node not in found:
                found.append(node)
    return found


def division_list(kernel: Kernel) -> list[BinOp]:
    """The kernel's divisions in a fixed order (to pair two elaborations of one kernel)."""
    return _divisions(kernel_exprs(kernel))


_COMPARING = ("min", "max", "<", "<=", ">", ">=", "==", "!=")


def constant_comparisons(kernel: Kernel) -> list[BinOp]:
    """``T.min(T.ceildiv(K, block_K), 8)``, ``T.max(n, 4)``, ``ko < 8``: every comparison of an
    integer constant with an expression over sizes or indices, in a fixed order (to pair two
    elaborations of one kernel, as divisions are)."""
    found: list[BinOp] = []
    for expr in kernel_exprs(kernel):
        for node in walk_expr(expr):
            if isinstance(node, BinOp) and node.op in _COMPARING and _constant_side(node) is not None \
                    and node not in found:
                found.append(node)
    return found + [node for node in _constant_trip_counts(kernel) if node not in found]


def stage_cycles(kernel: Kernel) -> list[tuple[str, int]]:
    """In a kernel with mbarriers, each loop (over a sized count) whose variable picks a stage
    (``k % stages``) or a phase parity (``(k // stages) & 1``), with that ``stages``: the loop
    reuses each stage's barriers, and only a loop reaching ``2 * stages`` takes every stage
    through both parities and back (where a missing arrival or a wrong parity shows)."""
    if not kernel.barriers:
        return []
    loops = {stmt.var for stmt in walk_stmts(kernel.body) if isinstance(stmt, Loop) and not isinstance(stmt.extent, Const)}
    found: list[tuple[str, int]] = []
    for expr in kernel_exprs(kernel):
        for node in walk_expr(expr):
            if isinstance(node, BinOp) and node.op in ("%", "//") and isinstance(node.b, Const) \
                    and isinstance(node.b.value, int) and node.b.value >= 1:
                found += [(var, node.b.value) for var in sorted(symbols_of(node.a) & loops)
                          if (var, node.b.value) not in found]
    return found


def _constant_trip_counts(kernel: Kernel) -> list[BinOp]:
    """A loop run a constant number of times (``T.Pipelined(8)``) over tiles of a sized axis
    (``A[.., ko * block_K]``) compares that count with the axis' tile count: the comparison
    ``min(ceildiv(K, block_K), 8)`` is what its case must keep."""
    shapes = {buf.name: buf.shape for buf in kernel.params}
    found: list[BinOp] = []
    for loop in walk_stmts(kernel.body):
        if not (isinstance(loop, Loop) and isinstance(loop.extent, Const) and isinstance(loop.extent.value, int)
                and loop.extent.value >= 2):
            continue
        for buffer, starts in _accesses(loop.body):
            for axis, start in enumerate(starts):
                tile = _tile_of(start, loop.var)
                shape = shapes.get(buffer)
                if tile is not None and shape is not None and axis < len(shape) and symbols_of(shape[axis]):
                    node = BinOp("min", BinOp("ceildiv", shape[axis], Const(tile)), loop.extent)
                    if node not in found:
                        found.append(node)
    return found


def _accesses(stmts: tuple) -> list[tuple[str, tuple[Expr, ...]]]:
    out: list[tuple[str, tuple[Expr, ...]]] = []
    for stmt in walk_stmts(stmts):
        if isinstance(stmt, TileOp):
            out += [(op.buffer, op.starts) for op in stmt.operands if isinstance(op, Region)]
        exprs = [stmt.value] if isinstance(stmt, Store) else []
        if isinstance(stmt, Store):
            out.append((stmt.buffer, stmt.indices))
        for expr in exprs:
            out += [(node.buffer, node.indices) for node in walk_expr(expr) if type(node).__name__ == "Load"]
    return out


def _tile_of(expr: Expr, var: str) -> int | None:
    """``t`` when ``expr`` holds ``var * t`` (a constant tile of the loop's variable)."""
    for node in walk_expr(expr):
        if isinstance(node, BinOp) and node.op == "*":
            for a, b in ((node.a, node.b), (node.b, node.a)):
                if a == Var(var) and isinstance(b, Const) and isinstance(b.value, int) and b.value >= 1:
                    return b.value
    return None


def _constant_side(node: BinOp) -> tuple[int, Expr] | None:
    """(the constant, the other side) of a comparison with an integer constant."""
    for const, other in ((node.b, node.a), (node.a, node.b)):
        if isinstance(const, Const) and isinstance(const.value, int) and not isinstance(const.value, bool) \
                and not isinstance(other, Const) and symbols_of(other):
            return const.value, other
    return None


def _at_most(kernel: Kernel) -> dict[str, Expr]:
    """Each loop / grid variable -> its largest value (extent - 1): a comparison of ``ko`` with a
    constant keeps its case when the loop still reaches past (or stops before) the constant."""
    ends: dict[str, Expr] = {axis.var: BinOp("-", axis.extent, Const(1)) for axis in kernel.all_axes}
    ends.update({s.var: BinOp("-", s.extent, Const(1)) for s in walk_stmts(kernel.body) if isinstance(s, Loop)})
    return ends


def _side_value(expr: Expr, sizes: dict[str, int | None], ends: dict[str, Expr], depth: int = 0) -> int:
    if isinstance(expr, Var) and expr.name in ends and depth < 8:
        return _side_value(ends[expr.name], sizes, ends, depth + 1)
    if isinstance(expr, BinOp):
        a, b = _side_value(expr.a, sizes, ends, depth), _side_value(expr.b, sizes, ends, depth)
        return eval_size(BinOp(expr.op, Const(a), Const(b)), {})
    if isinstance(expr, UnOp):
        return -_side_value(expr.a, sizes, ends, depth)
    return eval_size(expr, sizes)


def comparison_case(node: BinOp, sizes: dict[str, int | None], ends: dict[str, Expr]) -> int | None:
    """-1, 0 or 1: the compared side's (largest) value below, at or above the constant; None
    when a size has no value."""
    constant, other = _constant_side(node) or (None, None)
    if other is None:
        return None
    try:
        value = _side_value(other, sizes, ends)
    except (KeyError, ZeroDivisionError, TypeError):
        return None
    return (value > constant) - (value < constant)


def _size_symbols(expr: Expr, ends: dict[str, Expr], depth: int = 0) -> set[str]:
    """The sizes an expression depends on, through the loop / grid variables in it."""
    out: set[str] = set()
    for name in symbols_of(expr):
        out |= _size_symbols(ends[name], ends, depth + 1) if name in ends and depth < 8 else {name}
    return out


def _comparisons_kept(cases: list[tuple[BinOp, int]], trial: dict[str, int], ends: dict[str, Expr]) -> bool:
    for node, want in cases:
        have = comparison_case(node, trial, ends)
        if have is not None and have != want:
            return False
    return True


def _describe_case(case: int) -> str:
    return {-1: "below", 0: "at", 1: "above"}[case]


def plan(kernel: Kernel, local: dict[str, int] | None = None, assume_divisible: bool = False,
         real_divisions: dict[BinOp, BinOp] | None = None, taken: dict[int, int] | None = None,
         comparisons: tuple[tuple[BinOp, int], ...] = ()) -> Reduction:
    """Reduced sizes for ``kernel``.  ``local`` pins some symbols.  ``assume_divisible``
    instantiates sizes the file leaves unbound as exact multiples of their tiles (used
    when the kernel has unguarded accesses and the file never says the sizes).
    ``real_divisions`` maps a division of a kernel elaborated at reduced tile sizes to the
    same division at the real tile sizes: its case is the one to keep.  ``taken`` maps
    reduced values already in the kernel (tile sizes TileLang built it with) to their real
    values: a size whose real value differs gets a different reduced value, so ``x / blk_m``
    written where ``x / N`` is meant cannot pass by the two being reduced alike."""
    original = kernel.size_values
    exprs = kernel_exprs(kernel)
    loop_vars = {stmt.var for stmt in walk_stmts(kernel.body) if isinstance(stmt, Loop)} | \
        {axis.var for axis in kernel.all_axes} | set(THREAD_INDEX)  # the thread index: no size
    used = set().union(*(symbols_of(e) for e in exprs)) - loop_vars
    unknown = sorted(name for name in used if name not in original)
    if unknown:
        raise Unsupported(kernel.line, f"size {unknown[0]} has no definition")
    tiles = set().union(*(symbols_of(d) for buf in kernel.allocs for d in buf.shape)) & used
    problem = set().union(*(symbols_of(d) for buf in kernel.params for d in buf.shape)) & used - tiles
    extents = [axis.extent for axis in kernel.all_axes] + \
        [stmt.extent for stmt in walk_stmts(kernel.body) if isinstance(stmt, Loop)]
    counts = {e.name for e in extents if isinstance(e, Var)} & used - tiles - problem

    sizes: dict[str, int] = dict(local or {})
    values: dict[int, int | None] = dict(taken or {})  # reduced value -> real value it stands for
    ends = _at_most(kernel)
    cases = list(comparisons)
    # distinct tile sizes (2, 4, 8, ... in the order of their real values): with equal reduced
    # tiles, ``k * block_N`` written where ``block_K`` is meant would go unnoticed
    order = sorted(tiles, key=lambda n: (original.get(n) or 0, n))
    power = 2
    for name in order:
        value = original.get(name)
        while power in values and (value is None or values[power] != value):
            power *= 2
        chosen = power if value is None or value >= power else value
        sizes.setdefault(name, chosen)
        values.setdefault(sizes[name], value)
        power *= 2
    for name in sorted(counts):
        sizes.setdefault(name, _small(original.get(name), 2))
    divisions = _divisions(exprs)
    # grid axes get different block counts (2, 3, 4 when the real grid has that many): on a
    # square reduced grid, bx and by swapped would compute the same thing
    floors: dict[BinOp, int] = {}
    for rank, axis in enumerate(kernel.all_axes):
        for node in _divisions([axis.extent]):
            floors.setdefault(node, 2 + rank)
    searched = [n for n in sorted(problem) + sorted(used - tiles - problem - counts) if n not in sizes]
    for number, name in enumerate(searched):
        avoid = {v for v, real in values.items() if real is None or real != original.get(name)}
        search = functools.partial(_search, name, original=original, divisions=divisions, kernel=kernel,
                                   assume_divisible=assume_divisible, real_divisions=real_divisions or {},
                                   floors=floors, avoid=avoid, cases=cases, ends=ends)
        try:
            sizes[name] = search(sizes)
        except Unsupported:  # a size searched before it may need to be larger: ``(height + 2 * pad - taps) // 2``
            sizes[name] = _search_with_partner(name, search, searched[:number], sizes, original, divisions, kernel,
                                               assume_divisible, real_divisions or {}, floors)
        values.setdefault(sizes[name], original.get(name))
    _equal_sizes_stay_equal(searched, sizes, original, divisions, assume_divisible, real_divisions or {}, floors)
    for node, want in cases:  # a count compared with a constant (T.min(ceildiv(K, block_K), 8)) keeps its case
        have = comparison_case(node, sizes, ends)
        if have is not None and have != want:
            raise Unsupported(kernel.line, f"no small sizes keep {node} {_describe_case(want)} its constant as at "
                              f"the real sizes (at {', '.join(f'{k}={v}' for k, v in sizes.items())} it is "
                              f"{_describe_case(have)}), so the reduced kernel would not take the real case")
    return Reduction(sizes, {name: original.get(name) for name in sizes}, frozenset(tiles))


def _equal_sizes_stay_equal(names: list[str], sizes: dict[str, int], original: dict[str, int | None],
                            divisions: list[BinOp], assume_divisible: bool, real_divisions: dict[BinOp, BinOp],
                            floors: dict[BinOp, int]) -> None:
    """Problem sizes equal in the real call (seq_q == seq_kv, M == N) stay equal: a causal
    bound compares positions along both, and reduced apart it can hide an off-by-one."""
    groups: dict[int, list[str]] = {}
    for name in names:
        if original.get(name) is not None:
            groups.setdefault(original[name], []).append(name)
    for group in (g for g in groups.values() if len(g) > 1):
        for candidate in range(max(sizes[n] for n in group), _SEARCH_LIMIT):
            trial = dict(sizes, **{n: candidate for n in group})
            relevant = [d for d in divisions if symbols_of(d.a) & set(group) and symbols_of(d) <= set(trial)]
            if all(_same_case(d, trial, original, True, assume_divisible, real_divisions.get(d), floors.get(d, 2))
                   for d in relevant):
                sizes.update({n: candidate for n in group})
                break


def _small(value: int | None, cap: int) -> int:
    return cap if value is None else max(1, min(value, cap))


def _search(name: str, fixed: dict[str, int], *, original: dict[str, int | None], divisions: list[BinOp],
            kernel: Kernel, assume_divisible: bool, real_divisions: dict[BinOp, BinOp],
            floors: dict[BinOp, int] | None = None, avoid: set[int] | None = None,
            cases: list[tuple[BinOp, int]] | None = None, ends: dict[str, Expr] | None = None) -> int:
    relevant = [d for d in divisions if name in symbols_of(d.a)
                and symbols_of(d) <= set(fixed) | {name}]
    ends = ends or {}
    compared = [(node, want) for node, want in cases or ()
                if name in _size_symbols(node, ends) and _size_symbols(node, ends) <= set(fixed) | {name}]
    if compared:  # the comparisons with constants over this size: searched with the divisions
        return _search_compared(name, fixed, relevant, compared, ends, original, kernel, assume_divisible,
                                real_divisions, floors or {}, avoid or set())
    known = all(original.get(s) is not None for d in relevant for s in symbols_of(d))
    avoid = avoid or set()
    if not relevant:
        value = original.get(name)
        if value is not None and value <= 3:
            return value
        return next(c for c in range(3, _SEARCH_LIMIT) if c not in avoid)
    for strict, skip in ((True, avoid), (True, set()), (False, set())):
        for candidate in range(1, _SEARCH_LIMIT):
            if candidate in skip:
                continue
            trial = dict(fixed, **{name: candidate})
            if all(_same_case(d, trial, original if known else None, strict, assume_divisible, real_divisions.get(d),
                              (floors or {}).get(d, 2)) for d in relevant):
                return candidate
    raise Unsupported(kernel.line, f"no small value of {name} keeps the kernel's tiling cases")


def _search_compared(name: str, fixed: dict[str, int], relevant: list[BinOp], compared: list[tuple[BinOp, int]],
                     ends: dict[str, Expr], original: dict[str, int | None], kernel: Kernel, assume_divisible: bool,
                     real_divisions: dict[BinOp, BinOp], floors: dict[BinOp, int], avoid: set[int]) -> int:
    """The smallest value of ``name`` keeping its divisions' cases and each comparison with a
    constant on the side of the constant it is on at the real sizes."""
    known = all(original.get(s) is not None for d in relevant for s in symbols_of(d))
    for strict, skip in ((True, avoid), (True, set()), (False, set())):
        for candidate in range(1, _SEARCH_LIMIT):
            if candidate in skip:
                continue
            trial = dict(fixed, **{name: candidate})
            if all(_same_case(d, trial, original if known else None, strict, assume_divisible, real_divisions.get(d),
                              floors.get(d, 2)) for d in relevant) and _comparisons_kept(compared, trial, ends):
                return candidate
    raise Unsupported(kernel.line, f"no small value of {name} keeps the kernel's tiling cases and its comparisons "
                      "with constants")


def _search_with_partner(name: str, search: Any, before: list[str], sizes: dict[str, int],
                         original: dict[str, int | None], divisions: list[BinOp], kernel: Kernel,
                         assume_divisible: bool, real_divisions: dict[BinOp, BinOp], floors: dict[BinOp, int]) -> int:
    """``name`` with one size searched before it (and sharing a division with it) raised, up to
    its real value, until both keep their tiling cases; that size's own cases are re-checked at
    its new value."""
    partners = dict.fromkeys(s for d in divisions if name in symbols_of(d)
                             for s in sorted(symbols_of(d)) if s in before)
    for partner in partners:
        own = [d for d in divisions if partner in symbols_of(d) and name not in symbols_of(d)]
        ceiling = min(_PARTNER_LIMIT, (original.get(partner) or _PARTNER_LIMIT) + 1)  # never above its real value
        for value in range(sizes[partner] + 1, ceiling):
            trial = dict(sizes, **{partner: value})
            if not all(_same_case(d, trial, original, False, assume_divisible, real_divisions.get(d), floors.get(d, 2))
                       for d in own if symbols_of(d) <= set(trial)):
                continue
            try:
                found = search(trial)
            except Unsupported:
                continue
            sizes[partner] = value
            return found
    raise Unsupported(kernel.line, f"no small value of {name} keeps the kernel's tiling cases")


def _same_case(div: BinOp, trial: dict[str, int], original: dict[str, int | None] | None, strict: bool,
               assume_divisible: bool = False, real_div: BinOp | None = None, floor: int = 2) -> bool:
    try:
        n, d = eval_size(div.a, trial), eval_size(div.b, trial)
    except (KeyError, ZeroDivisionError):
        return False
    if d <= 0:
        return False
    q, r = n // d, n % d
    real = real_div or div
    if original is not None and any(original.get(name, 0) is None for name in symbols_of(real)):
        original = None  # a size with no real value (unbound, or given at run time): any case may come
    if original is None:
        wanted = (r == 0) if assume_divisible else (r != 0)
        return q >= floor and (wanted or not strict)
    try:
        n0, d0 = eval_size(real.a, original), eval_size(real.b, original)
    except (KeyError, ZeroDivisionError):
        return q >= floor
    q0, r0 = n0 // d0, n0 % d0
    return q >= min(q0, floor) and (r == 0) == (r0 == 0)


def concrete_cost(kernel: Kernel, sizes: dict[str, int]) -> int:
    """Rough count of element operations of one run, to refuse runs that would not finish."""
    blocks, per_block, trips, _ = _cost_parts(kernel, sizes)
    return blocks * per_block * trips


def describe_cost(kernel: Kernel, sizes: dict[str, int]) -> str:
    """What makes a run costly, in the kernel's terms: blocks, on-chip elements, loop trips and
    the largest on-chip buffer with its shape at these sizes."""
    blocks, per_block, trips, largest = _cost_parts(kernel, sizes)
    text = f"about {blocks * per_block * trips:,} element operations: {blocks:,} blocks, {per_block:,} on-chip " \
           f"elements per block, {trips:,} serial loop trips"
    return text + (f"; largest on-chip buffer {largest}" if largest else "")


def _cost_parts(kernel: Kernel, sizes: dict[str, int]) -> tuple[int, int, int, str]:
    launches = [kernel.grid] + [s.axes for s in walk_stmts(kernel.body) if isinstance(s, GridLaunch)]
    blocks = max(math.prod(max(eval_size(a.extent, sizes), 1) for a in axes) for axes in launches)
    per_block, largest, widest = 0, "", 0
    for buf in kernel.allocs:
        dims = [max(eval_size(d, sizes), 1) for d in buf.shape]
        count = math.prod(dims)
        per_block += count
        if count > widest:
            widest, largest = count, f"{buf.name} {dims}"
    return blocks, max(per_block, 1), _trips(kernel.body, sizes), largest


def _trips(stmts: tuple, sizes: dict[str, int]) -> int:
    """How many times the innermost serial loop bodies run: nested loops multiply, loops one after
    the other add (a split kernel's three passes over ``num_split`` are 3 * 7 runs, not 7 ** 3);
    a loop whose extent is not a size (a run-time trip count) counts once."""
    total = 0
    for stmt in stmts:
        if isinstance(stmt, Loop) and stmt.kind != "parallel":
            try:
                extent = max(eval_size(stmt.extent, sizes), 1)
            except KeyError:
                extent = 1
            total += extent * _trips(stmt.body, sizes)
        elif isinstance(stmt, (Loop, While, GridLaunch)):
            total += _trips(stmt.body, sizes)
        elif isinstance(stmt, If):
            total += max(_trips(stmt.then, sizes), _trips(stmt.orelse, sizes))
    return max(total, 1)
