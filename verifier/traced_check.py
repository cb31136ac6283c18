"""Check a traced run: every rank's recorded ops against the recorded single-device run.

``check_traced(program)`` decides, for a ``TracedProgram`` (``verifier/traced_ir.py``):

1. **Well-formed**: every op list is SSA over the leaves, every op kind is modelled (else
   ``unsupported`` naming the op and its line), collectives name groups that contain the rank,
   and the leaves are small enough for the solver.
2. **Temporal** (``traced_temporal.py``): async handles, collective order per group, message
   matching by (source, destination, tag), deadlock freedom.  A hang is a violation and ends
   the check: values of ranks that never finish are not compared.
3. **Screening**: the reference and the ranks run with NumPy on a few random leaf values
   (``traced_run.py``); a comparison that differs is a counterexample.
4. **Proof**: the same runs with Z3 terms; each comparison is proven element by element, by
   normal form first, then by the solver under one time budget shared by all obligations.
   A ``sat`` model is re-run with NumPy before it is reported; an unconfirmed one, a timeout or
   an engine error is ``unsupported``, never ``verified``.
5. **Confirmation** (``confirmation.py``): with a ``confirm`` from the caller, every counterexample
   is re-run through the user's code by torch before it is a violation; where torch agrees with
   one device, the model is wrong: ``unsupported``, listed in ``extra["tool_defects"]``.

A violation names its comparison (output, or the gradient of which leaf and the layout the
recorder assumed for it) and the first op on the path to the compared value whose result
no longer matches the single-device value (ops are paired with the reference by line, kind
and occurrence).
"""
from __future__ import annotations

import re
import time
from collections import defaultdict
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any, Callable

import numpy as np
import z3
from z3 import z3core as Z3core

from .budget import RLIMIT_PER_SECOND, bound, clock, rlimit, steps_used
from .backends import (NumpyBackend, Z3Backend, all_constants, as_term, fresh_array, fresh_constants, normal_form,
                       objectwise, same_term)
from .counterexample import plain
from .equivalence import integer_domain, random_values
from .conditional_sums import mentions_conditionals, merge_conditionals
from .common_divisors import mentions_quotients, quotients_combine
from .confirmation import AGREES, REPRODUCED, Confirm, Confirmation, Finding
from .pieces import block_counts, comparable, misassembled
from .proof_memo import ProofMemo
from .reduction_lines import is_collective, repair_after
from .exchange_lines import missing_exchange
from .routing_lines import misrouted
from .picked_lines import mispicked
from .unwritten_lines import write_slot
from .handed_back import unchanged_backward, unreduced_forward
from .exp_identity import exp_normal_form, factor_logarithms, mentions_exp, mentions_log, quotients_cancel
from .ir import Op, Span, TensorSpec
from .report import ERROR, NOTE, Counterexample, Diagnostic, Report
from .temporal.findings import rank_ranges
from .traced_ir import UNINITIALISED, Comparison, TracedProgram
from .traced_run import RunError, new_cache, run, runnable, runner
from .traced_temporal import COLLECTIVE_KINDS, MESSAGE_KINDS, MalformedRecording, MessageToSelf, analyse

MAX_LEAF_ELEMENTS = 20_000
SCREENING_SEEDS = 3
CONFIRMATION_SEEDS = 6
SOLVER_BATCH = 64  # disequalities per solver call
CUT_PROOF_CAP_S = 30.0    # solver time for one collective's cut
CUT_PROOFS_CAP_S = 45.0   # and for all of them (the rest stays for the obligations)
CUT_PROBE_PAIRS, CUT_PROBE_S = 8, 1.0   # the first elements of a cut must be proven this fast
SOLVER_CALL_CAP_S = 30.0  # one hard call must not eat the whole budget
MAX_PROVEN_BLOCKS = 4     # candidate shards of a value tried by the solver
GROUP_CALL_CAP_S = 1.0    # the call for a whole batch at once, before one call per element
GROUP_MIN_CLAIMS = 8      # fewer distinct claims go one by one: little to save, much to lose


class _Stop(Exception):
    """The check ended early with its diagnostics already in the report."""


@dataclass(frozen=True)
class _Mismatch:
    comparison: Comparison
    rank: int
    index: tuple[int, ...]
    expected: Any
    got: Any
    reference_value: Any
    rank_value: Any


def check_traced(program: TracedProgram, *, timeout_s: float = 300, progress: Callable[[str], None] | None = None,
                 prove: bool = True, confirm: Confirm | None = None, communicates: bool = False) -> Report:
    """Well-formedness, timing (temporal), values on random inputs, then (``prove``) the Z3 proof.

    ``prove=False`` is the cheap check of a program at a further world size: every violation it
    reports is as real as the proof's (found by concrete evaluation), but agreement is only tested.

    ``confirm``: re-runs the user's code with a counterexample before it is reported (see
    ``confirmation.py``); without it, a difference of the model is reported as it is.  So is a finding
    of the recorded ops' timing (a deadlock, a read before ``wait()``): torch reproduces it when real ranks,
    each async result written at its ``wait()``, hang, raise or compute other values than one device.

    ``timeout_s`` is CPU seconds of this process and the solver steps worth them
    (``verifier/budget.py``), not wall time: the verdict does not depend on the machine's load.

    ``communicates``: the code calls collectives (the frontend read it so); if none ran on any rank,
    nothing distributed was checked and the verdict is not `verified`."""
    started = time.perf_counter()
    ops = len(program.reference) + sum(len(rank) for rank in program.ranks)
    report = Report(program.source, dict(program.mesh), ops=ops)
    report.extra["assumptions"] = list(program.assumptions)
    for assumption in program.assumptions:
        report.add(Diagnostic("assumption", NOTE, assumption))
    if "backward" not in program.passes and "backward" not in program.not_run:
        report.add(Diagnostic("assumption", NOTE, "no backward pass was recorded: gradients are not checked"))
    try:
        _check(program, report, clock() + timeout_s, progress, prove, confirm)
    except _Stop:
        pass
    finally:
        report.seconds = time.perf_counter() - started
    if program.unconfirmed and not any(d.severity == ERROR for d in report.diagnostics):
        report.add(Diagnostic("unsupported", ERROR, f"not verified: a layout nothing confirmed is never the basis "
                                                    f"of a proof - {program.unconfirmed[0]}"))
    if (communicates and program.world > 1 and not _communicates(program)
            and not any(d.severity == ERROR for d in report.diagnostics)):
        report.add(Diagnostic("unsupported", ERROR, f"not verified: no collective or message ran on any of the "
                              f"{program.world} simulated ranks although the code calls collectives, so nothing distributed was checked (each rank "
                              f"computed the single-device program); code that keeps its own process state (a "
                              f"launcher's environment, a mesh or group argument left at its default) may not "
                              f"have seen the simulated world: a --harness can set it up"))
    report.extra["passes"] = _pass_states(program, report)
    return report


def _communicates(program: TracedProgram) -> bool:
    return any(op.kind in COLLECTIVE_KINDS or op.kind in MESSAGE_KINDS for rank in program.ranks for op in rank)


def _pass_states(program: TracedProgram, report: Report) -> dict[str, str]:
    """forward / backward / temporal -> "proven", "violated", "not proven" or "not recorded"."""
    states = {}
    for name in ("forward", "backward", "temporal"):
        if name != "temporal" and name not in program.passes:
            states[name] = f"not run ({program.not_run[name]})" if name in program.not_run else "not recorded"
        elif name == "backward" and not any(c.kind == "gradient" for c in program.comparisons):
            states[name] = "nothing to compare (no trainable leaf)"
        elif any(fact.startswith(f"{name}:") for fact in report.proven):
            states[name] = "proven"
        elif any(_violates(d, name) for d in report.diagnostics):
            states[name] = "violated"
        else:
            states[name] = "not proven"
    return states


def _violates(diagnostic: Diagnostic, name: str) -> bool:
    if diagnostic.severity != ERROR or diagnostic.check == "unsupported":
        return False
    if diagnostic.check != "equivalence":
        return name == "temporal"
    return diagnostic.message.startswith("gradient of") == (name == "backward")


def _check(program: TracedProgram, report: Report, deadline: float, progress, prove: bool,
           confirm: Confirm | None) -> None:
    unmodelled = _well_formed(program, report, confirm)
    temporal = analyse(program.ranks, dict(program.mesh))
    report.proven.extend(temporal.proven)
    _timing_confirmed(program, report, temporal.diagnostics, confirm)
    if temporal.hangs:
        report.add(Diagnostic("equivalence", NOTE, "values not compared: some ranks never finish"))
        raise _Stop
    if not program.comparisons:
        _stop(report, "nothing to compare: the recording has no outputs or gradients, so equivalence would hold "
                      "vacuously")
    size = sum(int(np.prod([int(d) for d in spec.shape])) for spec in program.inputs)
    if size > MAX_LEAF_ELEMENTS:
        _stop(report, f"too large for the solver: {size} elements; re-run with smaller sizes")
    if unmodelled is not None:  # time needs no op semantics; values do
        where, op = unmodelled
        _stop(report, f"op {op.kind} (recorded on {where}) is not modelled by the verifier", op.span.line)
    mismatch, inputs, sample = _screen(program, report, confirm)
    if mismatch is not None:
        _report_violation(program, report, mismatch, inputs, "found by concrete evaluation", confirm)
        raise _Stop
    if any(d.severity == ERROR for d in temporal.diagnostics):
        report.add(Diagnostic("equivalence", NOTE, "values agree on random inputs, but equivalence is not proven: "
                                                   "see the ranks' timing above"))
        raise _Stop
    if not prove:
        report.extra["tested"] = (f"outputs and gradients agree with the single-device run on {SCREENING_SEEDS} "
                                  f"random inputs (evaluated, not proven)")
        return
    _prove(program, report, deadline, progress, sample, confirm)


def _stop(report: Report, message: str, line: int | None = None) -> None:
    report.add(Diagnostic("unsupported", ERROR, message, line))
    raise _Stop


def _timing_confirmed(program: TracedProgram, report: Report, diagnostics: list[Diagnostic],
                      confirm: Confirm | None) -> None:
    """Findings of the recorded ops' timing (a deadlock, a read before wait(), a message to the rank itself)
    into ``report`` as torch confirms them: real ranks, each async result written at its wait()."""
    if confirm is None or not any(d.severity == ERROR for d in diagnostics):
        report.diagnostics.extend(diagnostics)
        return
    leaves = {**random_values(program.inputs, 0, _kind), **program.pinned}
    report_timing(report, diagnostics, confirm(program, Finding(None, 0, (), leaves, how="found in the recorded "
                                                                "ops' timing", late_async=True)))


def report_timing(report: Report, diagnostics: list[Diagnostic], confirmation: Confirmation | None) -> None:
    """The temporal findings of the recorded ops (ranks that never finish, a read before ``wait()``), as
    shown: with what real gloo ranks did (``confirmation``: REPRODUCED when they hung, raised or computed
    other values than one device), or, when torch did not reproduce them, one ``unsupported`` saying so - no
    timing violation is reported that torch did not reproduce (None: findings are not confirmed, as asked)."""
    errors = [d for d in diagnostics if d.severity == ERROR]
    if confirmation is None or confirmation.outcome == REPRODUCED or not errors:
        first = errors[0] if confirmation is not None and errors else None
        report.diagnostics.extend(replace(d, message=f"{d.message} ({confirmation.detail})") if d is first else d
                                  for d in diagnostics)
        return
    report.diagnostics.extend(d for d in diagnostics if d.severity != ERROR)
    claim = errors[0].message.rstrip(".")
    if confirmation.outcome == AGREES:
        message = (f"not reproduced by torch: by the recorded ops, {claim}, but {confirmation.detail}; not a "
                   f"violation")
        kind = "timing not reproduced by torch"
    else:
        message = (f"not confirmed by torch: by the recorded ops, {claim}, but {confirmation.detail}; no "
                   f"violation is reported without real ranks reproducing it")
        kind = "not confirmed by torch"
    report.add(Diagnostic("unsupported", ERROR, message, errors[0].line, file=errors[0].file))
    _list_defect(report, kind, message, confirmation, errors[0].line)


def _list_defect(report: Report, kind: str, message: str, confirmation: Confirmation, line: int | None,
                 op: Op | None = None, value: str | None = None, rank: int | None = None) -> None:
    """A finding of the model torch did not reproduce, listed under ``tool_defects``."""
    report.extra.setdefault("tool_defects", []).append(
        {"kind": kind, "message": message, "op": op.kind if op is not None else None, "line": line, "value": value,
         "rank": rank, "world": confirmation.world, "detail": confirmation.detail,
         "seconds": round(confirmation.seconds, 2)})


# --- well-formedness ---------------------------------------------------------------------------

