"""The single-device checks of a lifted kernel on reduced sizes.

1. run the kernel over Z3 terms (``interpreter``) and collect run-time faults
   (out-of-bounds element access, reads of never-written on-chip memory);
2. grid checks: two blocks writing one output element without an atomic (a race whose
   result depends on block order — split-K with a plain copy), output elements no block
   writes (a grid sized with floor instead of ceil division);
3. functional check: every remaining output element equals the spec, proven by Z3
   (``unsat`` of "some element differs").

Every violation carries a counterexample re-checked by running the same lifted kernel
on floats (``counterexample.py``); a Z3 witness that floats do not reproduce is reported
as inconclusive (``unsupported``), never as a violation or a pass.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import z3

from verifier import exp_algebra
from verifier.backends import apply_decl
from verifier.report import ERROR, NOTE, WARNING, Counterexample, Diagnostic
from verifier.term_walk import mentions, uninterpreted_declarations

from .backends import FloatBackend, Z3Backend, identity_roundings, rounding_functions
from .bits import int_range, is_integer_dtype
from .counterexample import (confirm_mismatch, describe_block, describe_masks, find_concrete_mismatch, fmt,
                             is_mask, mask_values, random_inputs, sampled_array)
from .decide import decide, one_per_class
from .errors import InfiniteValue
from .interpreter import Machine, Trace
from .localize import (faulty_line, masking_line, misplacing_writer, missing_initialization, short_loop,
                       writing_lines)
from .program import GLOBAL, Kernel, Region, Store, TileOp, uses_thread_index, walk_stmts
from .sizes import Reduction
from .spec import Spec, SpecError, evaluate

_SOLVER_TIMEOUT_MS = 20000
_NAMED_CONSTANTS = frozenset(exp_algebra.INFINITIES)  # constants whose name is their meaning: never renamed


@dataclass
class CheckResult:
    diagnostics: list[Diagnostic]
    proven: list[str]


def written_buffers(kernel: Kernel) -> dict[str, bool]:
    """Global tensors the kernel writes -> True when every write is atomic (then the
    tensor is assumed zero-initialised by the caller, as TileLang's split-K examples do).
    The kernel's own ``T.alloc_global`` scratch is not among them."""
    scratch = {buf.name for buf in kernel.allocs}
    atomic: dict[str, bool] = {}
    for stmt in walk_stmts(kernel.body):
        if isinstance(stmt, Store) and kernel.buffer(stmt.buffer).scope == GLOBAL and stmt.buffer not in scratch:
            name = kernel.tensor_of(stmt.buffer)
            atomic[name] = atomic.get(name, True) and stmt.atomic
        elif isinstance(stmt, TileOp) and stmt.kind in ("copy", "atomic_add", "fill"):
            dst = stmt.operands[1] if stmt.kind != "fill" else stmt.operands[0]
            if isinstance(dst, Region) and kernel.buffer(dst.buffer).scope == GLOBAL and dst.buffer not in scratch:
                name = kernel.tensor_of(dst.buffer)
                atomic[name] = atomic.get(name, True) and stmt.kind == "atomic_add"
    return atomic


def symbolic_tensors(kernel: Kernel, sizes: dict[str, int], shapes: dict[str, tuple[int, ...]] | None = None
                     ) -> dict[str, np.ndarray]:
    """One Z3 real per input element (an integer, as a real, for a tensor of an integer dtype:
    its range is added to the solver by ``integer_ranges``); outputs start as fresh unknowns
    (``C_init``) or 0 for atomically accumulated ones."""
    from .size_env import eval_size
    written = written_buffers(kernel)
    masks = mask_values(kernel, sizes, shapes)
    tensors: dict[str, np.ndarray] = {}
    for buf in kernel.params:
        shape = (shapes or {}).get(buf.name) or tuple(eval_size(d, sizes) for d in buf.shape)
        if buf.name in masks:
            tensors[buf.name] = masks[buf.name].astype(object)
            continue
        array = np.empty(shape, dtype=object)
        for index in np.ndindex(shape):
            if written.get(buf.name) is True:
                array[index] = z3.RealVal(0)
            else:
                suffix = "_init" if buf.name in written else ""
                label = f"{buf.name}{suffix}{list(index)}"
                array[index] = z3.ToReal(z3.Int(label)) if is_integer_dtype(buf.dtype) else z3.Real(label)
        tensors[buf.name] = array
    return tensors


# what a proof of per-thread code rests on (``interpreter.Machine._lockstep``)
PER_THREAD_NOTE = ("per-thread code run by each thread, statement by statement, assuming TileLang's ThreadSync "
                   "puts a __syncthreads between statements whose shared-memory accesses conflict across threads "
                   "(no two threads' accesses of one element inside one statement, or of global memory between "
                   "two barriers, conflict; equal values written and atomic updates excepted)")


def integer_ranges(kernel: Kernel, tensors: dict[str, np.ndarray]) -> list[Any]:
    """Each symbolic element of an integer tensor lies in its dtype's range."""
    out = []
    for buf in kernel.params:
        array = tensors.get(buf.name)
        if array is None or is_mask(array) or not is_integer_dtype(buf.dtype):
            continue
        lo, hi = int_range(buf.dtype)
        for term in np.asarray(array, dtype=object).reshape(-1):
            if z3.is_expr(term) and z3.is_to_real(term):
                out.append(z3.And(term.arg(0) >= lo, term.arg(0) <= hi))
    return out


def check_kernel(kernel: Kernel, spec: Spec | None, reduction: Reduction) -> CheckResult:
    sizes = reduction.sizes
    diagnostics: list[Diagnostic] = []
    proven: list[str] = []
    tensors = symbolic_tensors(kernel, sizes)
    masks = {name: array for name, array in tensors.items() if is_mask(array)}
    where = reduction.where() + (f" ({describe_masks(masks, kernel)})" if masks else "")
    if uses_thread_index(kernel.body):
        where += f"; {PER_THREAD_NOTE}"
    try:
        trace = Machine(kernel, sizes, Z3Backend(), tensors).run()
    except InfiniteValue:
        # -inf - -inf (a fully masked row): random inputs may show the NaN it makes
        cells = [(name, index) for name in (spec.outputs if spec else ()) for index in np.ndindex(tensors[name].shape)]
        witness = find_concrete_mismatch(kernel, spec, sizes, cells) if cells else None
        if witness is None:
            raise
        masked = masking_line(kernel, tuple(witness.through)) if np.isnan(witness.got) else None
        located = (masked, "its mask makes every element of a row -inf, and -inf - -inf is NaN") if masked else \
            (None, "")
        return CheckResult([_spec_violation(kernel, spec, witness, where, located)], [])

    for fault in trace.faults:
        diagnostics.append(_fault_diagnostic(kernel, sizes, fault))
    for access in trace.auto_guarded:
        diagnostics.append(Diagnostic("auto-guarded", NOTE, f"kernel {access.message} {where}; TileLang's "
                                      "lowering guards it (the store is skipped, the load reads 0)", access.line))
    excluded: dict[str, set[tuple[int, ...]]] = {}
    for conflict in trace.conflicts:
        diagnostics.append(_conflict_diagnostic(kernel, sizes, conflict))
        excluded.setdefault(conflict.buffer, set()).update(_conflicting(trace, conflict.buffer))
    written = written_buffers(kernel)
    for name in written:
        uncovered = [tuple(int(i) for i in idx) for idx in np.argwhere(trace.writers[name] == -1)]
        if uncovered:
            diagnostics.append(_coverage_diagnostic(kernel, sizes, name, uncovered))
            excluded.setdefault(name, set()).update(uncovered)
    if not trace.faults and not trace.conflicts and not any(d.check == "coverage" for d in diagnostics):
        proven.append(f"grid: every element of {', '.join(written) or 'no output'} is written by exactly one block "
                      f"(or only atomically) {where}")
    if kernel.barriers:
        proven.append("barriers: every on-chip element one warp group (or the tma_copy engine, a tcgen05 MMA) writes and "
                      "another uses "
                      "is ordered by the kernel's mbarriers, each wait sees one phase in every schedule, so the "
                      f"groups' program order computes what every schedule does {where}")
    if spec is None:
        return CheckResult(_with_columns(kernel, diagnostics), proven)
    diagnostics_spec, proven_spec = _functional(kernel, spec, reduction, tensors, trace, excluded, where)
    return CheckResult(_with_columns(kernel, diagnostics + _dtype_findings(kernel, spec, diagnostics_spec)),
                       proven + proven_spec)


def _with_columns(kernel: Kernel, found: list[Diagnostic]) -> list[Diagnostic]:
    """Each diagnostic's column: where its statement starts on its line."""
    columns = dict(kernel.columns)
    return [replace(d, column=columns.get(d.line)) if d.line in columns and d.column is None else d for d in found]


def _dtype_findings(kernel: Kernel, spec: Spec, found: list[Diagnostic]) -> list[Diagnostic]:
    """The kernel's output dtypes against the reference's (torch's re-run, else the promotion of
    the kernel's inputs): another kind (an integer output for a float reference) is named in the
    value difference it makes, or is a warning when the checked values happen to agree; another
    float width only rounds (not modelled), a note."""
    from verifier.rules.casts import kind
    wanted = dict(getattr(spec, "out_dtypes", {}) or {})
    if not wanted:
        inputs = [kernel.buffer(n).dtype for n in spec.inputs if n in {b.name for b in kernel.params}]
        floats = [d for d in inputs if kind(d) == "float"]
        wanted = {n: floats[0] for n in spec.outputs} if floats else {}
    notes: list[Diagnostic] = []
    for name in spec.outputs:
        have, want = kernel.buffer(name).dtype, wanted.get(name)
        if want is None or have == want:
            continue
        built = f" as the file builds it at line {kernel.built_at}" if kernel.built_at is not None else ""
        said = f"the kernel's output {name} is {have}{built}, the reference's {want}"
        if kind(have) == kind(want):
            notes.append(Diagnostic("dtype", NOTE, f"{said}: equal up to the rounding to {have}",
                                    kernel.line))
            continue
        spec_errors = [i for i, d in enumerate(found) if d.check == "spec" and d.severity == ERROR]
        for index in spec_errors:
            found[index] = replace(found[index], message=f"{found[index].message}; {said}, and the conversion "
                                   "changes the values")
        if not spec_errors:
            notes.append(Diagnostic("dtype", WARNING, f"{said}: the values checked agree, but other values may "
                                    "not survive the conversion", kernel.line))
    return found + notes


def _conflicting(trace: Trace, name: str) -> set[tuple[int, ...]]:
    return set(trace.conflict_cells.get(name, set()))


def _functional(kernel: Kernel, spec: Spec, reduction: Reduction, tensors: dict[str, np.ndarray], trace: Trace,
                excluded: dict[str, set[tuple[int, ...]]], where: str) -> tuple[list[Diagnostic], list[str]]:
    if getattr(spec, "traced", False):  # a reference argument named like a size takes its reduced value
        spec.named_sizes = {**{n: (reduction.original.get(n), v) for n, v in reduction.sizes.items()},
                            **spec.tile_sizes}
    try:
        expected = evaluate(spec, {n: tensors[n] for n in spec.inputs}, Z3Backend())
    except SpecError as exc:
        if str(exc).startswith("matmul of shapes"):  # the spec does not even fit the kernel's tensors
            shapes = ", ".join(f"{n}{list(tensors[n].shape)}" for n in spec.inputs)
            return [Diagnostic("spec", ERROR, f"kernel does not compute {spec.text}: at the kernel's shapes ({shapes}) "
                               f"the spec is a {exc} {where}", kernel.line)], []
        if getattr(spec, "traced", False):
            return [Diagnostic("unsupported", ERROR, f"reference {spec.origin}: {exc}", kernel.line)], []
        return [Diagnostic("unsupported", ERROR, f"spec '{spec.text}' uses {exc}, which is not modelled", kernel.line)], []
    diffs, cells, compared = [], [], 0
    forms = TermForms()
    outputs, rounded = _without_roundings({n: trace.outputs[n] for n in spec.outputs if n in trace.outputs})
    expected, rounded_spec = _without_roundings(expected)
    if rounded or rounded_spec:
        where = f"{where}; {ROUNDING_NOTE}"
    for name in spec.outputs:
        got, want = outputs.get(name, trace.outputs[name]), expected[name]
        if got.shape != want.shape and getattr(spec, "traced", False):
            return [Diagnostic("unsupported", ERROR, f"the reference re-run at the reduced sizes gives {name} the "
                               f"shape {list(want.shape)}, the kernel {list(got.shape)}: the reference does not "
                               f"follow the kernel's sizes {where}", kernel.line)], []
        if got.shape != want.shape:
            return [Diagnostic("spec", ERROR, f"kernel writes {name} of shape {list(got.shape)} but the spec "
                               f"'{spec.text}' gives shape {list(want.shape)} {where}", kernel.line)], []
        for index in np.ndindex(got.shape):
            if index in excluded.get(name, set()):
                continue
            compared += 1
            if not _same_term(got[index], want[index], forms):
                diffs.append(got[index] != want[index])
                cells.append((name, index))
    scope = " on every element written by exactly one block" if any(excluded.values()) else ""
    if not diffs:  # every element the same term as the spec's (or none compared)
        return [], [f"kernel computes {spec.text} ({spec.origin}){scope} {where}"] if compared else []
    pairs = [(outputs[name][index], expected[name][index]) for name, index in cells]
    if exp_algebra.mentions_exponentials([t for pair in pairs for t in pair]) and \
            exp_algebra.prove_equal(one_per_class(pairs, _NAMED_CONSTANTS)):
        return [], [f"kernel computes {spec.text} ({spec.origin}){scope} {where}; assuming {exp_algebra.ASSUMPTIONS}"]
    decision = decide(diffs, integer_ranges(kernel, tensors), _input_unknowns(tensors), _SOLVER_TIMEOUT_MS,
                      _NAMED_CONSTANTS)
    if decision.status == z3.unsat:
        return [], [f"kernel computes {spec.text} ({spec.origin}){scope} {where}"]
    if decision.status == z3.unknown:
        # undecided: random inputs may still show a difference (a concrete run is evidence enough)
        witness = find_concrete_mismatch(kernel, spec, reduction.sizes, cells)
        if witness is None:
            return [Diagnostic("unsupported", ERROR, f"Z3 could not decide whether the kernel computes '{spec.text}' "
                               f"({decision.reason}); random inputs show no difference", kernel.line)], []
        return [_spec_violation(kernel, spec, witness, where, _locate(kernel, witness, trace, expected, tensors))], []
    model = decision.model
    bad = [cell for cell, diff in zip(cells, diffs) if z3.is_true(model.eval(diff, model_completion=True))]
    inputs = _model_inputs(kernel, model, tensors)
    witness = confirm_mismatch(kernel, spec, reduction.sizes, inputs, bad)
    if witness is None:
        witness = find_concrete_mismatch(kernel, spec, reduction.sizes, bad)
    if witness is None:
        return [Diagnostic("unsupported", ERROR, f"Z3 found a difference from '{spec.text}' that concrete evaluation "
                           "does not reproduce (uninterpreted function); cannot conclude", kernel.line)], []
    return [_spec_violation(kernel, spec, witness, where, _locate(kernel, witness, trace, expected, tensors))], []


def _locate(kernel: Kernel, witness: Any, trace: Trace, expected: dict[str, np.ndarray],
            tensors: dict[str, np.ndarray]) -> tuple[int | None, str]:
    name, index = witness.cell
    example = witness.counterexample
    try:
        numbers = (np.asarray(example.per_rank["kernel"][name], dtype=float),
                   np.asarray(example.reference[name], dtype=float))
    except (KeyError, TypeError, ValueError):
        numbers = None
    try:
        return faulty_line(kernel, witness.cell, trace.outputs[name], expected, tensors, trace.reads,
                           tuple(witness.through), witness.line,
                           tuple(trace.edge_reads | {a.line for a in trace.auto_guarded if "reads" in a.message}),
                           misplaced=_misplaced(trace, name), read_by=trace.read_by,
                           writer=int(trace.writers[name][index]), numbers=numbers)
    except RecursionError:  # a term deeper than Python's stack: the write it is
        return witness.line, ""


ROUNDING_NOTE = ("conversions to float16/bfloat16/float8 taken as exact where the value only flows on to an "
                 "output (their rounding is within the format's precision), rounded where a conversion to an "
                 "integer reads them")


def _without_roundings(arrays: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], bool]:
    """Each array with its roundings to narrow floats as the identity (``identity_roundings``)."""
    terms = [t for array in arrays.values() for t in np.asarray(array, dtype=object).reshape(-1) if z3.is_expr(t)]
    functions = rounding_functions(uninterpreted_declarations(terms), kept=False)
    if not functions:
        return arrays, False
    out, any_rounded = {}, False
    for name, array in arrays.items():
        flat = np.asarray(array, dtype=object)
        copy = np.empty(flat.shape, dtype=object)
        for index in np.ndindex(flat.shape):
            copy[index], changed = identity_roundings(flat[index], functions)
            any_rounded |= changed
        out[name] = copy
    return out, any_rounded


