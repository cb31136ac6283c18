"""The faulty statement of a spec violation: where the wrong value went wrong, not where it was stored.

A wrong output element is stored by the kernel's last write, but the fault is usually earlier:
a load from the wrong tile, a loop that stops a tile short.  The proof already has the
element's term on both sides, so compare what each *depends on* (the input elements it reads):

* the kernel's value reads elements the spec's does not: the statement that read one of them
  from global memory is the faulty one (a tile offset, a swapped block index, a tile-size
  mix-up in a load);
* it reads exactly what the spec gives for *another* element and some output element is
  written by no block or by two: the value is right but stored in the wrong place, the write
  is faulty;
* it reads only some of the spec's elements: a statement reading past a tensor's edge (0
  there, TileLang's guard) is shifted; else a loop or condition around the statements reading
  the missing ones stopped too early (the innermost such one the value came through);
* it reads the same elements: the values are combined wrongly; a statement the value came
  through that converts a float to an integer or a narrower float is named, else the write.

Two cases come before these.  The value is the one the spec gives *another* element (the same
input elements, none of its own element's, and on the witness's inputs the same number), of two
tensors or where the spec reads nothing: every load is right together, the write put it in the
wrong place.  The value only gains elements, or loses elements its own block did read: the loads
were right and something after them let the elements in or kept them out: a conversion of a
float to an integer the value came through, else a warp shuffle (in per-thread code the lanes'
elements reach one lane's value only through it), else a condition on indices it came through (a
``T.if_then_else`` store, an ``if``), is named.  A loss of elements no block ever read is a
loop's (it stopped short), not a condition's; a loss of elements other blocks read and this one
never did, through no loop, is the condition's around their reads (false in this block).  A NaN
where the spec has a number, through a mask with an infinite branch, is the mask's.

Only statements the wrong value came through (its provenance) are candidates.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import z3

from .bits import BIT_OPERATIONS, REINTERPRET
from .counterexample import bit_patterns
from .program import (GLOBAL, PARALLEL, WARP_GROUP, WARP_SHUFFLE, Call, Const, GridLaunch, If, Kernel, Load, Loop,
                      Region, Select, Stmt, Store, TileOp, UnOp, Var, While, walk_expr, walk_stmts)
from .source_lines import statement_columns


def _inputs(term: Any, element_of: dict[int, tuple[str, tuple[int, ...]]], memo: dict[int, frozenset]) -> frozenset:
    """The input elements a Z3 term reads (its free constants that are input elements)."""
    if not z3.is_expr(term):
        return frozenset()
    key = term.get_id()
    if key in memo:
        return memo[key]
    if key in element_of:
        found = frozenset({element_of[key]})
    elif z3.is_app_of(term, z3.Z3_OP_ITE) and _decided(term.arg(0)) is not None:
        # a row picked by a constant index (a sampled index tensor): an If over every row, decided
        found = _inputs(term.arg(1) if _decided(term.arg(0)) else term.arg(2), element_of, memo)
    else:
        found = frozenset().union(*(_inputs(child, element_of, memo) for child in term.children())) \
            if term.num_args() else frozenset()
    memo[key] = found
    return found


def _decided(cond: Any) -> bool | None:
    """A condition of constants only (``1 == 0``): its value; else None."""
    if z3.is_true(cond) or z3.is_false(cond):
        return z3.is_true(cond)
    constant = lambda c: z3.is_rational_value(c) or z3.is_int_value(c) or z3.is_true(c) or z3.is_false(c)  # noqa: E731
    if not cond.children() or not all(constant(z3.simplify(c)) for c in cond.children()):
        return None
    value = z3.simplify(cond)
    return z3.is_true(value) if z3.is_true(value) or z3.is_false(value) else None


@dataclass
class _Shape:
    """Statement lines in program order, the loop/condition lines around each statement's line
    (outermost first), the lines of statements with a narrowing conversion, of those converting a
    float to an integer, of the conditions on indices (an ``if``, a store of a ``T.if_then_else``),
    of the loops, and of the selects with an infinite branch."""
    order: list[int] = field(default_factory=list)
    around: dict[int, list[int]] = field(default_factory=dict)
    narrowing: set[int] = field(default_factory=set)
    decoding: set[int] = field(default_factory=set)  # statements with a bit operation or reinterpret
    to_integer: set[int] = field(default_factory=set)
    deciding: set[int] = field(default_factory=set)
    loops: set[int] = field(default_factory=set)
    masking: set[int] = field(default_factory=set)


def _shape(kernel: Kernel) -> _Shape:
    shape = _Shape()
    order, around = shape.order, shape.around

    def visit(stmts: tuple[Stmt, ...], stack: list[int]) -> None:
        for stmt in stmts:
            if stmt.line is not None and stmt.line not in order:
                order.append(stmt.line)
            if stmt.line is not None:
                around.setdefault(stmt.line, list(stack))
            if isinstance(stmt, Store) and _narrows(stmt.value):
                shape.narrowing.add(stmt.line)
            if isinstance(stmt, Store) and any(isinstance(n, Call) and n.fn in (*BIT_OPERATIONS, REINTERPRET)
                                               for n in walk_expr(stmt.value)):
                shape.decoding.add(stmt.line)
            if isinstance(stmt, Store) and _narrows(stmt.value, to_integer=True):
                shape.to_integer.add(stmt.line)
            if isinstance(stmt, Store) and stmt.line is not None:
                selects = [n for n in walk_expr(stmt.value) if isinstance(n, Select)]
                if selects:
                    shape.deciding.add(stmt.line)
                if any(_infinite(branch) for n in selects for branch in (n.a, n.b)):
                    shape.masking.add(stmt.line)
            if isinstance(stmt, If) and stmt.line is not None and not (
                    isinstance(stmt.cond, Call) and stmt.cond.fn == WARP_GROUP):
                shape.deciding.add(stmt.line)
            if isinstance(stmt, (Loop, While)) and stmt.line is not None:
                shape.loops.add(stmt.line)
            if isinstance(stmt, (Loop, While, If)) and stmt.line is not None:
                inner = stack + [stmt.line]
            else:
                inner = stack
            if isinstance(stmt, (Loop, While, GridLaunch)):
                visit(stmt.body, inner)
            elif isinstance(stmt, If):
                visit(stmt.then, inner)
                visit(stmt.orelse, inner)
    visit(kernel.body, [])
    return shape


def _narrows(expr: Any, to_integer: bool = False) -> bool:
    from verifier.rules.casts import kind, rounded
    for node in walk_expr(expr):
        if isinstance(node, Call) and node.fn == "cast" and node.dtype:
            source = node.source or "float32"
            if kind(source) == "float" and (kind(node.dtype) != "float" or (rounded(source, node.dtype)
                                                                              and not to_integer)):
                return True
    return False


def _infinite(expr: Any) -> bool:
    """An infinity constant, or its negation."""
    if isinstance(expr, UnOp):
        return _infinite(expr.a)
    return isinstance(expr, Const) and isinstance(expr.value, float) and np.isinf(expr.value)


def masking_line(kernel: Kernel, through: tuple[int, ...]) -> int | None:
    """The first statement the value came through that stores a select with an infinite branch
    (a mask): a NaN where the spec has a number is -inf - -inf, every element of a row masked."""
    shape = _shape(kernel)
    lines = [ln for ln in shape.order if ln in shape.masking and ln in through]
    return lines[0] if lines else None


def _shuffles(kernel: Kernel) -> set[int]:
    """Lines of stores of a warp shuffle (another lane's value)."""
    return {stmt.line for stmt in walk_stmts(kernel.body) if isinstance(stmt, Store) and stmt.line is not None
            and any(isinstance(e, Call) and e.fn == WARP_SHUFFLE for e in walk_expr(stmt.value))}


def faulty_line(kernel: Kernel, cell: tuple[str, tuple[int, ...]], got: np.ndarray, want: dict[str, np.ndarray],
                tensors: dict[str, np.ndarray], reads: dict[tuple[str, tuple[int, ...]], set[int]],
                through: tuple[int, ...], written_at: int | None, guarded: tuple[int, ...] = (),
                misplaced: bool = False, read_by: dict[tuple[str, tuple[int, ...]], set[tuple[int, int]]] | None = None,
                writer: int | None = None, numbers: tuple[np.ndarray, np.ndarray] | None = None
                ) -> tuple[int | None, str]:
    """(line, why) of the statement to name for the wrong ``cell``; ``got`` is the kernel's
    output array of terms, ``want`` the spec's arrays, ``through`` the lines the value came
    through, ``written_at`` its last write, ``guarded`` the lines of global accesses past a
    tensor's edge (TileLang's guard reads 0 there), ``misplaced`` whether some output element is
    written by no block or by two (stores in the wrong place leave both), ``read_by`` the (line,
    block) of each read of an input element, ``writer`` the block that wrote ``cell``, ``numbers``
    the kernel's and the spec's output arrays on the witness's inputs.  ``(written_at, "")`` when
    nothing is more precise."""
    name, index = cell
    element_of = {}
    for tensor, array in tensors.items():
        for idx, term in np.ndenumerate(np.asarray(array, dtype=object)):
            # an integer tensor's element is the real of an integer unknown: either form is the element
            for form in ((term, term.arg(0)) if z3.is_expr(term) and z3.is_to_real(term) else (term,)):
                if z3.is_expr(form) and z3.is_const(form) and not z3.is_rational_value(form) \
                        and not z3.is_int_value(form) and not z3.is_true(form) and not z3.is_false(form):
                    element_of[form.get_id()] = (tensor, tuple(int(i) for i in idx))
                    element_of[term.get_id()] = (tensor, tuple(int(i) for i in idx))
    memo: dict[int, frozenset] = {}
    have, should = _inputs(got[index], element_of, memo), _inputs(want[name][index], element_of, memo)
    shape = _shape(kernel)
    order, around, narrowing = shape.order, shape.around, shape.narrowing
    candidates = set(through) | ({written_at} if written_at else set())
    rank = {line: position for position, line in enumerate(order)}
    first = lambda lines: min(lines, key=lambda ln: rank.get(ln, len(order)))  # noqa: E731
    read_by = read_by or {}
    own = lambda element: {ln for ln, block in read_by.get(element, ()) if block == writer}  # noqa: E731
    extra = have - should
    if misplaced and have and have != should and any(_inputs(want[name][other], element_of, memo) == have
                                       for other in np.ndindex(want[name].shape) if other != index):
        return written_at, "the value another element should have is stored here"
    lost = should - have
    other = _value_of_another(name, index, got, have, should, want, element_of, memo, numbers)
    if other is not None and written_at:
        return written_at, f"the value the spec gives {name}{list(other)} is stored here"
    if extra and lost and not {t for t, _ in extra} & {t for t, _ in lost}:
        # it gains elements of one tensor and loses elements of another, which a statement read past its
        # edge: that read is shifted, so the other tensor's elements meet the wrong partners
        lost_readers = {line for (t, _), lines in reads.items() if t in {u for u, _ in lost} for line in lines}
        shifted = [ln for ln in order if ln in guarded and ln in candidates and ln in lost_readers]
        if shifted:
            return shifted[0], f"it reads past the edge of {'/'.join(sorted({t for t, _ in lost}))} (0 there) " \
                               "instead of elements the spec uses"
    # only gained, or lost what its own block read: the loads were right, a later statement let the
    # elements in or kept them out
    dropped = bool(lost) and not extra and writer is not None and all(own(element) for element in lost)
    if (extra and not lost) or dropped:
        tensor = "/".join(sorted({t for t, _ in (extra or lost)}))
        converted = [ln for ln in order if ln in shape.to_integer and ln in candidates]
        if converted:
            return converted[0], "it converts the value to an integer"
        # per-thread code: what the block's lanes read reaches one lane's value only through a warp
        # shuffle, so elements the block read and the value lost (or gained) passed one from a wrong lane
        exchanged = sorted(_shuffles(kernel) & candidates, key=lambda ln: rank.get(ln, len(order)))
        if exchanged and (dropped or all(own(element) for element in extra)):
            return exchanged[0], (f"its warp shuffle brings {tensor} elements the spec does not use here (which "
                                  "another lane read) into the value" if extra else
                                  f"its warp shuffle leaves {tensor} elements the spec uses (which other lanes "
                                  "read) out of the value")
        deciding = [ln for ln in order if ln in shape.deciding and ln in candidates]
        if deciding:
            return deciding[0], (f"its condition lets {tensor} elements the spec does not use here into the value"
                                 if extra else f"its condition keeps {tensor} elements the spec uses (which the "
                                 "block reads) out of the value")
    if extra:
        lines = {line for element in extra for line in own(element) if line in candidates} or \
            {line for element in extra for line in reads.get(element, ()) if line in candidates}
        if lines:
            tensor = sorted({t for t, _ in extra})[0]
            return first(lines), f"it reads {tensor} elements the spec does not use here"
    missing = should - have
    if missing and not extra:
        buffers = {t for t, _ in missing}
        readers = {line for (t, _), lines in reads.items() if t in buffers for line in lines if line in candidates}
        # the elements it misses were read as 0 past the edge: the statement reading them is off (another
        # statement's reads past an edge, an im2col's padding, say nothing about these elements)
        shifted = [ln for ln in order if ln in guarded and ln in candidates and ln in readers]
        loops = [ln for reader in sorted(readers, key=lambda ln: rank.get(ln, 0))
                 for ln in reversed(around.get(reader, [])) if ln in candidates]
        if not any(element in read_by for element in missing):  # no block read them: a loop stopped short
            loops = [ln for ln in loops if ln in shape.loops] or loops
        # a shifted read loses elements of the one tensor it reads; a loop that stops short loses
        # elements of every tensor read inside it: with several, a loop around all their readers
        common = [ln for ln in loops if all(any(ln in around.get(reader, []) for (t, _), lines in reads.items()
                                                if t == buffer for reader in lines if reader in candidates)
                                            for buffer in buffers)]
        if shifted and not (len(buffers) > 1 and common):
            return shifted[0], f"it reads past the edge of {'/'.join(sorted(buffers))} (0 there) instead of " \
                               "elements the spec uses"
        if loops:
            return (common or loops)[0], f"the loop or condition stops before reading every " \
                                         f"{'/'.join(sorted(buffers))} element the spec uses"
        # the value came through no loop around their reads.  Other blocks read some of them, this one
        # none: a condition around those reads was false here; no block read any: the loop around the
        # statements reading those tensors stopped short
        everyone = {line for element in missing for line, _ in read_by.get(element, ())}
        if writer is not None and everyone and not any(own(element) for element in missing):
            skipping = [ln for reader in sorted(everyone, key=lambda ln: rank.get(ln, 0))
                        for ln in reversed(around.get(reader, [])) if ln in shape.deciding]
            if skipping:
                return skipping[0], f"its condition is false in this block, which skips reading the " \
                                    f"{'/'.join(sorted(buffers))} elements the spec uses (other blocks read them)"
        if writer is not None and not everyone:
            tensor_readers = [{line for (t, _), lines in reads.items() if t == buffer for line in lines}
                              for buffer in buffers]
            short = [ln for ln in reversed(order) if ln in shape.loops and tensor_readers and all(
                any(ln in around.get(reader, []) for reader in lines) for lines in tensor_readers)]
            if short:
                return short[0], f"the loop stops before reading every {'/'.join(sorted(buffers))} element " \
                                 "the spec uses (no block reads them)"
    if have == should:
        converted = [ln for ln in order if ln in narrowing and ln in candidates]
        if converted:
            return converted[0], "it converts the value to a narrower type"
        decoding = [ln for ln in order if ln in shape.decoding and ln in candidates]
        patterns = bit_patterns(kernel)
        # the same inputs, another value, one statement on the way decoding bits, and every element
        # of the tensors read as bits read inside their edges (no misplaced load of them)
        if len(decoding) == 1 and patterns and all(
                (t, tuple(int(i) for i in idx)) in reads for t in patterns
                for idx in np.ndindex(np.shape(tensors[t]))) and \
                not any(ln in guarded for (t, _), lines in reads.items() if t in patterns for ln in lines):
            return decoding[0], f"it decodes the bits of {'/'.join(patterns)} into a value other than the spec's " \
                                "(from the same inputs)"
    return written_at, ""


def _value_of_another(name: str, index: tuple[int, ...], got: np.ndarray, have: frozenset, should: frozenset,
                      want: dict[str, np.ndarray], element_of: dict, memo: dict,
                      numbers: tuple[np.ndarray, np.ndarray] | None) -> tuple[int, ...] | None:
    """The other element whose spec value the kernel's value is: the same input elements, none of
    those of its own element, and the same number on the witness's inputs.  A load from the wrong
    place of a one-tensor computation gives another element's value too; there the write is named
    only when the spec depends on the position (some of its elements read no input, a mask) and
    the elements the kernel computes from inputs are the spec's values permuted."""
    if numbers is None or not have or have & should:
        return None
    values, expected = numbers
    by_inputs: dict[frozenset, list[tuple[int, ...]]] = {}
    for other in np.ndindex(want[name].shape):
        by_inputs.setdefault(_inputs(want[name][other], element_of, memo), []).append(other)

    def match(cell: tuple[int, ...], inputs: frozenset) -> tuple[int, ...] | None:
        value = float(values[cell])
        for other in by_inputs.get(inputs, ()):
            spec = float(expected[other])
            if (np.isnan(value) and np.isnan(spec)) or abs(value - spec) <= 1e-6 * (1.0 + abs(spec)):
                return other
        return None
    other = match(index, have)
    if other is None or other == index:
        return None
    if not should or len({t for t, _ in have | should}) > 1:
        return other
    if frozenset() not in by_inputs or len(by_inputs) < 2:  # the spec does not depend on the position
        return None
    # a permutation: each spec value that reads inputs computed once (a shifted load computes some
    # twice or not at all, reading past the edge)
    matched = []
    for cell in np.ndindex(got.shape):
        inputs = _inputs(got[cell], element_of, memo)
        if inputs:
            matched.append(match(cell, inputs))
    wanted = {cell for inputs, cells in by_inputs.items() if inputs for cell in cells}
    return other if None not in matched and len(matched) == len(set(matched)) and set(matched) == wanted else None


# --- a read of never-written memory: where the missing initialization belongs ----------------

# the operands a tile op writes (any other kind: every region operand, so a write is never missed)
_WRITTEN_OPERANDS = {"copy": (1,), "fill": (0,), "gemm": (2,), "reduce": (1,), "atomic_add": (1,),
                     "barrier_arrive": (), "barrier_wait": ()}


def _writes(stmt: Stmt, names: set[str]) -> bool:
    if isinstance(stmt, Store):
        return stmt.buffer in names
    if isinstance(stmt, TileOp):
        slots = _WRITTEN_OPERANDS.get(stmt.kind, tuple(range(len(stmt.operands))))
        return any(isinstance(stmt.operands[i], Region) and stmt.operands[i].buffer in names
                   for i in slots if i < len(stmt.operands))
    return False


def _aliases(kernel: Kernel, name: str) -> set[str]:
    """``name`` and the on-chip buffers sharing its memory (``T.reshape`` views and their base)."""
    names = {name}
    for _ in range(2):
        names |= {view.name for view, base in kernel.onchip_views if base in names}
        names |= {base for view, base in kernel.onchip_views if view.name in names}
    return names


def _path_to(stmts: tuple[Stmt, ...], line: int, names: set[str]) -> tuple[list[Stmt] | None, bool]:
    """The statements around the first statement on ``line`` in program order (outermost
    first, that statement last), and whether a statement before it writes one of ``names``."""
    for stmt in stmts:
        if stmt.line == line and not isinstance(stmt, (Loop, While, If, GridLaunch)):
            return [stmt], False
        if isinstance(stmt, (Loop, While, GridLaunch)):
            path, wrote = _path_to(stmt.body, line, names)
        elif isinstance(stmt, If):
            path, wrote = _path_to(stmt.then + stmt.orelse, line, names)
        else:
            path, wrote = None, _writes(stmt, names)
        if path is not None:
            return [stmt] + path, wrote
        if wrote:
            return None, True
    return None, False


def _publishes(kernel: Kernel, stmts: tuple[Stmt, ...], names: set[str]) -> bool:
    """A statement in ``stmts`` (nested ones included) writes a global tensor from one of ``names``."""
    def is_global(buffer: str) -> bool:
        try:
            return kernel.buffer(buffer).scope == GLOBAL
        except KeyError:
            return False
    for stmt in walk_stmts(stmts):
        if isinstance(stmt, TileOp) and stmt.kind == "copy" and len(stmt.operands) > 1:
            src, dst = stmt.operands[0], stmt.operands[1]
            if isinstance(src, Region) and isinstance(dst, Region) and src.buffer in names and is_global(dst.buffer):
                return True
        if isinstance(stmt, Store) and is_global(stmt.buffer) and any(
                isinstance(node, Load) and node.buffer in names for node in walk_expr(stmt.value)):
            return True
    return False


def _statement_columns(kernel: Kernel) -> dict[int, int]:
    """Line -> 1-based column of each source statement (from the file when the lift has none)."""
    if kernel.columns:
        return dict(kernel.columns)
    try:
        with open(kernel.source or "", encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
    except (OSError, SyntaxError, ValueError):
        return {}
    return dict(statement_columns(tree))


def missing_initialization(kernel: Kernel, buffer: str, line: int | None) -> tuple[int, int, str, int] | None:
    """Where the initialization of ``buffer`` belongs when the statement on ``line`` reads it
    before anything was written to it and no statement before that one (in program order)
    writes it: ``(after, anchor, what, start)``, the source statement after which it belongs,
    the line of the outermost loop around the read (else the reading statement itself), that
    statement's kind, and the line that opens the scope holding the anchor (the loop or
    ``T.Kernel`` around it): anywhere from there to the anchor is where the missing statement
    goes.  None when some earlier statement writes the buffer (the read is then of an element
    that write missed: not a missing initialization) or a line is unknown."""
    if line is None:
        return None
    path, wrote = _path_to(kernel.body, line, _aliases(kernel, buffer))
    if path is None or wrote:
        return None
    structural = lambda s: isinstance(s, GridLaunch) or (  # noqa: E731 - launches and warp groups order nothing
        isinstance(s, If) and isinstance(s.cond, Call) and s.cond.fn == WARP_GROUP)
    candidates = [s for s in path if not structural(s)]
    # the outermost loop around the read that does not hand the buffer on to global memory: a loop
    # whose every iteration copies it out (a persistent kernel's loop over tiles) needs it fresh
    # each iteration, so the initialization belongs inside it
    names = _aliases(kernel, buffer)
    loops = [s for s in candidates if isinstance(s, (Loop, While))]
    loops = [s for s in loops if not _publishes(kernel, s.body, names)] or loops
    anchor = loops[0] if loops else candidates[0] if candidates else None
    columns = _statement_columns(kernel)
    if anchor is None or anchor.line not in columns:
        return None
    before = [ln for ln, col in columns.items() if ln < anchor.line and col <= columns[anchor.line]]
    if not before or (kernel.line is not None and max(before) < kernel.line):
        return None
    around = path.index(anchor)
    start = path[around - 1].line if around else kernel.grid_line
    if start is None or start >= anchor.line:
        start = max(before)
    return max(before), anchor.line, "loop" if loops else "statement", start


def writing_lines(kernel: Kernel, buffer: str) -> list[int]:
    """The source lines of the statements that write ``buffer`` (or a view of it), in order."""
    names = _aliases(kernel, buffer)
    return sorted({stmt.line for n in names for stmt, _ in _writers(kernel.body, n) if stmt.line is not None})


# --- output elements no block writes: a loop that stops short, not the grid ------------------

def _writers(stmts: tuple[Stmt, ...], name: str, loops: tuple[Loop, ...] = ()):
    """(statement, loops around it) of each statement writing ``name``, in program order."""
    for stmt in stmts:
        if isinstance(stmt, Loop):
            yield from _writers(stmt.body, name, loops + (stmt,))
        elif isinstance(stmt, (While, GridLaunch)):
            yield from _writers(stmt.body, name, loops)
        elif isinstance(stmt, If):
            yield from _writers(stmt.then + stmt.orelse, name, loops)
        elif _writes(stmt, {name}):
            yield stmt, loops


def _written_index(stmt: Stmt, name: str) -> tuple | None:
    """The index expressions (a region's starts) of ``stmt``'s write to ``name``."""
    if isinstance(stmt, Store):
        return stmt.indices
    regions = [stmt.operands[i] for i in _WRITTEN_OPERANDS.get(stmt.kind, ()) if i < len(stmt.operands)]
    found = [r for r in regions if isinstance(r, Region) and r.buffer == name]
    return found[0].starts if found else None


def misplacing_writer(kernel: Kernel, name: str, stores: int, elements: int) -> Stmt | None:
    """The one statement writing ``name`` (or a view of it), when the blocks issued at least as many
    stores as ``name`` has elements and still left some unwritten: the grid and loops are big
    enough, the write's index sends some stores onto others or past the edge.  None when the
    stores fall short (the grid or a loop is too small) or several statements write it."""
    if stores < elements:
        return None
    names = {name} | {view.name for view, base in kernel.views if base == name}
    writers = [stmt for n in names for stmt, _ in _writers(kernel.body, n)]
    return writers[0] if len(writers) == 1 and writers[0].line is not None else None


def short_loop(kernel: Kernel, name: str, cells: list[tuple[int, ...]], shape: tuple[int, ...]) -> Loop | None:
    """The loop that stops before writing the elements ``cells`` of ``name`` no block writes:
    along an axis where only some index values are missing, every statement writing ``name``
    indexes that axis by loop variables and no grid variable (else the grid, or a block index,
    is the suspect and None is returned); the outermost such loop of the first writer."""
    missing = [axis for axis, extent in enumerate(shape) if 0 < len({c[axis] for c in cells}) < extent]
    # a grid of a constant number of blocks (a persistent kernel's one block per SM) cannot be what
    # falls short of a size: the loop its blocks run over the tiles is
    # (told only where the sizes are symbols: with literal sizes every extent is a constant)
    symbolic = any(isinstance(dim, Var) for buffer in kernel.params for dim in buffer.shape)
    fixed = lambda axis: symbolic and isinstance(axis.extent, (int, Const))  # noqa: E731
    grid = {axis.var for axis in kernel.grid if not fixed(axis)} | {
        axis.var for stmt in kernel.body if isinstance(stmt, GridLaunch) for axis in stmt.axes if not fixed(axis)}
    writers = list(_writers(kernel.body, name))
    if not missing or not writers:
        return None
    suspects: list[Loop] = []
    for stmt, loops in writers:
        index = _written_index(stmt, name)
        if index is None or len(index) != len(shape):
            return None
        for axis in missing:
            used = {node.name for node in walk_expr(index[axis]) if isinstance(node, Var)}
            by_var = [loop for loop in loops if loop.var in used]
            if used & grid or not by_var:
                return None
            serial = [loop for loop in by_var if loop.kind != PARALLEL]
            suspects.append((serial or by_var)[0])
    return suspects[0] if suspects[0].line is not None else None