def _well_formed(program: TracedProgram, report: Report, confirm: Confirm | None = None) -> tuple[str, Op] | None:
    """Stops on a malformed recording (or a message a rank sends itself, as torch confirms it); returns the
    first op it cannot evaluate, if any."""
    if len(program.ranks) != program.world or program.world < 1:
        _stop(report, f"malformed recording: {len(program.ranks)} rank op lists for world {program.world}")
    leaves = {spec.name for spec in program.inputs}
    lists = [("the single-device run", program.reference)] + \
        [(f"rank {r}", ops) for r, ops in enumerate(program.ranks)]
    defined_per_list = []
    unmodelled = None
    for where, ops in lists:
        defined = set(leaves)
        for op in ops:
            if unmodelled is None and not runnable(op.kind):
                unmodelled = (where, op)
            for name in op.args:
                if name not in defined:
                    _stop(report, f"malformed recording: {op.kind} on {where} reads {name!r} before it is defined",
                          op.span.line)
            for name in op.results:
                if name in defined:
                    _stop(report, f"malformed recording: {name!r} is defined twice on {where}", op.span.line)
                defined.add(name)
        defined_per_list.append(defined)
    for comparison in program.comparisons:
        if comparison.reference not in defined_per_list[0]:
            _stop(report, f"malformed recording: {comparison.label} names {comparison.reference!r}, which the "
                          f"single-device run does not compute", comparison.span.line)
        if len(comparison.per_rank) != program.world or len(comparison.regions) != program.world:
            _stop(report, f"malformed recording: {comparison.label} has {len(comparison.per_rank)} rank values "
                          f"for world {program.world}", comparison.span.line)
        for rank, name in enumerate(comparison.per_rank):
            if name is not None and name not in defined_per_list[rank + 1]:
                _stop(report, f"malformed recording: {comparison.label} names {name!r}, which rank {rank} does not "
                              f"compute", comparison.span.line)
    try:
        from .traced_temporal import timelines
        timelines(program.ranks, dict(program.mesh))
    except MessageToSelf as problem:
        _timing_confirmed(program, report, [Diagnostic("p2p", ERROR, str(problem), problem.op.span.line)], confirm)
        raise _Stop
    except MalformedRecording as problem:
        _stop(report, f"malformed recording: {problem}", problem.op.span.line if problem.op else None)
    if unmodelled is None:
        report.proven.append(f"well-formed: SSA recordings of the single-device run and {program.world} rank(s), "
                             f"every op modelled")
    return unmodelled


# --- values ---------------------------------------------------------------------------------------

def _kind(spec: TensorSpec) -> str:
    dtype = str(spec.dtype).replace("torch.", "")
    if dtype == "bool":
        return "bool"
    return "int" if dtype.startswith(("i", "u", "long")) else "float"


@dataclass
class _Runs:
    reference: dict[str, Any]
    ranks: list[dict[str, Any]]


def _run_all(program: TracedProgram, leaves: dict[str, Any], xp) -> _Runs:
    cache = new_cache()
    (reference,) = run((program.reference,), leaves, xp, cache)
    return _Runs(reference, run(program.ranks, leaves, xp, cache))


def _region(value: Any, region) -> Any:
    if region is None:
        return value
    if len(region) != np.ndim(value):
        raise ValueError(f"region of {len(region)} dims for a {np.ndim(value)}-d value")
    return np.asarray(value, dtype=object if np.asarray(value).dtype == object else None)[
        tuple(slice(int(a), int(b)) for a, b in region)]


def _close(a: Any, b: Any) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if a.dtype.kind == "b" or b.dtype.kind == "b":
        return bool(np.array_equal(a.astype(bool), b.astype(bool)))
    return bool(np.allclose(a.astype(float), b.astype(float), rtol=1e-6, atol=1e-8, equal_nan=False))


def _first_mismatch(program: TracedProgram, runs: _Runs, finite: bool = False) -> _Mismatch | None:
    """The first compared value a rank gets wrong; ``finite``: only where both sides are finite
    at the differing element (a real-arithmetic difference, not an overflow to inf)."""
    for comparison in program.comparisons:
        whole = runs.reference[comparison.reference]
        for rank, (name, region) in enumerate(zip(comparison.per_rank, comparison.regions)):
            if name is None:
                continue
            expected, got = np.asarray(_region(whole, region)), np.asarray(runs.ranks[rank][name])
            if _close(expected, got):
                continue
            index: tuple[int, ...] = ()
            if expected.shape == got.shape and expected.size:
                a, b = expected.astype(float), got.astype(float)
                differs = ~np.isclose(a, b, rtol=1e-6, atol=1e-8)
                if finite:
                    differs &= np.isfinite(a) & np.isfinite(b)
                bad = np.argwhere(differs)
                if finite and not len(bad):
                    continue
                index = tuple(int(i) for i in bad[0]) if len(bad) else ()
            return _Mismatch(comparison, rank, index, expected, got, whole, runs.ranks[rank][name])
    return None


def _screen(program: TracedProgram, report: Report, confirm: Confirm | None = None):
    """(mismatch and runs, leaves, None) for the first random input a rank gets wrong, else
    (None, None, the first input's runs): concrete values of every op, kept as a sample."""
    sample = None
    for seed in range(SCREENING_SEEDS):
        leaves = {**random_values(program.inputs, seed, _kind), **program.pinned}
        try:
            runs = _run_all(program, leaves, NumpyBackend())
            mismatch = _first_mismatch(program, runs)
        except RunError as error:
            if error.rank is not None and error.torch_raises:  # the single-device run finished first
                _report_rank_failure(program, report, error, leaves, confirm)
            _engine_error(report, error)
        except ValueError as error:
            _stop(report, f"malformed recording: {error}")
        if mismatch is not None:
            return (mismatch, runs), leaves, None
        sample = runs if sample is None else sample
    return None, None, sample


def _report_rank_failure(program: TracedProgram, report: Report, error: RunError, leaves: dict[str, Any],
                         confirm: Confirm | None = None) -> None:
    """A rank fails where torch fails too (an id outside its shard of a table) on inputs the
    single-device run takes: the program breaks when distributed, a violation."""
    message = str(error)
    how = "found by concrete evaluation; torch raises here too"
    if confirm is not None:
        finding = Finding(None, error.rank, (), leaves, culprit=error.op, how=how, failure=message)
        confirmation = confirm(program, finding)
        if confirmation.outcome != REPRODUCED:
            _unconfirmed(report, finding, confirmation, f"rank {error.rank} fails at {message}", error.op)
            raise _Stop
        how = f"{how}; {confirmation.detail}"
    counterexample = Counterexample(
        inputs={key: plain(value) for key, value in leaves.items()}, reference={}, per_rank={},
        value=f"rank {error.rank}",
        note=f"the single-device run finishes on these inputs; rank {error.rank} fails at {message}")
    handed = _handed_to_failure(program, error, leaves)
    said = (f"; it reads a piece of the value (this rank's block of one device's) that the installed module built "
            f"at line {handed} hands out, as if it were the whole: the flags or parallel style given there choose "
            f"which layout a rank gets") if handed is not None else ""
    report.add(Diagnostic("equivalence", ERROR,
                          f"rank {error.rank} fails where the single-device run does not ({how}): {message}{said}",
                          error.line, counterexample, repair_line=handed))
    raise _Stop


def _handed_to_failure(program: TracedProgram, error: RunError, leaves: dict[str, Any]) -> int | None:
    """``_handed`` for the op a rank failed at (a class index out of range for the rank's block of the
    logits), or for the culprit of an operand of it that goes wrong (the log-softmax over the block before
    it), from that rank's values up to the failure and the single device's run on the same inputs."""
    if error.env is None or error.rank is None or error.op is None \
            or not any(op is error.op for op in program.ranks[error.rank]):
        return None
    try:
        (reference,) = run((program.reference,), leaves, NumpyBackend(), new_cache())
    except (RunError, ValueError):
        return None
    runs = _Runs(reference, [error.env if r == error.rank else {} for r in range(len(program.ranks))])
    found = _handed(program, runs, error.rank, error.op)
    if found is not None:
        return found
    lines = set()
    for name in error.op.args:
        if name in error.env:
            try:
                lines.add(_handed(program, runs, error.rank, culprit(program, runs, error.rank, name)))
            except (TypeError, ValueError, KeyError, IndexError):
                return None
    lines.discard(None)
    return lines.pop() if len(lines) == 1 else None


def _engine_error(report: Report, error: RunError) -> None:
    """Engine errors are never violations: the verdict is unsupported, with the line."""
    where = "the single-device run" if error.rank is None else f"rank {error.rank}"
    _stop(report, f"cannot evaluate the recording ({where}): {error}", error.line)


# --- localisation -----------------------------------------------------------------------------------

def paired_positions(reference: tuple[Op, ...], ops: tuple[Op, ...],
                     agree: Callable[[int, int], int] | None = None) -> dict[int, int]:
    """Rank op position -> reference op position.  Ops of one source line are paired by the
    longest common subsequence of their kinds, earliest matches first: a rank's extra ops on a
    line (the vocabulary mask before a sharded lookup) do not shift the pairs of the ops both runs
    share.  A line with too many ops pairs by (kind, occurrence).  ``agree(i, j)``, when given, says
    how well a concrete run's values of the two ops agree: a match that agrees better outweighs any
    that agrees less (a data-parallel rank's micro-batches are the single device's third and fourth, not its
    first and second, though the same lines run them)."""
    def by_line(op_list):
        out: dict[tuple, list[int]] = defaultdict(list)
        for position, op in enumerate(op_list):
            out[(op.span.line, op.span.file)].append(position)
        return out

    reference_lines, lines = by_line(reference), by_line(ops)
    weights = _pairing_weights(ops)

    def align(weight):
        if agree is not None:
            weight = _preferring(agree, weight or (lambda i, j: weights[i]))
        pairs = {}
        for line, positions in lines.items():
            partners = reference_lines.get(line)
            if partners:
                pairs.update(_aligned([ops[p] for p in positions], [reference[p] for p in partners], positions,
                                      partners, [weights[p] for p in positions], weight))
        return pairs

    # a line's forward and backward ops pair in one alignment; an op the rank adds in the forward
    # (a view of a row-parallel output hook's all-reduce) would take the earliest op of its kind,
    # the backward's: a second alignment weighs each match by whether its operands agree with the
    # first one's pairs (the rank's operand made by the partner of what the reference op reads)
    pairs = align(None)
    pairs = align(_DataflowAgreement(reference, ops, pairs, weights))
    return {position: partner for position, partner in pairs.items()
            if len(reference[partner].results) == len(ops[position].results)}


_AGREEING = 1_000  # the weight a match whose concrete values agree adds: more than any other reason


def _preferring(agree: Callable[[int, int], int], weight: Callable[[int, int], int]) -> Callable[[int, int], int]:
    return lambda i, j: weight(i, j) + _AGREEING * agree(i, j)


class _DataflowAgreement:
    """Weight of pairing rank op ``i`` with reference op ``j`` given earlier pairs: an operand the
    rank made by a paired op (seen through ops of the rank's own with one operand, a collective's
    result as what it reduced) agrees when its partner is what the reference op reads there; one
    disagreeing operand makes the match the least weighty, each agreeing one adds to it."""

    THROUGH = 4  # unpaired single-operand ops looked through for an operand's origin

    def __init__(self, reference: tuple[Op, ...], ops: tuple[Op, ...], pairs: dict[int, int],
                 weights: list[int]) -> None:
        self.reference, self.ops, self.weights = reference, ops, weights
        self.values = {mine: theirs for position, partner in pairs.items()
                       for mine, theirs in zip(ops[position].results, reference[partner].results)}
        self.producer = {name: position for position, op in enumerate(ops) for name in op.results}

    def _origin(self, name: str) -> str | None:
        for _ in range(self.THROUGH):
            if name in self.values:
                return self.values[name]
            position = self.producer.get(name)
            if position is None or len(self.ops[position].args) != 1:
                return None
            name = self.ops[position].args[0]
        return self.values.get(name)

    def __call__(self, i: int, j: int) -> int:
        mine, theirs = self.ops[i].args, self.reference[j].args
        agree = 0
        if len(mine) == len(theirs):
            for a, b in zip(mine, theirs):
                origin = self._origin(a)
                if origin is None:
                    continue
                if origin != b:
                    return 1
                agree += 1
        return self.weights[i] + 2 * agree


_ALIGNMENT_CELLS = 250_000  # a line's rank ops x reference ops above which pairs go by occurrence


def _aligned(ops: list[Op], reference: list[Op], positions: list[int], partners: list[int],
             weights: list[int], weight: Callable[[int, int], int] | None = None) -> dict[int, int]:
    kinds, reference_kinds = [op.kind for op in ops], [op.kind for op in reference]
    if len(kinds) * len(reference_kinds) > _ALIGNMENT_CELLS:
        matches = _by_occurrence(kinds, reference_kinds)
    elif weight is None:
        matches = _by_subsequence(kinds, reference_kinds, weights)
    else:
        matches = _by_subsequence(kinds, reference_kinds, weights,
                                  lambda i, j: weight(positions[i], partners[j]))
    return {positions[i]: partners[j] for i, j in matches}


def _pairing_weights(ops: tuple[Op, ...]) -> list[int]:
    """Per op, how much pairing it counts: an op that computes from the program's values outweighs
    one that only allocates or reshapes an allocation (a buffer), so where the two runs order a
    buffer and a computation differently (megatron-core allocates its gather buffer after the
    sequence-parallel LayerNorm, the single device before it) the computation is paired."""
    buffers: set[str] = set()
    weights = []
    for op in ops:
        allocates = all(arg in buffers for arg in op.args)
        if allocates:
            buffers.update(op.results)
        weights.append(1 if allocates else 8)
    return weights


def _by_occurrence(kinds: list[str], reference_kinds: list[str]) -> list[tuple[int, int]]:
    """The k-th op of a kind with the k-th op of that kind."""
    def numbered(names):
        seen: dict[str, int] = defaultdict(int)
        out = {}
        for index, kind in enumerate(names):
            out[(kind, seen[kind])] = index
            seen[kind] += 1
        return out

    theirs = numbered(reference_kinds)
    return [(index, theirs[key]) for key, index in numbered(kinds).items() if key in theirs]


def _by_subsequence(kinds: list[str], reference_kinds: list[str], weights: list[int] | None = None,
                    weight: Callable[[int, int], int] | None = None) -> list[tuple[int, int]]:
    """A heaviest common subsequence of the two kind lists (a match weighs its rank op's weight,
    1 by default: the longest; ``weight(i, j)``, when given, weighs each match), taking each match
    as early as it can."""
    n, m = len(kinds), len(reference_kinds)
    weights = weights or [1] * n
    match: dict[tuple[int, int], int] = {}
    for i in range(n):
        for j in range(m):
            if kinds[i] == reference_kinds[j]:
                match[i, j] = weight(i, j) if weight is not None else weights[i]
    suffix = [[0] * (m + 1) for _ in range(n + 1)]  # best weight of kinds[i:] and reference_kinds[j:]
    for i in range(n - 1, -1, -1):
        row, below = suffix[i], suffix[i + 1]
        for j in range(m - 1, -1, -1):
            skip = max(below[j], row[j + 1])
            row[j] = max(below[j + 1] + match[i, j], skip) if (i, j) in match else skip
    out, i, j = [], 0, 0
    while i < n and j < m:
        if (i, j) in match and suffix[i][j] == suffix[i + 1][j + 1] + match[i, j]:
            out.append((i, j))
            i, j = i + 1, j + 1
        elif suffix[i + 1][j] >= suffix[i][j + 1]:
            i += 1
        else:
            j += 1
    return out