def _misplaced(trace: Trace, name: str) -> bool:
    """Some element of output ``name`` written by no block, or by two: stores may be misplaced."""
    return bool((trace.writers[name] == -1).any()) or bool(trace.conflict_cells.get(name))


def _input_unknowns(tensors: dict[str, np.ndarray]) -> set[int]:
    """The ids of the unknowns that stand for input elements (``x[0, 1]``, or the integer inside
    ``ToReal``): a witness is looked for with them in [-8, 8] first, one a user can read and one
    the float re-check reproduces (a conversion saturating at 2^31 differs by a relative 1e-9
    only, a truncated fraction by a whole unit)."""
    found: set[int] = set()
    for array in tensors.values():
        if is_mask(array):
            continue
        for term in np.asarray(array, dtype=object).reshape(-1):
            if z3.is_expr(term) and z3.is_to_real(term):
                term = term.arg(0)
            if z3.is_expr(term) and z3.is_const(term) and not z3.is_rational_value(term) and \
                    not z3.is_int_value(term):
                found.add(term.get_id())
    return found


class TermForms:
    """What ``_same_term`` remembers over one comparison: each term's canonical form, whether a
    subterm holds an ``If`` (only those can change form), and the simplified terms those ids
    belong to (kept alive, so no id is reused for another term)."""

    def __init__(self) -> None:
        self.canonical: dict[int, tuple[Any, Any]] = {}
        self.conditional: dict[int, bool] = {}
        self.alive: list[Any] = []