def _pairing(reference: tuple[Op, ...], ops: tuple[Op, ...]) -> dict[str, str]:
    """Rank value name -> reference value name of the paired op."""
    pairs, read = {}, {}
    cut = _cut_values(ops)
    for position, partner in paired_positions(reference, ops).items():
        pairs.update(zip(ops[position].results, reference[partner].results))
        if len(ops[position].args) == len(reference[partner].args):
            read.update((mine, theirs) for mine, theirs in zip(ops[position].args, reference[partner].args)
                        if mine in cut)
    # a rank's shard cut by an op the single device does not record (chunk(w, 1)[0] is w itself)
    # pairs with what the paired reader reads there; a copy's input pairs as the copy does
    for op in reversed(ops):
        if op.kind.startswith(_COPY_KINDS) and op.args and op.results and op.results[0] in read \
                and op.args[0] in cut and op.args[0] not in pairs:
            read.setdefault(op.args[0], read[op.results[0]])
    # a mask the rank writes into a paired value (a vocabulary-parallel lookup zeroing foreign ids)
    # leaves the value that value's counterpart: a term of it, which the walk judges
    for op in ops:
        if op.kind.startswith(_MASK_KINDS) and op.args and op.args[0] in pairs and op.results \
                and op.results[0] not in pairs:
            pairs[op.results[0]] = pairs[op.args[0]]
    return {**read, **pairs}


_CUT_KINDS = ("aten.split", "aten.slice.", "aten.chunk", "aten.narrow", "aten.select.", "aten.unbind")
_COPY_KINDS = ("aten.clone.", "aten.contiguous.", "aten.alias.", "aten._to_copy.")
_VIEW_KINDS = ("aten.view.", "aten._unsafe_view.", "aten.reshape.")
_MASK_KINDS = ("aten.index_put", "aten.masked_fill")


def _cut_values(ops: tuple[Op, ...]) -> set[str]:
    """Values a paired reader's operand may pair through: a rank's shard cut by an op, a copy of one
    (megatron-core's scatter to the sequence-parallel region slices, then makes the slice contiguous),
    or a view the rank takes where the single device takes another (megatron-core views its embedding
    twice on the ranks, once on one device)."""
    cut: set[str] = set()
    for op in ops:
        if op.kind.startswith(_CUT_KINDS + _VIEW_KINDS) \
                or (op.kind.startswith(_COPY_KINDS) and op.args and op.args[0] in cut):
            cut.update(op.results)
    return cut


def _consistent(rank_value: Any, reference_value: Any, rank: int | None = None, world: int | None = None) -> bool:
    """Equal to the reference value, or to one block of it (a shard).  Given the rank and world: a
    value cut into ``world`` blocks along one dim must be the rank's own block there (block
    ``rank``); another rank's block (``[world - 1 - rank]``, ``[0]`` on rank 1) is where a wrong
    shard enters, though each of its values is one the single device computes too."""
    got, want = np.asarray(rank_value), np.asarray(reference_value)
    if got.shape == want.shape:
        return _close(got, want)
    counts = block_counts(got.shape, want.shape)
    if counts is None:
        return False
    own = _own_block(counts, rank, world)
    blocks = [own] if own is not None else list(np.ndindex(*counts))
    for block in blocks:
        index = tuple(slice(b * g, (b + 1) * g) for b, g in zip(block, got.shape))
        if _close(got, want[index]):
            return True
    return False


def _scale(got: Any, want: Any) -> Fraction | None:
    """The constant ``c`` with ``got == c * want`` in a concrete run (a small fraction: a data-parallel
    rank's gradient of its loss over 2 micro-batches is twice one device's over 4), or None."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or not got.size or got.dtype.kind not in "fiu" or want.dtype.kind not in "fiu":
        return None
    got, want = got.astype(float), want.astype(float)
    if not (np.isfinite(got).all() and np.isfinite(want).all()):
        return None
    nonzero = np.abs(want) > 1e-12
    if not nonzero.any():
        return Fraction(1) if _close(got, want) else None
    scale = Fraction(float(np.median(got[nonzero] / want[nonzero]))).limit_denominator(1 << 12)
    if scale == 0 or not np.allclose(got, float(scale) * want, rtol=1e-6, atol=1e-8):
        return None
    return scale


class _SampleAgreement:
    """How well a concrete run's values of rank op ``i`` and reference op ``j`` agree: 2 equal, 1 of
    one shape and equal up to one constant factor (not said of single numbers: any two are), else 0
    (memoised; unknown values and shards do not count as agreeing)."""

    def __init__(self, program: TracedProgram, sample: _Runs, rank: int) -> None:
        self.ops, self.reference = program.ranks[rank], program.reference
        self.values, self.reference_values = sample.ranks[rank], sample.reference
        self.memo: dict[tuple[int, int], int] = {}
        self.signatures: dict[str, Any] = {}
        self.reference_signatures: dict[str, Any] = {}

    def __call__(self, i: int, j: int) -> int:
        found = self.memo.get((i, j))
        if found is None:
            mine, theirs = self.ops[i].results, self.reference[j].results
            got = _numeric(self.values.get(mine[0])) if mine else None
            want = _numeric(self.reference_values.get(theirs[0])) if theirs else None
            found = 0
            if got is not None and want is not None and got.shape == want.shape \
                    and _shape(mine[0], got, self.signatures) == _shape(theirs[0], want, self.reference_signatures):
                scale = _scale(got, want)
                found = 0 if scale is None else 2 if scale == 1 else int(got.size > 1)
            self.memo[i, j] = found
        return found


def _numeric(value: Any) -> np.ndarray | None:
    """A concrete run's value as an array of numbers (a 0-d one for a scalar), else None."""
    if isinstance(value, (np.ndarray, np.generic, float, int)) and not isinstance(value, bool):
        array = np.asarray(value)
        if array.dtype.kind in "fiu" and array.size:
            return array
    return None


def _shape(name: str, value: np.ndarray, memo: dict[str, Any]) -> Any:
    """What is left of a value when its scale is taken out (divided by its largest element, rounded):
    two values of one shape are proportional when these agree."""
    found = memo.get(name)
    if found is None:
        flat = value.astype(float).reshape(-1)
        if not np.isfinite(flat).all():
            found = ("not finite", name)
        else:
            largest = flat[int(np.argmax(np.abs(flat)))]
            found = (value.shape, np.round(flat / largest, 5).tobytes() if largest else b"zero")
        memo[name] = found
    return found


def _own_block(counts: list[int], rank: int | None, world: int | None) -> tuple[int, ...] | None:
    """The block a rank holds of a value cut ``world`` ways along one dim (the contiguous shard every
    sharding helper gives rank r); None when the cut says nothing about ranks (several dims cut, or
    not ``world`` ways: a mesh dim's shard, a zigzag's 2 * world chunks)."""
    cut = [d for d, c in enumerate(counts) if c > 1]
    if rank is None or world is None or len(cut) != 1 or counts[cut[0]] != world or not 0 <= rank < world:
        return None
    return tuple(rank if d == cut[0] else 0 for d in range(len(counts)))


class _Partials:
    """Whether every rank's value paired with a reference value is a term of it: summed over the ranks
    they make the single device's value, a partial sum the code reduces later, not a wrong value."""

    def __init__(self, program: TracedProgram, runs: _Runs) -> None:
        self.program, self.runs = program, runs
        self.others: list[dict[str, str]] | None = None   # per rank: reference value -> that rank's value

    def __call__(self, partner: str, scale: int = 1) -> bool:
        """``scale``: terms of ``scale`` times the single device's value (each rank's mean over its equal
        share of a batch: averaged over the ranks, not summed, they make it)."""
        program, runs = self.program, self.runs
        if self.others is None:
            self.others = [{theirs: mine for mine, theirs in _pairing(program.reference, rank_ops).items()
                            if mine in {n for op in rank_ops for n in op.results}} for rank_ops in program.ranks]
        names = [self.others[r].get(partner) for r in range(program.world)]
        if program.world < 2 or any(n is None or n not in runs.ranks[r] for r, n in enumerate(names)):
            return False
        want = np.asarray(runs.reference[partner])
        if scale != 1:
            if want.dtype == object or want.dtype.kind not in "fiu":
                return False
            want = want.astype(float) * scale
        values = [np.asarray(runs.ranks[r][n]) for r, n in enumerate(names)]
        return _terms_of(values, want, program.world)

    def extremes(self, partner: str) -> bool:
        """Every rank's value paired with ``partner`` is a piece of its max (or min) over the ranks: a
        rank's own row maximum of its vocabulary shard, which the code reduces with ``ReduceOp.MAX``
        later, not a wrong value (``_extremes_of``)."""
        if not self(partner) and self.others is not None:
            names = [self.others[r].get(partner) for r in range(self.program.world)]
            if self.program.world > 1 and all(n is not None and n in self.runs.ranks[r] for r, n in enumerate(names)):
                return _extremes_of([np.asarray(self.runs.ranks[r][n]) for r, n in enumerate(names)],
                                    np.asarray(self.runs.reference[partner]))
        return False


def culprit(program: TracedProgram, runs: _Runs, rank: int, value: str, no_line: int | None = None) -> Op | None:
    """The op where the compared value starts to differ: walk back from it through operands
    that differ from their single-device counterparts; stop where every operand agrees."""
    ops = program.ranks[rank]
    producer = {name: op for op in ops for name in op.results}
    pairs = _through_collectives(ops, _pairing(program.reference, ops))
    env, reference = runs.ranks[rank], runs.reference
    partial = _Partials(program, runs)

    unpaired: dict[str, bool] = {}

    def differs(name: str) -> bool:
        partner = pairs.get(name)
        unjudged = partner is None or (name in env and partner in reference
                                       and not comparable(env[name], reference[partner]))
        if unjudged and name in producer and name not in unpaired:
            # a value the single device has no counterpart of (an all-to-all's clone and exchange that
            # one device skips), or one of a shape no block of its counterpart's (an all-to-all's send
            # buffer [world, s/world, ...] against one device's [1, s, ...]), is as wrong as a value it
            # is made from; a concatenation of blocks of one value, as right as their order
            unpaired[name] = False   # a cycle judges nothing
            assembled = _assembled(producer[name], producer, pairs, env, reference)
            unpaired[name] = assembled if assembled is not None \
                else any(differs(arg) for arg in producer[name].args if arg in producer)
        if unjudged:
            return unpaired.get(name, False)
        if name not in env or partner not in reference:
            return False
        reduced = _reduced(producer, name)
        try:   # a collective's result is no partial sum awaiting its reduction: it is that reduction
            return not _consistent(env[name], reference[partner], rank, program.world) \
                and (reduced or not (partial(partner) or (no_line is None and partial(partner, program.world))
                                     or partial.extremes(partner)))
        except (TypeError, ValueError):
            return False

    def computes_indices(op: Op) -> bool:   # its results are integers or truth values: indices, masks
        found = [env.get(name) for name in op.results] if op.results else [None]
        return all(isinstance(v, (np.ndarray, np.generic, bool, int)) and np.asarray(v).dtype.kind in "biu"
                   for v in found)

    op = _earliest_origin(producer.get(value), producer, differs, ops, computes_indices)
    if op is not None:
        unwritten = _unwritten_read(op, producer)
        if unwritten is not None:
            return write_slot(op, unwritten, producer) or unwritten
        if no_line is not None and op.span.line == no_line and op.span.within is None:
            # an op of autograd's own (a gradient buffer) at no line of the user's: a partial sum
            # it reads is where the reduction it misses belongs
            try:
                terms = [name for name in op.args if name in producer and name in pairs and partial(pairs[name])]
            except (TypeError, ValueError):
                terms = []
            if terms:
                return producer[max(terms, key=lambda name: ops.index(producer[name]))]
        try:
            held = [name for name in op.args if name in producer and name in pairs and partial(pairs[name])]
        except (TypeError, ValueError):
            held = []
        return _own_draw(program, op) or _bound_before(op, held, producer) \
            or _left_unreduced(op, held, producer, lambda name: name in pairs and partial(pairs[name])) or op
    return op


def _assembled(op: Op, producer: dict[str, Op], pairs: dict[str, str], env: dict[str, Any],
               reference: dict[str, Any]) -> bool | None:
    """For a concatenation of pieces that come (through ops of one operand: a gather's slices) from
    one value paired with a single-device value: whether the pieces, each a block of that value,
    lie in the wrong order along the concatenated dim (verifier/pieces.py); None when that cannot be said."""
    if not op.kind.startswith("aten.cat.") or not op.args or any(arg not in env for arg in op.args):
        return None
    wholes = set()
    for arg in op.args:
        name = arg
        for _ in range(8):
            if name in pairs or name not in producer or len(producer[name].args) != 1:
                break
            name = producer[name].args[0]
        wholes.add(pairs.get(name))
    if len(wholes) != 1 or None in wholes or next(iter(wholes)) not in reference:
        return None
    try:
        return misassembled([env[arg] for arg in op.args], reference[next(iter(wholes))], int(op.attr("dim", 0)),
                            _close)
    except (TypeError, ValueError):
        return None


def _earliest_origin(start: Op | None, producer: dict[str, Op], differs: Callable[[str], bool],
                     ops: tuple[Op, ...], computes_indices: Callable[[Op], bool] = lambda op: False) -> Op | None:
    """Of the ops the compared value's wrong values come from (back from ``start`` through operands
    that differ), the earliest the rank ran whose own operands all agree: where the values first go
    wrong.  Not the origin a walk through the latest wrong operand ends at: megatron-core's
    sequence-parallel backward runs one reduce-scatter per linear layer on one line, and a wrong one
    feeds every later gradient, some of which also go wrong later through views of buffers
    autograd made (a greedy walk ended at such a view, ``as_strided`` in a masked softmax's backward).
    Origins that compute numbers come before those that ``computes_indices``: a rank's indices and masks
    (``ids < start`` for its vocabulary range) differ from one device's by design, so they are where the
    values go wrong only when nothing else is (a wrong offset)."""
    position = {id(op): i for i, op in enumerate(ops)}
    judged: dict[str, bool] = {}

    def wrong_operand(name: str) -> bool:
        if name not in judged:
            judged[name] = name in producer and differs(name)
        return judged[name]

    origins, seen, stack = [], set(), [start] if start is not None else []
    while stack:
        op = stack.pop()
        if id(op) in seen:
            continue
        seen.add(id(op))
        wrong = [name for name in op.args if wrong_operand(name)]
        if not wrong and op.attr("comparison_cut") and op.args and op.args[0] in producer:
            wrong = [op.args[0]]   # the cut of the compared block is ours: look at what it cuts
        if wrong:
            stack.extend(producer[name] for name in wrong)
        else:
            origins.append(op)
    return min(origins, key=lambda op: (computes_indices(op), position.get(id(op), len(ops))), default=None)


def _bound_before(reader: Op, partials: list[str], producer: dict[str, Op]) -> Op | None:
    """``reader`` goes wrong reading a partial sum its statement got through a name bound on an earlier
    line that made no part of it (``output_ = output_parallel`` where a reduction was, or a value handed
    back by a call): the reduction it misses belongs after that line, so the finding names it (the
    reader stays in the message).  Not for a collective: a reduction that reads a partial sum is
    itself where it goes wrong.  None when the recording kept no binding, or the operands name
    different lines."""
    if not partials or reader.kind.startswith(_COLLECTIVE_KINDS) or "c10d" in reader.kind:
        return None
    bound = {name: (variable, line) for name, variable, line in reader.span.bound}
    found = {bound.get(name) for name in partials}
    if len(found) != 1 or None in found:
        return None
    ((variable, line),) = found
    span = reader.span.moved_to(line)
    at, file = reader.span.place()
    if at is None or line >= at or any(producer[name].span.place() == span.place() for name in partials):
        return None
    kind = (f"{reader.kind} ({reader.span.where()}) reading {variable}, which holds a partial sum of the ranks: "
            f"a reduction belongs after the line that bound {variable}")
    return Op(tuple(partials), kind, (), {}, span)


def _left_unreduced(reader: Op, partials: list[str], producer: dict[str, Op],
                    is_partial: Callable[[str], bool]) -> Op | None:
    """``reader`` goes wrong reading a partial sum that a bare call of the user's read earlier and left
    as it was (no write named the value anew: ``dist.all_reduce(t)`` reducing nothing, a wrapper that
    returned early), directly or through ops that keep it a partial sum (``sum_exp / count``): the
    in-place reduction belongs at that call, so the finding names it (the reader stays in the message).
    Not for a collective reader, nor when the operands lead to different calls."""
    if not partials or reader.kind.startswith(_COLLECTIVE_KINDS) or "c10d" in reader.kind:
        return None

    def left_by(op: Op, name: str, depth: int = 0):
        entry = next(((v, line, within) for n, v, line, within in op.span.left if n == name), None)
        made = producer.get(name)
        if entry is not None or made is None or depth > 8 or made.kind.startswith(_COLLECTIVE_KINDS):
            return entry
        found = {left_by(made, arg, depth + 1) for arg in made.args if arg in producer and is_partial(arg)}
        found.discard(None)
        return found.pop() if len(found) == 1 else None

    try:
        found = {left_by(reader, name) for name in partials}
    except (TypeError, ValueError):
        return None
    if len(found) != 1 or None in found:
        return None
    ((variable, line, within),) = found
    span = Span(line, reader.span.file, tuple(within) if within is not None else None)
    if span.place() == reader.span.place():
        return None
    kind = (f"{reader.kind} ({reader.span.where()}) reading a partial sum of the ranks ({variable}, or a value "
            f"made from it): the call at {span.where()} read {variable} and left it as it was; the reduction "
            f"belongs there")
    return Op(tuple(partials), kind, (), {}, span)


def _unwritten_read(op: Op, producer: dict[str, Op]) -> Op | None:
    """``op`` computes from a buffer ``torch.empty`` made that nothing wrote before (the recorder names
    every write anew, so the allocation's own name is its uninitialised memory): there the values go
    wrong, whatever was meant to fill it (a collective into the buffer dropped?).  Writers are not
    readers: in-place ops, ``out=`` overloads and the recorder's write-backs are passed by (a collective's
    arguments are its inputs: it reads them)."""
    overload = op.kind.split(".")
    if len(overload) > 1 and (overload[1].endswith("_") or overload[-1].startswith("out")) or op.attr("write_back"):
        return None
    for name in op.args:
        made = producer.get(name)
        for _ in range(8):   # a view of the buffer (``gathered.chunk(world)``) reads its memory
            if made is None or not made.kind.startswith(_ALIASING) or len(made.args) != 1:
                break
            made = producer.get(made.args[0])
        if made is not None and made.kind in UNINITIALISED:
            return Op(made.results, f"memory allocated by {made.kind} that nothing wrote before it was read",
                      (), {}, made.span)
    return None


# ops whose result shares its one operand's memory: a view the recorder made of a buffer before a write is
# re-derived from the written buffer when read next, so a view of the allocation's own name is unwritten too
_ALIASING = _VIEW_KINDS + ("aten.split", "aten.chunk.", "aten.unbind.", "aten.slice.", "aten.select.",
                           "aten.narrow.", "aten.transpose.", "aten.permute.", "aten.t.", "aten.alias.",
                           "aten.detach.", "aten.squeeze", "aten.unsqueeze.", "aten.flatten.", "aten.unflatten.",
                           "aten.expand.", "aten.as_strided.")


def _extremes_of(values: list[np.ndarray], want: np.ndarray) -> bool:
    """The ranks' values, none of them ``want`` itself, make it by their elementwise max (or min): each
    rank holds the extreme of its own piece.  Values that are symbolic or of another shape: False."""
    if want.dtype == object or want.dtype.kind != "f" or not want.size \
            or any(v.shape != want.shape or v.dtype == object for v in values):
        return False
    floats = [v.astype(float) for v in values]
    if any(_close(v, want) for v in floats):
        return False
    return _close(np.max(floats, axis=0), want) or _close(np.min(floats, axis=0), want)


def _terms_of(values: list[np.ndarray], want: np.ndarray, world: int) -> bool:
    """The ranks' values sum to ``want`` and are not all the same: per-rank terms of a sum.  Equal
    values that sum to it are the single device's value scaled by 1 / world (a division too many),
    and values that average to it may be pieces scaled by world: both wrong where they happen.
    Values that are terms (symbolic) or of another shape are not numbers to sum: False."""
    if want.dtype == object or any(v.shape != want.shape or v.dtype == object for v in values):
        return False
    floats = [v.astype(float) for v in values]
    if all(_close(v, floats[0]) for v in floats[1:]):
        return False
    return _close(np.sum(floats, axis=0), want)


_COLLECTIVE_KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast")


def _through_collectives(ops: tuple[Op, ...], pairs: dict[str, str]) -> dict[str, str]:
    """A collective on one device is the identity, which the single-device run does not record: an
    unpaired collective's result pairs with what its input pairs with there."""
    out = dict(pairs)
    for op in ops:
        if op.kind.startswith(_COLLECTIVE_KINDS + _SCALING_KINDS) and len(op.results) == 1 and op.args \
                and op.results[0] not in out and op.args[0] in out:
            out[op.results[0]] = out[op.args[0]]
    return out


def _reduced(producer: dict[str, Op], name: str) -> bool:
    """The value is a collective's result, or a scaling of one (gloo's average divides the sum)."""
    op = producer.get(name)
    while op is not None and op.kind.startswith(_SCALING_KINDS) and op.args:
        op = producer.get(op.args[0])
    return op is not None and op.kind.startswith(_COLLECTIVE_KINDS)


# a scaling the rank does where one device does none (gloo's average: a sum, then a division in place)
# pairs like a collective: the scaled value is still its input's counterpart, right or wrong
_SCALING_KINDS = ("aten.div", "aten.mul")


def first_culprit(program: TracedProgram, runs: _Runs, comparison: Comparison, rank: int) -> tuple[Op | None, int]:
    """The culprit (and its rank) of the earliest op at which any rank's values of ``comparison`` go
    wrong: a wrong shard on rank 1 (``[0]`` for ``[rank]``) leaves rank 0 right up to the reduction,
    so rank 0's own walk would stop there.  ``rank``'s culprit when no other rank's is earlier."""
    best: tuple[tuple[int, int], Op, int] | None = None
    for r, name in enumerate(comparison.per_rank):
        if name is None or name not in runs.ranks[r]:
            continue
        if r != rank:
            try:
                if _close(_region(runs.reference[comparison.reference], comparison.regions[r]), runs.ranks[r][name]):
                    continue
            except (KeyError, TypeError, ValueError):
                continue
        op = culprit(program, runs, r, name, comparison.span.line if comparison.kind == "gradient" else None)
        if op is None:
            continue
        position = next((i for i, o in enumerate(program.ranks[r]) if o is op), len(program.ranks[r]))
        key = (position, 0 if r == rank else 1)
        if best is None or key < best[0]:
            best = (key, op, r)
    if best is None:
        return None, rank
    return _gradient_read_through(program, runs, comparison, best[2], best[1]) \
        or _missing_exchange(program, runs, comparison, best[2], best[1]) \
        or _misrouted(program, runs, best[2], best[1]) or best[1], best[2]


def _misrouted(program: TracedProgram, runs: _Runs, rank: int, found: Op) -> Op | None:
    """A value after an all-to-all holding other elements than its block of one device's: where the send
    buffer was laid out (routing_lines.py)."""
    ops, env, reference = program.ranks[rank], runs.ranks[rank], runs.reference
    pairs = _through_collectives(ops, _pairing(program.reference, ops))

    def block(name: str) -> Any:   # one device's value of ``name``'s partner, or the rank's own block of it
        want = np.asarray(reference[pairs[name]])
        got = np.shape(env[name])
        if got == want.shape:
            return want
        own = _own_block(block_counts(got, want.shape) or [], rank, program.world)
        if own is None:
            raise ValueError("no block of the rank's own")
        return want[tuple(slice(b * g, (b + 1) * g) for b, g in zip(own, got))]

    def agrees(name: str) -> bool:
        try:
            return name in env and comparable(env[name], reference[pairs[name]]) and _close(env[name], block(name))
        except (KeyError, TypeError, ValueError, IndexError):
            return False

    return misrouted(ops, env, program.reference, reference, pairs, found, block, agrees, _close)


def _missing_exchange(program: TracedProgram, runs: _Runs, comparison: Comparison, rank: int, found: Op) -> Op | None:
    """An output that only ever held the rank's own elements: where the exchange belongs (exchange_lines.py)."""
    try:
        want = _region(runs.reference[comparison.reference], comparison.regions[rank])
    except (KeyError, TypeError, ValueError, IndexError):
        return None
    return missing_exchange(program, runs.ranks[rank], want, comparison, rank, found)


def _gradient_read_through(program: TracedProgram, runs: _Runs, comparison: Comparison, rank: int,
                           found: Op) -> Op | None:
    """An input's gradient that every rank holds a term of (summed, the single device's) goes wrong at
    the backward of the forward op that read the input; that op read it through a name bound on an
    earlier line that made none of it (``x_parallel = x`` where a copy to the parallel region was, the
    identity whose backward all-reduces): the reduction the gradient misses belongs at that line."""
    if comparison.kind != "gradient" or not _ranks_hold_terms(program, runs, comparison):
        return None
    leaf = comparison.label.split("gradient of ", 1)[-1].strip()
    producer = {name: op for op in program.ranks[rank] for name in op.results}

    def is_leaf(name: str) -> bool:   # the leaf, or a copy or view of it (the run's own clone of an input)
        for _ in range(8):
            if name == leaf or name.startswith(leaf + "@"):
                return True
            made = producer.get(name)
            if made is None or not made.kind.startswith(_COPY_KINDS + _VIEW_KINDS + ("aten.detach.",)) or not made.args:
                return False
            name = made.args[0]
        return False

    place = found.span.place()
    readers = {(variable, line, op.span) for op in program.ranks[rank] if op is not found and op.span.place() == place
               for value, variable, line in op.span.bound if is_leaf(value)}
    bindings = {(variable, line) for variable, line, _ in readers}
    if len(bindings) != 1:
        return None
    variable, line, span = next(iter(readers))
    at = span.moved_to(line)
    kind = (f"the backward of {found.kind} ({found.span.where()}), whose forward read {leaf} as {variable}: every "
            f"rank's gradient of {leaf} is a partial sum; the reduction it misses belongs at the line that bound "
            f"{variable}")
    return Op(found.results, kind, (), {}, at)


def _ranks_hold_terms(program: TracedProgram, runs: _Runs, comparison: Comparison) -> bool:
    """Every rank's value of ``comparison`` is whole and a term of the single device's value."""
    try:
        want = np.asarray(runs.reference[comparison.reference])
        whole = tuple((0, int(d)) for d in want.shape)
        if any(r is not None and tuple(tuple(int(x) for x in b) for b in r) != whole for r in comparison.regions):
            return False   # each rank holds a piece: not a term of the whole
        values = [np.asarray(runs.ranks[r][n]) for r, n in enumerate(comparison.per_rank)]
        return _terms_of(values, want, program.world)
    except (KeyError, TypeError, ValueError):
        return False