def _same_term(a: Any, b: Any, forms: TermForms) -> bool:
    """Equal by construction: the same term once simplified and with every two-operand
    maximum / minimum written one way (``If(x >= 0, x, 0)`` from the kernel's ``T.max`` and
    ``If(0 >= x, 0, x)`` from the reference's ``relu`` are one term)."""
    if not (z3.is_expr(a) and z3.is_expr(b)):
        return False
    a, b = z3.simplify(a), z3.simplify(b)
    if a.eq(b):
        return True
    forms.alive += [a, b]
    if not mentions([a, b], lambda name: name == "if", forms.conditional):
        return False
    try:
        return _canonical_extrema(a, forms.canonical).eq(_canonical_extrema(b, forms.canonical))
    except RecursionError:  # a term deeper than Python's stack: left to the solver
        return False


def _canonical_extrema(term: Any, memo: dict[int, tuple[Any, Any]]) -> Any:
    """``term`` with its two-operand extrema in one form; ``memo`` maps a term's id to the term
    (kept alive, so the id is not reused) and its form."""
    key = term.get_id()
    if key in memo:
        return memo[key][1]
    if not z3.is_app(term) or term.num_args() == 0:
        memo[key] = (term, term)
        return term
    children = [_canonical_extrema(child, memo) for child in term.children()]
    out = None
    if z3.is_app_of(term, z3.Z3_OP_ITE) and children[0].num_args() == 2:
        cond, x, y = children
        left, right = cond.children()
        kind = cond.decl().kind()
        if kind in (z3.Z3_OP_GE, z3.Z3_OP_GT, z3.Z3_OP_LE, z3.Z3_OP_LT):
            larger = kind in (z3.Z3_OP_GE, z3.Z3_OP_GT)  # cond reads "left is larger"
            if left.eq(y) and right.eq(x):
                larger = not larger
            elif not (left.eq(x) and right.eq(y)):
                larger = None
            if larger is not None:  # If(x >= y, x, y) is max(x, y); If(x <= y, x, y) is min(x, y)
                p, q = sorted((x, y), key=lambda t: t.get_id())
                out = z3.If(p >= q, p, q) if larger else z3.If(p <= q, p, q)
    if out is None:  # the same application over the rewritten children (n-ary + and * included)
        out = apply_decl(term.decl(), children)
    memo[key] = (term, out)
    return out