def _unreduced(program: TracedProgram, runs: _Runs, comparison: Comparison) -> Op | None:
    """The compared value is, on every rank, a term of the single device's: summed over the ranks
    they make it.  Nothing is wrong up to its last op; the reduction it misses belongs where
    the value is handed back (the entry's ``return`` for an output; for a parameter's gradient the line
    that made the parameter, where it is marked for the reduction), so that is where it is named."""
    if program.world < 2 or any(n is None for n in comparison.per_rank) \
            or comparison.kind not in ("output", "gradient") \
            or comparison.span.line is None or _at_no_line_of_its_own(program, comparison):
        return None
    if not _ranks_hold_terms(program, runs, comparison):
        return None
    unreduced = Op((comparison.per_rank[0],), _UNREDUCED, (), {}, comparison.span)
    return _returned_as_bound(program, comparison, unreduced) or unreduced


def _returned_as_bound(program: TracedProgram, comparison: Comparison, unreduced: Op) -> Op | None:
    """The output is returned under a name bound on an earlier line that made none of it (``output =
    output_parallel`` where the reduction was): the reduction belongs after that line, so it is named."""
    if comparison.kind != "output" or len(comparison.span.bound) != 1:
        return None
    _, variable, line = comparison.span.bound[0]
    span = comparison.span.moved_to(line)
    for rank, name in enumerate(comparison.per_rank):
        made = next((op for op in program.ranks[rank] if name in op.results), None)
        if made is None or made.span.place() == span.place():
            return None
    kind = (f"a partial sum no collective reduces over the ranks: {variable}, returned at line "
            f"{comparison.span.line}, holds it since the line that bound it, after which the reduction belongs")
    return Op(unreduced.results, kind, (), {}, span)


def _at_no_line_of_its_own(program: TracedProgram, comparison: Comparison) -> bool:
    """An entry input's gradient: it carries the entry's own line (where its leaf was bound), not a
    line that made it; the walk names where its partial sums are made instead."""
    if comparison.kind != "gradient":
        return False
    leaf = comparison.label.split("gradient of ", 1)[-1].strip()
    spec = next((s for s in program.inputs if s.name == leaf), None)
    return spec is not None and spec.span.line == comparison.span.line


def _own_draw(program: TracedProgram, op: Op) -> Op | None:
    """A random draw the rank made with numbers of its own, read by ``op``: there the values go wrong."""
    specs = {spec.name: spec for spec in program.inputs}
    for name in op.args:
        if name in program.pinned and "@rank" in name and name in specs and name not in program.fixed:
            return Op((name,), "a random draw with numbers of this rank's own", (), {}, specs[name].span)
    return None


def _layout(program: TracedProgram, comparison: Comparison, rank: int) -> str:
    """The layout the recorder assumed for the leaf whose gradient is compared."""
    if comparison.kind != "gradient":
        return ""
    leaf = comparison.label.split("gradient of ", 1)[-1].strip()
    region = comparison.regions[rank]
    if region is not None and len(set(comparison.regions)) > 1:
        block = ", ".join(f"{start}:{stop}" for start, stop in region)
        return f"; rank {rank}'s block [{block}] of the gradient of {leaf} compared (the rank reads only that block)"
    for op in program.ranks[rank]:
        if leaf in op.args and op.attr("layout_source") is not None:
            bounds = ", ".join(f"{k}={op.attrs[k]}" for k in ("dim", "start", "end") if k in op.attrs)
            return f"; layout assumed for {leaf}: {op.kind}({bounds}) from {op.attr('layout_source')}"
    return f"; {leaf} assumed whole (replicated) on rank {rank}" if any(s.name == leaf for s in program.inputs) else ""


def _violation(check: str, message: str, op: Op | None, line: int | None, counterexample,
               repair_line: int | None = None, built: int | None = None, summed: int | None = None,
               handed: int | None = None, returned: int | None = None,
               picked: tuple[str, int, str] | None = None) -> Diagnostic:
    """A violation located at its culprit: the line of the user's package the op ran in (with its
    file) when it ran there, else the culprit's line in the checked file, else ``line``.  ``built``: the
    culprit ran in the forward of an installed module built at that line (its repair line when no
    reduction is missing).  ``handed``: the culprit read a piece an installed module built at that line
    handed out (``_handed``).  ``returned``: the line of the checked file where a custom backward hands back
    the gradient that goes wrong, unchanged (``handed_back.py``; the culprit names it).  ``picked``: the
    variable and line of a pick out of a Python list the culprit read, and how the ranks' picks there part
    from one device's (``picked_lines.py``)."""
    at, file = op.span.place() if op is not None else (None, None)
    if returned is not None:
        repair_line = returned
    elif repair_line is not None:
        message += (f"; it reads a partial sum of the ranks made at line {repair_line}: the reduction it misses "
                    f"belongs after that line")
    elif summed is not None:
        message += (f"; every rank's result of that all-reduce is the world size times one device's value (a sum "
                    f"of the ranks' means, or of one value every rank holds): the division by the world size belongs "
                    f"where it is read next, line {summed}")
        repair_line = summed
    elif built is not None:
        message += (f"; it ran in the forward of the installed module built at line {built}, from operands that are "
                    f"right: the flags or parallel style given there choose what the module computes on a rank")
        repair_line = built
    elif handed is not None:
        message += (f"; it reads a piece of the value (this rank's block of one device's) that the installed module "
                    f"built at line {handed} hands out, as if it were the whole: the flags or parallel style given "
                    f"there choose which layout a rank gets")
        repair_line = handed
    elif picked is not None:
        variable, repair_line, how = picked
        message += (f"; it reads {variable}, picked at line {repair_line} out of a Python list or tuple (a pick no "
                    f"op records): {how}")
    return Diagnostic(check, ERROR, message, line if at is None else at, counterexample, file=file,
                      repair_line=repair_line)


def _mispicked(program: TracedProgram, op: Op | None) -> tuple[str, int, str] | None:
    """The pick out of a Python list the culprit ``op`` read, when the ranks' picks there are no sharing of one
    device's (``picked_lines.py``)."""
    return mispicked(program, op, lambda ops: _through_collectives(ops, _pairing(program.reference, ops)))


def _summed(program: TracedProgram, runs: _Runs | None, comparison: Comparison, rank: int | None,
            op: Op | None) -> int | None:
    """For a culprit that is a summing all-reduce whose result on ``rank`` is the world size times the
    single device's value (each rank's mean over its share of a batch, summed): the line where that result
    is read next in the checked file (its next reader's, else the output's ``return``), where the division
    by the world size goes.  None otherwise."""
    if op is None or runs is None or rank is None or comparison.kind != "output" or program.world < 2:
        return None
    if not op.kind.startswith("all_reduce") or op.attrs.get("op", "sum") != "sum" or len(op.results) != 1:
        return None
    ops = program.ranks[rank]
    position = next((i for i, o in enumerate(ops) if o is op), None)
    if position is None:
        return None
    try:
        pairs = _through_collectives(ops, _pairing(program.reference, ops))
        result = op.results[0]
        got, want = np.asarray(runs.ranks[rank][result], float), np.asarray(runs.reference[pairs[result]], float)
        if got.shape != want.shape or not np.any(want) or _close(want, got) or not _close(want * program.world, got):
            return None
    except (KeyError, TypeError, ValueError):
        return None
    at, file = op.span.place()
    readers = [o for o in ops[position + 1:] if result in o.args and o.span.place() != (at, file)]
    line, reader_file = readers[0].span.place() if readers else comparison.span.place()
    return line if reader_file is None and line is not None and line != at else None


def _built(program: TracedProgram, rank: int | None, op: Op | None) -> int | None:
    """The line that built the installed module in whose forward the culprit ``op`` ran on ``rank`` (a
    recorded op of that rank, not a finding's stand-in)."""
    if op is None or rank is None or rank >= len(program.built) or not op.results:
        return None
    if not any(o is op for o in program.ranks[rank]):
        return None
    return program.built[rank].get(op.results[0])


# ops that hand their one operand on reshaped or as it is (a module's output hook turning a DTensor local)
_PASSING = frozenset({"aten.view.default", "aten._unsafe_view.default", "aten.alias.default", "aten.reshape.default",
                      "aten.detach.default", "aten.clone.default", "aten.contiguous.default", "aten.t.default",
                      "aten.transpose.int", "aten.permute.default", "aten.expand.default", "aten.squeeze.dim",
                      "aten.unsqueeze.default"})


def _handed(program: TracedProgram, runs: _Runs | None, rank: int | None, op: Op | None) -> int | None:
    """The line that built an installed module whose output the culprit ``op`` (run in none) reads as a
    piece: an operand, made in that module's forward (through ops that only pass it on), whose value on
    ``rank`` is a proper block of one device's counterpart.  The module's flags or parallel style chose to
    hand out a piece (``use_local_output``, ``gather_output=False``), and the op, right for the whole value,
    goes wrong on it: the choice made at that line is where a repair goes.  None otherwise."""
    if op is None or runs is None or rank is None or rank >= len(program.built) or not op.results:
        return None
    built, ops = program.built[rank], program.ranks[rank]
    if built.get(op.results[0]) is not None or not any(o is op for o in ops):
        return None
    producer = {name: o for o in ops for name in o.results}
    try:
        pairs = _through_collectives(ops, _pairing(program.reference, ops))
    except (TypeError, ValueError, KeyError):
        return None
    lines = set()
    for name in op.args:
        partner = pairs.get(name)
        if partner is None or name not in runs.ranks[rank] or partner not in runs.reference:
            continue
        try:
            got, want = np.asarray(runs.ranks[rank][name]), np.asarray(runs.reference[partner])
            if got.shape == want.shape or got.ndim != want.ndim or not _consistent(got, want, rank, program.world):
                continue
        except (TypeError, ValueError):
            continue
        source = name
        for _ in range(8):
            if built.get(source) is not None or source not in producer:
                break
            passing = producer[source]
            tensors = [arg for arg in passing.args if arg in producer or arg in runs.ranks[rank]]
            if passing.kind not in _PASSING or len(tensors) != 1:
                break
            source = tensors[0]
        if built.get(source) is not None:
            lines.add(built[source])
    return lines.pop() if len(lines) == 1 else None


_UNREDUCED = "a partial sum no collective reduces over the ranks"


def _repair_line(program: TracedProgram, runs: _Runs | None, comparison: Comparison, rank: int,
                 op: Op | None) -> int | None:
    """The line after which a reduction the culprit misses goes (``reduction_lines.py``): the culprit read
    a partial sum made on an earlier line (a value handed back unreduced is read by the ``return``).  For an
    output only: a gradient's ops run in the backward, whose lines are the forward ops' in reverse."""
    if op is None or runs is None or comparison.kind != "output":
        return None
    try:
        if op.kind == _UNREDUCED and op.span == comparison.span:
            lines = set()
            for r, name in enumerate(comparison.per_rank):
                producer = {result: o for o in program.ranks[r] for result in o.results}
                lines.add(repair_after(comparison.span, [name], producer))
            return lines.pop() if len(lines) == 1 else None
        ops = program.ranks[rank]
        if not any(o is op for o in ops) or is_collective(op):
            return None
        producer = {result: o for o in ops for result in o.results}
        return repair_after(op.span, _partials_read(program, runs, rank, op.args), producer)
    except (TypeError, ValueError, KeyError):
        return None


def _partials_read(program: TracedProgram, runs: _Runs, rank: int, names: tuple[str, ...]) -> list[str]:
    """Those of ``names`` (values of ``rank``) that hold, on the ranks, partial sums of one device's value."""
    ops = program.ranks[rank]
    producer = {result: o for o in ops for result in o.results}
    pairs = _through_collectives(ops, _pairing(program.reference, ops))
    partial = _Partials(program, runs)
    return [name for name in names if name in producer and name in pairs and partial(pairs[name])]


def _handed_back(program: TracedProgram, runs: _Runs | None, comparison: Comparison, rank: int | None,
                 op: Op | None) -> Op | None:
    """The ``return`` of a custom backward that handed the wrong gradient back unchanged, or of a custom
    forward that handed a partial sum back unreduced (``handed_back.py``): the culprit, at that line, when the
    recording shows one."""
    if runs is None or rank is None:
        return None
    name = comparison.per_rank[rank]
    if comparison.kind == "output" and rank < len(program.forward_handed_back) and program.forward_handed_back[rank]:
        ops = program.ranks[rank]
        read = []
        if op is not None and not is_collective(op):
            # an op's operands; a finding made of an op (``_bound_before``) holds the partial sums it read as its values
            names = op.args if any(o is op for o in ops) else op.results
            try:
                read = _partials_read(program, runs, rank, names)
            except (TypeError, ValueError, KeyError):
                read = []
        return unreduced_forward(program.forward_handed_back[rank], ops, comparison.label, name,
                                 _ranks_hold_terms(program, runs, comparison), op, read)
    if comparison.kind != "gradient" or rank >= len(program.handed_back) or not program.handed_back[rank]:
        return None
    try:
        got = np.asarray(runs.ranks[rank][name], float)
        want = np.asarray(_region(runs.reference[comparison.reference], comparison.regions[rank]), float)
        scaled = got.shape == want.shape and bool(np.any(want)) and not _close(want, got) \
            and _close(want * program.world, got)
    except (KeyError, TypeError, ValueError):
        scaled = False
    return unchanged_backward(program.handed_back[rank], program.ranks[rank], comparison.label, name, op,
                              _ranks_hold_terms(program, runs, comparison), scaled)


def _returned_line(handed: Op | None) -> int | None:
    """The checked file's line of a handed-back culprit's ``return`` (None in the user's package)."""
    return handed.span.line if handed is not None and handed.span.within is None else None