def _spec_violation(kernel: Kernel, spec: Spec, witness: Any, where: str,
                    located: tuple[int | None, str] = (None, "")) -> Diagnostic:
    name, index = witness.cell
    through = [line for line in getattr(witness, "through", ()) if line != witness.line]
    message = (f"kernel does not compute {spec.text}: {name}{list(index)} is {fmt(witness.got)} but the spec gives "
               f"{fmt(witness.want)} {where}" + (f"; the value comes through lines {', '.join(map(str, through))} "
                                                 f"and {witness.line}" if through and witness.line else ""))
    line, why = located
    if line is not None and why:
        message += f"; line {line} is where it goes wrong: {why} (written at line {witness.line})" \
            if line != witness.line else f"; line {line} is where it goes wrong: {why}"
    return Diagnostic("spec", ERROR, message, line or witness.line or kernel.line, witness.counterexample)


def _model_inputs(kernel: Kernel, model: z3.ModelRef, tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for name, array in tensors.items():
        if is_mask(array):  # a sampled mask or index tensor: not the model's
            out[name] = sampled_array(array)
            continue
        values = np.empty(array.shape, dtype=float)
        for index in np.ndindex(array.shape):
            value = model.eval(array[index], model_completion=True)
            values[index] = _to_float(value)
        out[name] = values
    return out


def _to_float(value: Any) -> float:
    if z3.is_rational_value(value):
        return value.numerator_as_long() / value.denominator_as_long()
    if z3.is_algebraic_value(value):
        return float(value.approx(12).as_decimal(12).rstrip("?"))
    return 0.0


def _fault_diagnostic(kernel: Kernel, sizes: dict[str, int], fault: Any) -> Diagnostic:
    inputs = random_inputs(kernel, sizes, seed=0)
    machine = Machine(kernel, sizes, FloatBackend(), inputs)
    machine.run()
    confirmed = any(f.check == fault.check and f.line == fault.line for f in machine.faults)
    example = Counterexample(inputs={"sizes": dict(sizes)}, reference={}, per_rank={},
                             value=f"line {fault.line} {fault.message}", confirmed=confirmed,
                             note="re-run on floats" if confirmed else "not reproduced on floats")
    message, line = f"kernel {fault.message} on reduced sizes {_sizes(sizes)}", fault.line
    missing = missing_initialization(kernel, fault.buffer, fault.line) if fault.buffer else None
    if missing is not None:  # the faulty statement is one that is not there: name where it belongs
        after, anchor, what, start = missing
        message = (f"kernel {fault.message} (line {fault.line}) on reduced sizes {_sizes(sizes)}; nothing before "
                   f"that read writes {fault.buffer}: its initialization belongs before the {what} at line {anchor}, "
                   f"after its allocation in the scope opened at line {start} (between lines {start} and {anchor})")
        line = after
    elif fault.buffer and fault.check == "uninitialized-read":
        writes = writing_lines(kernel, fault.buffer)
        if writes:  # written, but not there: the writes that miss the element are named
            message += (f"; {fault.buffer} is written at line{'s' if len(writes) > 1 else ''} "
                        f"{', '.join(map(str, writes))}, which miss{'' if len(writes) > 1 else 'es'} that element")
    return Diagnostic(fault.check, ERROR, message, line, example)


def _conflict_diagnostic(kernel: Kernel, sizes: dict[str, int], conflict: Any) -> Diagnostic:
    inputs = random_inputs(kernel, sizes, seed=1)
    machine = Machine(kernel, sizes, FloatBackend(), inputs, record_values=True)
    machine.run()
    writes = machine.written_values.get((conflict.buffer, conflict.index), [])
    cell = f"{conflict.buffer}{list(conflict.index)}"
    by_block = {f"block {describe_block(kernel, block)}": {cell: fmt(value)} for block, value in writes}
    confirmed = len({v[cell] for v in by_block.values()}) > 1
    first, second = (describe_block(kernel, b) for b in conflict.blocks)
    written = written_buffers(kernel)
    example = Counterexample(inputs={"sizes": dict(sizes), **{k: v.tolist() for k, v in inputs.items() if k not in written}},
                             reference={}, per_rank=by_block,
                             value=f"{conflict.buffer}{list(conflict.index)} written by {first} and {second}",
                             confirmed=confirmed,
                             note="blocks write different values: the result depends on block order")
    message = (f"blocks {first} and {second} both write {conflict.buffer}{list(conflict.index)} without an atomic; "
               f"the result depends on which block runs last (use T.atomic_add or reduce the partial results)")
    return Diagnostic("write-conflict", ERROR, message, conflict.line, example)


def _coverage_diagnostic(kernel: Kernel, sizes: dict[str, int], name: str, cells: list[tuple[int, ...]]) -> Diagnostic:
    from .size_env import eval_size
    box = _describe_cells(name, cells, tuple(eval_size(d, sizes) for d in kernel.buffer(name).shape))
    grid = ", ".join(f"{axis.var} in range({axis.extent} = {eval_size(axis.extent, sizes)})" for axis in kernel.grid)
    inputs = random_inputs(kernel, sizes, seed=2)
    machine = Machine(kernel, sizes, FloatBackend(), inputs)
    trace = machine.run()
    confirmed = bool(trace.writers[name][cells[0]] == -1)
    example = Counterexample(inputs={"sizes": dict(sizes)}, reference={},
                             per_rank={"grid": {axis.var: eval_size(axis.extent, sizes) for axis in kernel.grid}},
                             value=f"{box} never written", confirmed=confirmed,
                             note="re-run on floats: the element keeps its initial value")
    message = f"no block writes {box} ({len(cells)} elements) on reduced sizes {_sizes(sizes)}; "
    loop = short_loop(kernel, name, cells, tuple(eval_size(d, sizes) for d in kernel.buffer(name).shape))
    if loop is not None:  # every write indexes the missing elements' axis by a loop, not by a block
        try:
            trips = f" ({eval_size(loop.extent, sizes)} iterations)"
        except Exception:  # noqa: BLE001 - an extent of other loops' variables: named without its count
            trips = ""
        message += f"the loop over {loop.var} at line {loop.line}{trips} stops before writing them; grid is {grid}"
        return Diagnostic("coverage", ERROR, message, loop.line, example)
    writer = misplacing_writer(kernel, name, trace.stores.get(name, 0), int(np.prod(trace.writers[name].shape)))
    if writer is not None:  # the blocks stored enough elements, some twice or past the edge: not the grid
        message += (f"the blocks store as many elements as {name} has, so the index of the write at line "
                    f"{writer.line} puts some twice or past the edge; grid is {grid}")
        return Diagnostic("coverage", ERROR, message, writer.line, example)
    message += f"grid is {grid} (size the grid with T.ceildiv)"
    return Diagnostic("coverage", ERROR, message, kernel.grid_line or kernel.line, example)


def _describe_cells(name: str, cells: list[tuple[int, ...]], shape: tuple[int, ...]) -> str:
    """Uncovered elements as whole slices when they are (``C[4, :]``), else examples."""
    missing = set(cells)
    slices, covered = [], set()
    for axis, extent in enumerate(shape):
        for value in sorted({c[axis] for c in cells}):
            full = {c for c in np.ndindex(shape) if c[axis] == value}
            if full <= missing:
                parts = [":" if a != axis else str(value) for a in range(len(shape))]
                slices.append(f"{name}[{', '.join(parts)}]")
                covered |= full
    if covered == missing:
        return " and ".join(slices)
    examples = ", ".join(f"{name}{list(c)}" for c in sorted(missing)[:3])
    return f"{examples}{', ...' if len(missing) > 3 else ''}"


def _sizes(sizes: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sizes.items())