def _report_violation(program: TracedProgram, report: Report, found, leaves, how: str,
                      confirm: Confirm | None = None) -> None:
    mismatch, runs = found
    comparison, rank = mismatch.comparison, mismatch.rank
    op = _unreduced(program, runs, comparison)
    culprit_rank = rank
    if op is None:
        op, culprit_rank = first_culprit(program, runs, comparison, rank)
    where = f"{comparison.label}[{','.join(map(str, mismatch.index))}]" if mismatch.index else comparison.label
    expected = _pick(mismatch.expected, mismatch.index)
    got = _pick(mismatch.got, mismatch.index)
    if confirm is not None:
        finding = Finding(comparison.label, rank, mismatch.index, leaves, expected, got, op, how)
        confirmation = confirm(program, finding)
        if confirmation.outcome != REPRODUCED:
            _unconfirmed(report, finding, confirmation, f"{where} is {got} on rank {rank} where one device "
                                                        f"computes {expected}", op)
            return
        _report_reproduced(program, report, leaves, how, confirmation, comparison, rank, op, runs, culprit_rank,
                           _repair_line(program, runs, comparison, culprit_rank, op))
        return
    handed = _handed_back(program, runs, comparison, culprit_rank, op)
    op = handed or op
    shape_note = "" if np.shape(mismatch.expected) == np.shape(mismatch.got) else \
        f" (shape {list(np.shape(mismatch.got))} where the single-device run has {list(np.shape(mismatch.expected))})"
    counterexample = Counterexample(
        inputs={key: plain(value) for key, value in leaves.items()},
        reference={where: expected},
        per_rank={f"rank {r}": {f"{comparison.label} ({n})": plain(runs.ranks[r][n])}
                  for r, n in enumerate(comparison.per_rank) if n is not None},
        value=where,
        note=f"single device computes {where} = {expected}; rank {rank} holds {got}{shape_note}")
    culprit_text = f"; the values first go wrong at {op.kind} ({op.span.where()}) on rank {culprit_rank}" \
        if op is not None else ""
    report.add(_violation("equivalence", f"{comparison.label} differs from the single-device run on rank {rank} ({how})"
                                         f"{culprit_text}{_layout(program, comparison, rank)}",
                          op, comparison.span.line, counterexample,
                          _repair_line(program, runs, comparison, culprit_rank, op), _built(program, culprit_rank, op),
                          _summed(program, runs, comparison, culprit_rank, op),
                          _handed(program, runs, culprit_rank, op), _returned_line(handed), _mispicked(program, op)))


def _report_reproduced(program: TracedProgram, report: Report, leaves, how: str, confirmation: Confirmation,
                       comparison: Comparison, rank: int, op: Op | None, runs: _Runs | None = None,
                       culprit_rank: int | None = None, repair: int | None = None) -> None:
    """The violation as torch shows it: its values, on the value and rank where torch's differ."""
    shown = next((c for c in program.comparisons if c.label == confirmation.label), comparison)
    if confirmation.rank is not None:
        rank = confirmation.rank
    if (shown is not comparison or confirmation.rank is not None) and runs is not None:
        # torch shows another value (or rank) than the model's first: where the model's values of
        # that one first go wrong, when they do; else the model's culprit (the same code ran)
        name = shown.per_rank[rank] if rank < len(shown.per_rank) else None
        if name is not None and name in runs.ranks[rank] and shown.reference in runs.reference:
            try:
                wrong = not _close(_region(runs.reference[shown.reference], shown.regions[rank]),
                                   runs.ranks[rank][name])
            except (TypeError, ValueError):
                wrong = False
            if wrong:
                found = _unreduced(program, runs, shown)
                if found is None:
                    found, culprit_rank = first_culprit(program, runs, shown, rank)
                if found is not None:
                    walked = rank if culprit_rank is None else culprit_rank
                    op, repair = found, _repair_line(program, runs, shown, walked, found)
    handed = _handed_back(program, runs, shown, rank if culprit_rank is None else culprit_rank, op)
    if handed is not None:
        op, repair = handed, None
    index = confirmation.index
    where = f"{shown.label}[{','.join(map(str, index))}]" if index else shown.label
    if confirmation.label is None:   # torch shows no value: a rank raised
        where = f"rank {rank}"
        note = confirmation.detail
    else:
        note = (f"torch on one device computes {where} = {confirmation.reference_value}; on {confirmation.world} "
                f"gloo ranks, rank {rank} holds {confirmation.rank_value}")
    counterexample = Counterexample(
        inputs={key: plain(value) for key, value in leaves.items()},
        reference={where: confirmation.reference_value} if confirmation.label is not None else {},
        per_rank={key: {label: plain(value) for label, value in values.items()}
                  for key, values in confirmation.per_rank.items()},
        value=where, note=note)
    culprit_text = f"; the values first go wrong at {op.kind} ({op.span.where()}) on rank " \
                   f"{rank if culprit_rank is None else culprit_rank}" if op is not None else ""
    report.add(_violation("equivalence", f"{shown.label} differs from the single-device run on rank {rank} ({how}; "
                                         f"{confirmation.detail}){culprit_text}{_layout(program, shown, rank)}",
                          op, shown.span.line, counterexample, repair,
                          _built(program, rank if culprit_rank is None else culprit_rank, op),
                          _summed(program, runs, shown, rank if culprit_rank is None else culprit_rank, op),
                          _handed(program, runs, rank if culprit_rank is None else culprit_rank, op),
                          _returned_line(handed), _mispicked(program, op)))
    report.extra.setdefault("confirmed_by_torch", []).append(
        {"value": where, "rank": rank, "world": confirmation.world, "reference": confirmation.reference_value,
         "rank_value": confirmation.rank_value, "seconds": round(confirmation.seconds, 2)})


def _unconfirmed(report: Report, finding: Finding, confirmation: Confirmation, claim: str, op: Op | None) -> None:
    """The model's difference is not torch's: ``unsupported``, and a defect of ours, listed."""
    line = op.span.line if op is not None else None
    reads = _reads_into_python(report)
    if confirmation.outcome == AGREES and reads:
        message = (f"by the verifier's model, {claim} ({finding.how}), but {confirmation.detail}: the counterexample "
                   f"may take another path than the recorded inputs did (the code reads tensor values into Python "
                   f"at {', '.join(reads)}, and the recording holds the sizes and indices of the recorded path); "
                   f"not a violation")
        kind = "counterexample off the recorded path"
    elif confirmation.outcome == AGREES:
        subject = f"the verifier's model of op {op.kind} disagrees with torch at line {line}" if op is not None \
            else "the verifier's model of the recorded ops disagrees with torch"
        message = (f"{subject}: by the model, {claim} ({finding.how}), but {confirmation.detail}; not a violation "
                   f"(a defect of the verifier, please report it)")
        kind = "model disagrees with torch"
    else:
        message = (f"not confirmed by torch: by the verifier's model, {claim} ({finding.how}), but the code could "
                   f"not be run with that counterexample on real ranks ({confirmation.detail}); no violation is "
                   f"reported without torch reproducing it")
        kind = "not confirmed by torch"
    report.add(Diagnostic("unsupported", ERROR, message, line))
    _list_defect(report, kind, message, confirmation, line, op, finding.label, finding.rank)


def _reads_into_python(report: Report) -> list[str]:
    """The lines (``line N``) whose reads of tensor values into Python the recording states as assumptions."""
    found = (re.match(r"(line \d+) reads tensor values", d.message) for d in report.diagnostics
             if d.check == "assumption")
    return sorted({match.group(1) for match in found if match}, key=lambda text: int(text.split()[1]))


def _pick(value: Any, index: tuple[int, ...]) -> Any:
    array = np.asarray(value)
    if index and array.ndim == len(index):
        return plain(array[index])
    return plain(array)


# --- proof ---------------------------------------------------------------------------------------------

def _symbolic_leaves(inputs: tuple[TensorSpec, ...]) -> tuple[dict[str, np.ndarray], list, dict[str, Any]]:
    arrays, domain, variables = {}, [], {}
    for spec in inputs:
        shape = tuple(int(d) for d in spec.shape)
        kind = _kind(spec)
        indices = list(np.ndindex(*shape))
        labels = [f"{spec.name}[{','.join(map(str, i))}]" if shape else spec.name for i in indices]
        sort = z3.IntSort() if kind == "int" else z3.BoolSort() if kind == "bool" else z3.RealSort()
        array = np.empty(shape, dtype=object)
        for index, label, var in zip(indices, labels, fresh_constants(labels, sort)):
            if kind == "int":
                domain += integer_domain(var, spec)
            array[index] = var
            variables[label] = var
        arrays[spec.name] = array
    return arrays, domain, variables


_EXP_MEMO: dict[int, bool] = {}  # Z3 subterm id -> holds an exp, for the terms of one proof attempt
_ITE_MEMO: dict[int, bool] = {}  # and -> holds an If
_QUOTIENT_MEMO: dict[int, bool] = {}  # and -> holds a division by a term
# and -> (the subterm, kept alive so its id is not reused; whether it selects by integer data)
_SELECTS_MEMO: dict[int, tuple[z3.ExprRef | None, bool]] = {}



def _provably_equal(a: Any, b: Any) -> bool:
    if not isinstance(a, z3.ExprRef) and not isinstance(b, z3.ExprRef):
        return bool(a == b)
    a, b = as_term(a), as_term(b)
    if same_term(a, b):
        return True
    if z3.is_bool(a) or z3.is_bool(b):
        return z3.is_true(z3.simplify(a == b))
    difference = normal_form(a - b)
    if z3.is_rational_value(difference):
        return difference.numerator_as_long() == 0
    if mentions_conditionals(difference, _ITE_MEMO):  # m * If(c, a, b) against If(c, m*a, m*b)
        merged = merge_conditionals(difference)
        if z3.is_rational_value(merged) and merged.numerator_as_long() == 0:
            return True
    if mentions_quotients(difference, _QUOTIENT_MEMO) and quotients_combine(difference):  # a/d + b/d = (a+b)/d
        return True
    if mentions_exp(difference, _EXP_MEMO):  # online-softmax rescaling: exp(a) exp(b) = exp(a + b)
        difference = exp_normal_form(difference)
        if quotients_cancel(difference):
            return True
        if not z3.is_rational_value(difference) and mentions_log(difference):  # log-sum-exp by any shift
            factored = exp_normal_form(factor_logarithms(difference))
            if z3.is_rational_value(factored) and factored.numerator_as_long() == 0:
                return True
    return z3.is_rational_value(difference) and difference.numerator_as_long() == 0


def _obligations(program: TracedProgram, runs: _Runs, deadline: float) -> dict[int, list] | None:
    """Per comparison, the element disequalities normal forms could not close (None: out of time)."""
    out: dict[int, list] = {}
    for position, comparison in enumerate(program.comparisons):
        whole = runs.reference[comparison.reference]
        pending = []
        for rank, (name, region) in enumerate(zip(comparison.per_rank, comparison.regions)):
            if name is None:
                continue
            expected = np.asarray(_region(np.asarray(whole, dtype=object), region), dtype=object)
            got = np.asarray(runs.ranks[rank][name], dtype=object)
            if expected.shape != got.shape:
                pending.append(z3.BoolVal(True))  # a shape difference: any model is a witness
                continue
            for x, y in zip(got.reshape(-1), expected.reshape(-1)):
                if clock() > deadline:
                    return None
                if not _provably_equal(x, y):
                    pending.append(as_term(x) != as_term(y))
        out[position] = pending
    return out


def _model_value(model: z3.ModelRef, var: z3.ExprRef) -> Any:
    value = model.eval(var, model_completion=True)
    if z3.is_true(value) or z3.is_false(value):
        return z3.is_true(value)
    if z3.is_int_value(value):
        return value.as_long()
    if z3.is_rational_value(value):
        return float(Fraction(value.numerator_as_long(), value.denominator_as_long()))
    if z3.is_algebraic_value(value):
        return float(value.approx(20).as_fraction())
    return 0.0


def _model_leaves(inputs: tuple[TensorSpec, ...], values: dict[str, Any]) -> dict[str, np.ndarray]:
    out = {}
    for spec in inputs:
        shape = tuple(int(d) for d in spec.shape)
        kind = _kind(spec)
        array = np.zeros(shape, dtype=np.int64 if kind == "int" else bool if kind == "bool" else float)
        for index in np.ndindex(*shape):
            array[index] = values.get(f"{spec.name}[{','.join(map(str, index))}]" if shape else spec.name, 0)
        out[spec.name] = array
    return out


def _confirm(program: TracedProgram, candidates: list[dict[str, np.ndarray]]):
    """((mismatch, runs), leaves) for the first candidate on which a rank differs in real
    arithmetic (both values finite), else (None, overflow): a solver model can pick values so
    large that a rank's ``exp`` overflows where the single device's does not; the proof is about
    real numbers, so that is a note on float range, not a violation."""
    overflow = None
    for leaves in candidates:
        leaves = {**leaves, **program.pinned}
        try:
            runs = _run_all(program, leaves, NumpyBackend())
        except RunError:
            continue
        mismatch = _first_mismatch(program, runs, finite=True)
        if mismatch is not None:
            return (mismatch, runs), leaves
        if overflow is None:
            overflow = _first_mismatch(program, runs)
    return None, overflow


def _prove(program: TracedProgram, report: Report, deadline: float, progress, sample: _Runs | None = None,
           confirm: Confirm | None = None) -> None:
    """Prove every comparison with cuts; retry what stayed open on an unconfirmed model without them."""
    report.extra["solver"] = {"obligations": 0, "solver_calls": 0, "steps": 0, "renamings_skipped": 0}
    pending = list(range(len(program.comparisons)))
    proven: list[int] = []
    reasons: dict[int, str] = {}
    for cuts in (True, False):
        if not pending or (not cuts and (clock() >= deadline
                                         or not any("did not reproduce" in reasons[i] for i in pending))):
            break
        if progress is not None:
            progress(f"traced: encoding {report.ops} recorded ops in Z3" + ("" if cuts else " again, without cuts"))
        done, reasons_now = _attempt(program, report, deadline, progress, pending, cuts, sample, confirm)
        if done is None:
            return  # a confirmed violation was reported
        proven += done
        reasons.update(reasons_now)
        pending = [i for i in pending if i not in done]
    _claim(program, report, [program.comparisons[i] for i in sorted(proven)])
    if pending:
        report.add(Diagnostic("unsupported", ERROR, f"equivalence inconclusive: {reasons[pending[0]]}"
                              + (f" (and {len(pending) - 1} more comparison(s) open)" if len(pending) > 1 else "")))


def _attempt(program: TracedProgram, report: Report, deadline: float, progress, which: list[int], cuts: bool,
             sample: _Runs | None = None, confirm: Confirm | None = None):
    """(proven comparison indices, reason per open one); (None, {}) after reporting a violation."""
    xp = Z3Backend()
    _EXP_MEMO.clear()
    _ITE_MEMO.clear()
    _QUOTIENT_MEMO.clear()
    _SELECTS_MEMO.clear()
    leaves, domain, variables = _symbolic_leaves(program.inputs)
    leaves.update((name, program.pinned[name]) for name in program.fixed)
    memo = ProofMemo(domain, report.extra["solver"])
    try:
        runs = _run_symbolic(program, leaves, xp, report, cuts=cuts, memo=memo, domain=domain, deadline=deadline,
                             sample=sample)
    except RunError as error:
        _engine_error(report, error)
    obligations = _obligations(program, runs, deadline)
    if obligations is None:
        return [], {i: f"{program.comparisons[i].label}: the time budget ran out while normalising terms (timeout)"
                    for i in which}
    total = sum(len(obligations[i]) for i in which)
    report.extra["solver"]["obligations"] += total
    if progress is not None and total:
        progress(f"traced: {total} element(s) left for the solver after normal forms")
    proven, reasons = [], {}
    for position in which:
        comparison = program.comparisons[position]
        status, model = _solve(obligations[position], domain, deadline, report, memo)
        if status == "proven":
            proven.append(position)
        elif status == "sat":
            candidates = [_model_leaves(program.inputs, {k: _model_value(model, v) for k, v in variables.items()})]
            candidates += [{k: np.round(v) if v.dtype.kind == "f" else v
                            for k, v in random_values(program.inputs, seed, _kind).items()}
                           for seed in range(100, 100 + CONFIRMATION_SEEDS)]
            found, inputs = _confirm(program, candidates)
            if found is not None:
                _report_violation(program, report, found, inputs, "found by Z3 and confirmed by concrete evaluation",
                                  confirm)
                return None, {}
            if inputs is not None:
                _note_overflow(report, inputs)
            reasons[position] = (f"{comparison.label}: the solver's counterexample relies on the uninterpreted-"
                                 f"function model of non-linear ops and did not reproduce with real numbers")
        else:
            reasons[position] = f"{comparison.label}: the solver gave up within the time budget (timeout)"
    return proven, reasons


def _note_overflow(report: Report, mismatch: _Mismatch) -> None:
    where = f"{mismatch.comparison.label}" + (f"[{','.join(map(str, mismatch.index))}]" if mismatch.index else "")
    expected, got = _pick(mismatch.expected, mismatch.index), _pick(mismatch.got, mismatch.index)
    note = (f"{where}: on inputs the solver chose, rank {mismatch.rank} computes {got} where the single device "
            f"computes {expected}: a float overflow (or 0 * inf), not a difference in real arithmetic, so not a "
            f"violation; the program may be less stable in floating point than its single-device form")
    if not any(d.check == "numerics" for d in report.diagnostics):
        report.add(Diagnostic("numerics", NOTE, note))


def _cuttable(array: np.ndarray) -> bool:
    """Real, non-constant terms, all distinct, not all variables already: a value whose entries
    repeat (a filled constant) would match several blocks, and a cut could then give a rank the
    wrong one; a value of variables (a leaf, a view of a cut) gains nothing from a cut."""
    flat = array.reshape(-1)
    if not flat.size or not all(isinstance(t, z3.ArithRef) and t.is_real() and not z3.is_rational_value(t)
                                for t in (flat[0], flat[-1])):
        return False
    if all_constants(flat):
        return False
    return len({t.get_id() for t in flat if isinstance(t, z3.ExprRef)}) == flat.size


# ops whose results are non-linear terms: identical on both sides, they are still cut, so what
# later differs (a mask, a sum over ranks) is compared over plain variables the solver handles
NON_LINEAR_KINDS = frozenset({
    "aten.native_layer_norm.default", "aten.native_layer_norm_backward.default", "aten._softmax.default",
    "aten._softmax_backward_data.default", "aten._log_softmax.default", "aten._log_softmax_backward_data.default",
    "aten.rsqrt.default", "aten.exp.default", "aten.log.default", "aten.gelu.default", "aten.gelu_backward.default",
    "aten.silu.default", "aten.silu_backward.default", "aten.tanh.default", "aten.sigmoid.default",
})


class _Cuts:
    """Cut points of the symbolic runs.

    When a rank's value equals its single-device counterpart (paired op: same line, kind and
    occurrence), or one block of it (a shard), both continue from the same fresh variables:
    the reference takes a fresh array ``X`` and the rank its block of ``X``.  Sound for proving
    (``X`` ranges over every value, the real one included); it keeps every term one layer deep,
    so normal forms stay cheap.  A difference found after a cut is re-checked with NumPy, and
    an unconfirmed one is retried without cuts."""

    def __init__(self, program: TracedProgram, reference, ranks, equal: "_EqualUnder", sample: _Runs | None) -> None:
        self.program, self.reference, self.ranks, self.equal = program, reference, ranks, equal
        self.sample = sample  # concrete values of a screening run: a block they refute is not given to the solver
        self.pairs = [paired_positions(program.reference, ops,
                                       _SampleAgreement(program, sample, rank) if sample is not None else None)
                      for rank, ops in enumerate(program.ranks)]
        self.original: dict[str, np.ndarray] = {}
        self.fresh: dict[str, np.ndarray] = {}
        self.where: dict[int, tuple[str, tuple[int, ...]]] = {}  # term id -> (cut value, index) in originals
        self.rank_only: list[set[str]] = [set() for _ in program.ranks]  # values made after a rank-only collective
        self.count = 0

    def __call__(self, rank: int, position: int, collective: bool) -> None:
        partner = self.pairs[rank].get(position)
        if partner is None and self._rank_only(rank, position, collective) and self._cut_by_consumer(rank, position):
            return
        if partner is None or not self.reference.advance_to(partner):
            self._by_terms(rank, position)
            return
        reference_op = self.program.reference[partner]
        reference_env = self.reference.ranks[0].env
        env = self.ranks.ranks[rank].env
        untouched = self.reference.ranks[0].pc == partner + 1  # nothing read the reference value yet
        for name, reference_name in zip(self.program.ranks[rank][position].results, reference_op.results):
            want = self.original.get(reference_name)
            if want is None:
                want = np.asarray(reference_env[reference_name], dtype=object)
            got = np.asarray(env[name], dtype=object)
            selects = not collective and (untouched or reference_name in self.fresh) and _selects_on_integers(got)
            block = _block_of(got, want, collective or selects, self.equal, by_solver=selects,
                              plausible=self._plausible(rank, name, reference_name))
            scale = None
            if block is None:
                block, scale = self._scaled(rank, name, reference_name, got, want)
            if block is None:
                self._by_terms(rank, position)
                if any(arg in self.rank_only[rank] for arg in self.program.ranks[rank][position].args):
                    # a paired op reading a rank-only collective's result that is not yet the single
                    # device's value (a row-parallel output before the bias its hook adds after the
                    # all-reduce, where one device adds it in addmm): the rank's own op that completes
                    # it is cut at its paired reader
                    self.rank_only[rank].add(name)
                continue
            cut = self.fresh.get(reference_name)
            if cut is None:
                heavy = reference_op.kind in NON_LINEAR_KINDS or selects
                if not untouched or not _cuttable(want) or (got.shape == want.shape and not collective
                                                             and not heavy and scale is None):
                    env[name] = _times(want[block], scale)  # equal (identical or proven): the same terms
                    continue  # identical linear work on both sides needs no cut
                cut = self._fresh(reference_name, want.shape)
                self.original[reference_name] = want
                reference_env[reference_name] = cut
                for index in np.ndindex(*want.shape):
                    term = want[index]
                    if isinstance(term, z3.ExprRef):
                        self.where.setdefault(term.get_id(), (reference_name, index))
            env[name] = _times(cut[block], scale)

    def _scaled(self, rank: int, name: str, reference_name: str, got: np.ndarray, want: np.ndarray
                ) -> tuple[tuple | None, Fraction | None]:
        """(the whole value's index, c) when the rank's value is ``c`` times the single device's, for one
        constant ``c`` the sample gives and the solver proves (a data-parallel rank's gradients of its
        loss over its 2 micro-batches are twice one device's over 4): the rank goes on with ``c`` times
        the cut, so its terms stay one layer deep until the reduction that takes ``c`` out.  Real
        values only (an integer value is not a constant times another)."""
        if self.sample is None or got.shape != want.shape or not got.size:
            return None, None
        sampled = _numeric(self.sample.ranks[rank].get(name))
        if sampled is None or sampled.dtype.kind != "f":
            return None, None
        scale = _scale(sampled, self.sample.reference.get(reference_name))
        if scale is None or scale == 1:
            return None, None
        whole = tuple(slice(None) for _ in got.shape)
        # normal forms do not expand products of long sums (a LayerNorm backward's), the solver proves
        # these identities in milliseconds
        pairs = [(x, y) for x, y in zip(got.reshape(-1), _times(want, scale).reshape(-1)) if not _identical(x, y)]
        return (whole, scale) if not pairs or self.equal(pairs) else (None, None)

    def _rank_only(self, rank: int, position: int, collective: bool) -> bool:
        """A collective with no single-device counterpart, or an op of the rank's own reading what one
        made (two backward all-reduces of the input gradients of column-parallel layers, then the
        rank's sum of them, where one device sums the unreduced gradients at another line)."""
        op = self.program.ranks[rank][position]
        made = self.rank_only[rank]
        if collective or any(arg in made for arg in op.args):
            made.update(op.results)
            # a view of the result was read through when the collective itself was cut
            return collective or not (len(op.args) == 1 and op.kind.startswith(_VIEW_KINDS))
        return False

    def _cut_by_consumer(self, rank: int, position: int) -> bool:
        """A collective with no single-device counterpart (the reference skips it: ``if world == 1``)
        whose result the rank's first paired reader reads: its counterpart is the value the reference's
        paired op reads at the same place; cut there, before the reference reads it."""
        ops = self.program.ranks[rank]
        # the result, and views of it the rank takes on its own (an autograd Function's output is a
        # view of what it returns: transformers' all_reduce_forward): a paired reader of one reads it
        viewed = {name: name for name in ops[position].results}
        for later in range(position + 1, len(ops)):
            places = [i for i, arg in enumerate(ops[later].args) if arg in viewed]
            if not places:
                continue
            consumer = self.pairs[rank].get(later)
            if consumer is None:
                if len(ops[later].args) == 1 and ops[later].kind.startswith(_VIEW_KINDS):
                    viewed.update((name, viewed[ops[later].args[0]]) for name in ops[later].results)
                continue  # an op of the rank's own (no counterpart): the next reader may have one
            reference_args = self.program.reference[consumer].args
            if places[0] >= len(reference_args):
                return False
            name, reference_name = viewed[ops[later].args[places[0]]], reference_args[places[0]]
            # a value another rank cut already is compared with its original wherever the reference is
            if reference_name not in self.fresh and (self.reference.ranks[0].pc > consumer or (
                    consumer > 0 and not self.reference.advance_to(consumer - 1))):
                return False
            env, reference_env = self.ranks.ranks[rank].env, self.reference.ranks[0].env
            want = self.original.get(reference_name)
            if want is None:
                want = np.asarray(reference_env[reference_name], dtype=object)
            got = np.asarray(env[name], dtype=object)
            shape = got.shape
            if name != ops[later].args[places[0]]:  # read through a view: the whole value, row-major
                if got.size != want.size:
                    return False
                got = got.reshape(want.shape)
            block = _block_of(got, want, True, self.equal, by_solver=_selects_on_integers(got),
                              plausible=self._plausible(rank, name, reference_name, got.shape))
            cut = self.fresh.get(reference_name)
            if block is None or (cut is None and not _cuttable(want)):
                return False
            if cut is None:
                cut = self._fresh(reference_name, want.shape)
                self.original[reference_name] = want
                reference_env[reference_name] = cut
            env[name] = np.asarray(cut[block], dtype=object).reshape(shape)
            return True
        return False

    def _plausible(self, rank: int, name: str, reference_name: str, shape: tuple[int, ...] | None = None
                   ) -> Callable[[tuple], bool] | None:
        """Whether the sample's value of ``name`` on ``rank`` (taken in ``shape``) equals that block of
        the reference's."""
        if self.sample is None or name not in self.sample.ranks[rank] or reference_name not in self.sample.reference:
            return None
        got, want = np.asarray(self.sample.ranks[rank][name]), np.asarray(self.sample.reference[reference_name])
        if shape is not None and got.size == int(np.prod(shape)):
            got = got.reshape(shape)

        def plausible(index: tuple) -> bool:
            try:
                return _close(got, want[index])
            except (TypeError, ValueError, IndexError):
                return True
        return plausible

    def _by_terms(self, rank: int, position: int) -> None:
        """A value with no counterpart op (a block received from a neighbour, the second pass of
        a ring loop) that holds exactly the terms of one block of a cut value takes that block."""
        env = self.ranks.ranks[rank].env
        for name in self.program.ranks[rank][position].results:
            got = np.asarray(env.get(name), dtype=object)
            if not got.size or not isinstance(got.reshape(-1)[0], z3.ExprRef):
                continue
            found = self.where.get(got.reshape(-1)[0].get_id())
            if found is None:
                continue
            reference_name, start = found
            want = self.original[reference_name]
            if got.ndim != want.ndim or any(a + g > w for a, g, w in zip(start, got.shape, want.shape)):
                continue
            block = tuple(slice(a, a + g) for a, g in zip(start, got.shape))
            if all(_identical(x, y) for x, y in zip(got.reshape(-1), want[block].reshape(-1))):
                env[name] = self.fresh[reference_name][block]

    def _fresh(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        self.count += 1
        self.fresh[name] = fresh_array(f"cut{self.count}:{name}", shape, z3.RealSort())
        return self.fresh[name]


def _block_of(got: np.ndarray, want: np.ndarray, prove: bool, equal: "_EqualUnder | None" = None,
              by_solver: bool = False, plausible: Callable[[tuple], bool] | None = None) -> tuple | None:
    """The index of the block of ``want`` that ``got`` equals: by identical terms, or (``prove``)
    by normal form, else by the solver; ``by_solver``: what is not identical goes straight to
    the solver (values selected by integer data, which normal forms do not split); a block
    ``plausible`` refutes (a concrete run where it differs) is not tried."""
    if got.ndim != want.ndim or not got.size:
        return None
    if got.shape == want.shape:
        blocks = [tuple(slice(None) for _ in got.shape)]
    elif any(g > w or w % g for g, w in zip(got.shape, want.shape)):
        return None
    else:
        counts = [w // g for g, w in zip(got.shape, want.shape)]
        blocks = [tuple(slice(b * g, (b + 1) * g) for b, g in zip(position, got.shape))
                  for position in np.ndindex(*counts)]
    flat = got.reshape(-1)
    for index in blocks:
        if all(_identical(x, y) for x, y in zip(flat, _flat(want, index))):
            return index
    if plausible is not None:
        blocks = [index for index in blocks if plausible(index)]
    if not blocks or not prove or len(blocks) > MAX_PROVEN_BLOCKS or (equal is None and len(blocks) > 1):
        return None
    equal_terms = _identical if by_solver else _provably_equal
    if len(blocks) > 1:  # the block whose first element closes by normal form is the likely one: first
        blocks.sort(key=lambda index: not equal_terms(flat[0], _flat(want, index)[0]))
    for index in blocks:
        open_pairs = [(x, y) for x, y in zip(flat, _flat(want, index)) if not equal_terms(x, y)]
        if by_solver and open_pairs and _provably_equal(*open_pairs[0]):
            # selections that merge by condition (experts' index_add_ of partial sums, all-reduced)
            open_pairs = [(x, y) for x, y in open_pairs[1:] if not _provably_equal(x, y)]
        if not open_pairs or (equal is not None and equal(open_pairs)):
            return index
    return None


def _times(value: np.ndarray, scale: Fraction | None) -> np.ndarray:
    """``value`` (terms) times an exact constant; itself when there is none."""
    if scale is None:
        return value
    factor = z3.RealVal(f"{scale.numerator}/{scale.denominator}")
    return objectwise(lambda term: factor * term, np.asarray(value, dtype=object))


def _flat(array: np.ndarray, index: tuple) -> np.ndarray:
    return np.asarray(array[index], dtype=object).reshape(-1)


def _identical(a: Any, b: Any) -> bool:
    return isinstance(a, z3.ExprRef) and isinstance(b, z3.ExprRef) and same_term(a, b)


def _selects_on_integers(array: np.ndarray) -> bool:
    """Whether the value's first element picks between terms by a condition on integer data
    (a lookup or a mask by token id): equal values that normal forms cannot show equal, since
    that takes a case split over the ids, which the solver does.  Each subterm is judged once per
    proof attempt (``_SELECTS_MEMO``): a model's later values are built on its earlier ones, and
    walking each value's whole term again cost a 1-layer Llama 137 of its 141 s."""
    flat = array.reshape(-1)
    if not flat.size or not isinstance(flat[0], z3.ExprRef):
        return False
    return _selects_term(flat[0])


def _selects_term(term: z3.ExprRef) -> bool:
    """The walk on Z3's own handles (no Python wrapper per subterm: a 1-layer Llama's values share
    some 400,000 subterms).  Subterms stay alive while ``term`` does; it is kept in the memo."""
    memo, ctx = _SELECTS_MEMO, term.ctx.ref()
    top = term.get_id()
    if top in memo:
        return memo[top][1]
    stack = [(term.as_ast(), False)]
    while stack:
        ast, expanded = stack.pop()
        key = Z3core.Z3_get_ast_id(ctx, ast)
        if key in memo:
            continue
        if Z3core.Z3_get_ast_kind(ctx, ast) != z3.Z3_APP_AST:
            memo[key] = (None, False)
            continue
        count = Z3core.Z3_get_app_num_args(ctx, ast)
        children = [Z3core.Z3_get_app_arg(ctx, ast, i) for i in range(count)]
        if count == 3 and Z3core.Z3_get_decl_kind(ctx, Z3core.Z3_get_app_decl(ctx, ast)) == z3.Z3_OP_ITE \
                and _mentions_integer_ast(ctx, children[0]):
            memo[key] = (None, True)
            continue
        if expanded:
            memo[key] = (None, any(memo[Z3core.Z3_get_ast_id(ctx, child)][1] for child in children))
            continue
        stack.append((ast, True))
        stack.extend((child, False) for child in children)
    memo[top] = (term, memo[top][1])
    return memo[top][1]


def _mentions_integer_ast(ctx, condition) -> bool:
    stack = [condition]
    while stack:
        ast = stack.pop()
        kind = Z3core.Z3_get_sort_kind(ctx, Z3core.Z3_get_sort(ctx, ast))
        if kind == z3.Z3_INT_SORT:
            return True
        if kind == z3.Z3_BOOL_SORT and Z3core.Z3_get_ast_kind(ctx, ast) == z3.Z3_APP_AST:
            stack.extend(Z3core.Z3_get_app_arg(ctx, ast, i) for i in range(Z3core.Z3_get_app_num_args(ctx, ast)))
    return False


class _EqualUnder:
    """Element-wise equality of a collective's result with its single-device counterpart, proven by
    the solver under the inputs' domain (a masked vocabulary lookup summed over ranks equals the
    plain lookup only case by case over the token ids, which normal forms do not split).  Each
    value gets a share of the budget; a value it cannot prove is simply not cut.  The shares are
    solver steps, not CPU seconds: which values are cut, and so the proof's path, must not depend on
    how fast the work around the solver runs (a megatron-core training step that verifies in 40 CPU s
    ran past a 900 s --timeout in a test run when its cut probes were timed by the CPU clock)."""

    def __init__(self, memo: ProofMemo, domain: list, deadline: float) -> None:
        self.memo, self.domain, self.deadline = memo, domain, deadline
        self.usage = {"solver_calls": 0, "steps": 0}

    @property
    def spent(self) -> float:
        """Budget seconds the cut proofs' solver steps are worth."""
        return self.usage["steps"] / RLIMIT_PER_SECOND

    def __call__(self, pairs: list) -> bool:
        """A small first batch on a short budget (a collective whose result differs, or is too hard,
        costs little), then the rest."""
        budget = min(CUT_PROOF_CAP_S, CUT_PROOFS_CAP_S - self.spent, (self.deadline - clock()) / 4)
        if budget <= 0.05 or any(z3.is_bool(as_term(x)) != z3.is_bool(as_term(y)) for x, y in pairs):
            return False
        before = self.spent
        grouping = {"on": True}
        first = min(len(pairs), CUT_PROBE_PAIRS)
        batches = [(0, first, min(budget, CUT_PROBE_S))] + \
            [(i, min(i + SOLVER_BATCH, len(pairs)), None) for i in range(first, len(pairs), SOLVER_BATCH)]
        for start, end, cap in batches:
            remaining = budget - (self.spent - before) if cap is None else cap
            if remaining <= 0:
                return False
            disequalities = [as_term(x) != as_term(y) for x, y in pairs[start:end]]
            if _decide(disequalities, self.domain, remaining, self.usage, grouping, self.memo)[0] != "proven":
                return False
        return True


def _decide(disequalities: list, domain: list, seconds: float, counter: dict | None = None,
            grouping: dict | None = None, memo: ProofMemo | None = None):
    """("proven", None) when no disequality can hold under ``domain``, ("sat", model) for a
    model of one, else ("unknown", None), within ``seconds``.  One call for all first (cheap
    when they are linear), then one call per disequality: the disjunction of many conditional
    non-linear ones can take the solver ten times longer than each one alone (a few go one by
    one straight away).  ``grouping`` (shared by the batches of one proof) turns the first call
    off once it has failed; ``memo`` (built on the same ``domain``) skips a disequality that
    renames one already refuted.  ``seconds`` are counted in solver steps (``budget.rlimit``): the
    work around the solver (the renaming keys) does not eat into them, and a busy machine gets the
    same answer."""
    claims = _unrefuted(disequalities, memo)
    solver = z3.Solver()
    solver.add(*domain)
    start = steps_used(solver)

    def left() -> float:
        return seconds - (steps_used(solver) - start) / RLIMIT_PER_SECOND

    grouping = {"on": True} if grouping is None else grouping
    if len(claims) > GROUP_MIN_CLAIMS and grouping["on"]:
        whole = min(left() / 3, GROUP_CALL_CAP_S)
        answer = _ask(solver, z3.Or(*[claim for claim, _ in claims]), whole, counter)
        if answer == z3.unsat:
            _refuted(memo, claims)
            return "proven", None
        if answer == z3.sat:
            return "sat", solver.model()
        grouping["on"] = False
    for claim, key in claims:
        answer = _ask(solver, claim, left(), counter)
        if answer == z3.sat:
            return "sat", solver.model()
        if answer != z3.unsat:
            return "unknown", None
        _refuted(memo, [(claim, key)])
    return "proven", None


def _unrefuted(disequalities: list, memo: ProofMemo | None) -> list:
    """(claim, key) for one disequality of each renaming class not refuted yet."""
    if memo is None:
        return [(claim, None) for claim in disequalities]
    claims, seen = [], set()
    for claim in disequalities:
        key = memo.key(claim)
        if key is not None and (key in memo.refuted or key in seen):
            memo.tally["renamings_skipped"] += 1
            continue
        if key is not None:
            seen.add(key)
        claims.append((claim, key))
    return claims


def _refuted(memo: ProofMemo | None, claims: list) -> None:
    if memo is not None:
        memo.refuted.update(key for _, key in claims if key is not None)


def _ask(solver: z3.Solver, claim, seconds: float, counter: dict | None):
    """The solver's answer on ``domain & claim`` within ``seconds`` (unknown when none are left);
    ``counter`` tallies the calls and the steps they took."""
    if seconds <= 0:
        return z3.unknown
    bound(solver, rlimit(seconds))  # a step count: the same answer on a busy machine (budget.bound)
    before = steps_used(solver)
    solver.push()
    solver.add(claim)
    answer = solver.check()
    if counter is not None:
        counter["solver_calls"] += 1
        counter["steps"] += steps_used(solver) - before
    if answer != z3.sat:
        solver.pop()  # a model is read by the caller with the claim still asserted
    return answer


def _run_symbolic(program: TracedProgram, leaves: dict[str, Any], xp, report: Report, cuts: bool,
                  memo: ProofMemo, domain: list = (), deadline: float = float("inf"),
                  sample: _Runs | None = None) -> _Runs:
    cache = new_cache()
    reference = runner((program.reference,), leaves, xp, cache)
    ranks = runner(program.ranks, leaves, xp, cache)
    cutter = _Cuts(program, reference, ranks, _EqualUnder(memo, list(domain), deadline), sample) if cuts else None
    if cutter is not None:
        ranks.on_result = cutter
    rank_envs = ranks.run()
    (reference_env,) = reference.run()
    report.extra["cuts"] = cutter.count if cutter is not None else 0
    return _Runs(reference_env, rank_envs)


def _solve(pending: list, domain: list, deadline: float, report: Report, memo: ProofMemo | None = None):
    grouping = {"on": True}
    for start in range(0, len(pending), SOLVER_BATCH):
        remaining = deadline - clock()
        if remaining <= 0:
            return "unknown", None
        status, model = _decide(pending[start:start + SOLVER_BATCH], domain, min(remaining, SOLVER_CALL_CAP_S),
                                report.extra["solver"], grouping, memo)
        if status != "proven":
            return status, model
    return "proven", None


def _claim(program: TracedProgram, report: Report, proven: list[Comparison]) -> None:
    """What was proven, in the report's own words (only what the solver established)."""
    ranks = sorted({r for c in proven for r, n in enumerate(c.per_rank) if n is not None})
    where = f"ranks {rank_ranges(ranks)}" if len(ranks) > 1 else f"rank {ranks[0]}" if ranks else "no rank"
    outputs = [c.label for c in proven if c.kind != "gradient"]
    gradients = list(dict.fromkeys(c.label.split("gradient of ", 1)[-1] for c in proven if c.kind == "gradient"))
    if outputs:
        report.proven.append(f"forward: {len(outputs)} output(s) equal to the single-device run on {where} "
                             f"({', '.join(outputs)})")
    if gradients:
        report.proven.append(f"backward: gradients of {len(gradients)} leaf/leaves equal to the single-device run "
                             f"on {where} ({', '.join(gradients)})")
    if proven:
        sizes = ", ".join(f"{s.name}{list(int(d) for d in s.shape)}" for s in program.inputs)
        report.proven.append(f"sizes: as recorded on mesh {dict(program.mesh)} (world {program.world}): {sizes}")
