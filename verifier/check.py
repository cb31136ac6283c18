"""Run the checks in order and decide the verdict.

Order: well-formed -> placements -> temporal -> equivalence.  Placement diagnostics are
*explanations*: they become violations only when the equivalence check confirms, by concrete
evaluation, that the program computes something else than its single-device version, and only
for ops upstream of where the values first diverge.  When the program is proven equivalent
they are kept as notes (a rule that was stricter than needed), never as a verdict.
"""
from __future__ import annotations

import time
from dataclasses import replace
from typing import Callable, Sequence

import numpy as np

from . import counterexample
from .backward import BackwardUnsupported, gradient_program
from .calls import CallError, expand_calls
from .engine import EngineError, rank_env
from .budget import Budget
from .equivalence import (MAX_SYMBOLIC_ELEMENTS, SOLVER_TIMEOUT_MS, model_to_inputs, prove, random_inputs,
                          run_concrete)
from .ir import Program, eval_dim
from .placement_check import PlacementResult, propagate
from .placements import Partial, Replicate, Shard
from .report import ERROR, NOTE, WARNING, Diagnostic, Report
from .shapes import ShapeProblem, bound_env, instantiate, prove_divisibility, reduced_env
from .temporal import check_temporal
from .wellformed import check_structure, infer_shapes

DEFAULT_BUDGET_S = 300.0  # one deadline for the whole check, shared by all solver obligations
SCREENING_SEEDS = 3
CONFIRMATION_SEEDS = 8


def check_program(program: Program, file: str | None = None, *, timeout_ms: int = SOLVER_TIMEOUT_MS,
                  temporal: bool = True, progress: Callable[[str], None] | None = None,
                  budget_s: float | None = DEFAULT_BUDGET_S,
                  reference_caveats: Sequence[tuple[int | None, str]] = ()) -> Report:
    """Check ``program``; the whole check spends at most ``budget_s`` seconds' worth of solver
    steps and CPU time (``verifier.budget``: the same on a busy machine; shared by every solver
    obligation; ``None``: no overall limit), with ``unsupported (timeout)`` if it must.

    ``reference_caveats`` are (line, reason) pairs from a frontend whose single-device
    reference is not what the source does at world size 1: equivalence is then not checked
    (a verdict against that reference could be wrong either way) and the verdict is not
    ``verified``."""
    started = time.perf_counter()
    report = Report(file or program.source, {name: size for name, size in program.mesh.dims}, ops=len(program.ops))
    budget = Budget(budget_s)
    passes = {"forward": "not checked", "backward": "not checked" if program.gradients else "no gradients declared",
              "temporal": "not checked"}
    report.extra["passes"] = passes
    report.extra["assumed"] = _assumptions(program)
    try:
        _run(program, report, timeout_ms, temporal, progress, budget, tuple(reference_caveats))
    finally:
        report.seconds = time.perf_counter() - started
    return report


def _assumptions(program: Program) -> list[str]:
    """What a verdict takes for granted, in the user's terms."""
    assumed = ["inputs: global tensors laid out on the mesh as declared ("
               + ", ".join(f"{spec.name} {_layout(spec.placements, program)}" for spec in program.inputs) + ")"]
    if any(op.attr("when") is not None for op in program.ops):
        assumed.append("rank branches: ops guarded by a rank condition run exactly on the ranks it selects")
    if program.requires:
        assumed.append("sizes satisfy: " + "; ".join(program.requires))
    assumed.append("non-linear ops (exp, softmax, norms, ...) are modelled as functions of exactly the values they "
                   "read; linear algebra is exact over the reals")
    return assumed


def _layout(placements, program: Program) -> str:
    return "{" + ", ".join(f"{name}: {placement}" for name, placement in zip(program.mesh.names, placements)) + "}"


def _run(program: Program, report: Report, timeout_ms: int, temporal: bool,
         progress: Callable[[str], None] | None, budget: Budget,
         caveats: tuple[tuple[int | None, str], ...]) -> None:
    structure = check_structure(program)
    if structure:
        report.diagnostics.extend(structure)
        return
    if not program.outputs and not program.gradients:
        report.add(Diagnostic("unsupported", ERROR, "nothing to compare: the program has no outputs or gradients, "
                                                    "so equivalence would hold vacuously"))
        return
    try:
        problems = prove_divisibility(program)
        env = reduced_env(program)
    except ShapeProblem as problem:
        report.add(Diagnostic("well-formed", ERROR, str(problem), problem.line))
        return
    for problem in problems:
        report.add(Diagnostic("well-formed", ERROR, str(problem), problem.line))
    if problems:
        return
    sized = _sized(program, env, report)
    if sized is None:
        return
    env, checked, shapes = sized
    if checked.gradients:
        try:
            checked = gradient_program(checked, shapes.shapes)
        except BackwardUnsupported as problem:
            report.add(Diagnostic("unsupported", ERROR, str(problem), problem.line))
            return
        shapes = infer_shapes(checked)
        if shapes.diagnostics:
            report.diagnostics.extend(shapes.diagnostics)
            return
        report.extra["backward_ops"] = len(checked.ops) - len(program.ops)
    report.proven.append("well-formed: SSA, shapes" + (", shard divisibility for all allowed dim values"
                                                        if program.dims else ""))
    placement = propagate(checked, shapes.shapes)
    if temporal:
        findings = check_temporal(program, report.proven)
        report.diagnostics.extend(findings)
        report.extra["passes"]["temporal"] = "violated" if any(d.severity == ERROR and d.check != "unsupported"
                                                               for d in findings) else \
            "unsupported" if findings and any(d.check == "unsupported" for d in findings) else "proven"
    report.extra["reduced_dims"] = dict(env)
    report.extra["sizes"] = _sizes_statement(program, env)
    if caveats:
        _attach_placement(checked, placement, report, "unknown")
        for line, reason in caveats:
            report.add(Diagnostic("unsupported", ERROR, f"equivalence not checked: {reason}", line))
        return
    _equivalence(checked, placement, report, timeout_ms, progress, budget,
                 gradient_outputs=frozenset(g.value for g in program.gradients))


def _sizes_statement(program: Program, env: dict[str, int]) -> str:
    """The sizes a proof holds for, said in every verdict (reduced sizes are a choice of ours)."""
    mesh = ", ".join(f"{name}={size}" for name, size in program.mesh.dims)
    if not env:
        return f"input shapes as declared; mesh {mesh}"
    declared = {name: value for name, value in program.dims.items() if value is not None}
    how = "as declared" if env == declared else "reduced: every size >= 2, distinct where the program allows"
    return f"dims {', '.join(f'{k}={v}' for k, v in env.items())} ({how}); mesh {mesh}"


def _sized(program: Program, env: dict[str, int], report: Report):
    """The program instantiated at reduced sizes, with its shapes; None after reporting.

    The sizes as declared are what the user runs, so their shape errors are reported as
    they are.  If only the reduced sizes fail (a reshape relying on a divisibility nobody
    stated), the declared sizes are checked instead."""
    declared = bound_env(program)
    candidates = [env] + ([declared] if declared is not None and declared != env else [])
    try:
        shaped = []
        for sizes in candidates:
            instance = expand_calls(instantiate(program, sizes))
            shaped.append((sizes, instance, infer_shapes(instance)))
    except CallError as problem:
        report.add(Diagnostic("well-formed", ERROR, str(problem), problem.line))
        return None
    if shaped[-1][2].diagnostics:
        report.diagnostics.extend(shaped[-1][2].diagnostics)
        return None
    return next(entry for entry in shaped if not entry[2].diagnostics)


def _ancestors(program: Program, placement: PlacementResult, op_index: int) -> set[int]:
    seen, stack = set(), [op_index]
    while stack:
        index = stack.pop()
        if index in seen:
            continue
        seen.add(index)
        stack.extend(placement.producers[a] for a in program.ops[index].args if a in placement.producers)
    return seen


def _attach_placement(program: Program, placement: PlacementResult, report: Report, verdict: str,
                      divergence: int | None = None, output: str | None = None) -> None:
    """Keep placement findings as errors only where a confirmed difference explains them."""
    relevant: set[int] = set()
    if verdict == "violation":
        for index in (divergence, placement.producers.get(output)):
            if index is not None:
                relevant |= _ancestors(program, placement, index)
    for problem in placement.problems:
        diagnostic = problem.diagnostic
        if verdict == "violation" and (problem.op_index in relevant or problem.output == output):
            report.add(diagnostic)
        elif verdict == "proven":
            report.add(replace(diagnostic, severity=NOTE,
                               message=diagnostic.message + " (flagged by the placement rules, but the program is "
                                                            "proven equivalent)"))
        else:
            report.add(replace(diagnostic, severity=WARNING))


def _size(program: Program) -> int:
    return sum(int(np.prod([int(d) for d in spec.shape])) for spec in program.inputs)


def _peer_missing_on_one_device(program: Program):
    """The first point-to-point op whose peer does not exist when every mesh dim has size 1.

    Such a program (``peer=1-tp``: a two-rank exchange) has no single-device counterpart,
    so equivalence is not defined for it; its temporal checks still run."""
    unit = program.mesh.unit()
    env = rank_env(unit, {name: 0 for name in unit.names})
    for op in program.ops:
        if op.kind in ("send", "recv", "isend", "irecv"):
            try:
                peer = int(eval_dim(str(op.attrs.get("peer")), env))
            except (KeyError, ValueError, ZeroDivisionError, SyntaxError):
                return op
            if peer != 0:
                return op
    return None


def _equivalence(program: Program, placement: PlacementResult, report: Report, timeout_ms: int,
                 progress: Callable[[str], None] | None = None, budget: Budget | None = None,
                 gradient_outputs: frozenset[str] = frozenset()) -> None:
    lonely = _peer_missing_on_one_device(program)
    if lonely is not None:
        _attach_placement(program, placement, report, "unknown")
        report.add(Diagnostic("unsupported", ERROR,
                              f"equivalence not checked: {lonely.kind} to peer {lonely.attrs.get('peer')} has no "
                              f"counterpart on a single device (write peers modulo the group size, e.g. "
                              f"(tp+1)%tp_size, to compare with one device)", lonely.span.line))
        return
    if _size(program) > MAX_SYMBOLIC_ELEMENTS:
        _attach_placement(program, placement, report, "unknown")
        report.add(Diagnostic("unsupported", ERROR,
                              f"inputs have {_size(program)} elements, too many to check element by element; "
                              f"declare the sizes as symbolic dims ('dim H=4096') so they can be reduced"))
        return
    try:
        # A few random runs find most bugs at once; big programs get one (the proof follows anyway).
        for seed in range(SCREENING_SEEDS if len(program.ops) < 200 else 1):
            inputs = random_inputs(program, seed)
            outcome = run_concrete(program, placement.placements, inputs, seed=seed)
            if outcome.mismatch:
                _report_violation(program, placement, report, inputs, outcome, "found by concrete evaluation",
                                  gradient_outputs)
                return
        status, values, stats = prove(program, placement.placements, timeout_ms, progress, budget=budget)
    except EngineError as problem:
        if problem.where == "parallel" and _modelled_inputs(problem.op, placement):
            # The single-device program ran; the mesh run fails at an op whose inputs all have
            # placements we model: the real N-rank run fails there too (ground truth counts it).
            _attach_placement(program, placement, report, "violation")
            report.add(Diagnostic("well-formed", ERROR, f"the program runs on one device but cannot run on the mesh "
                                                        f"{program.mesh}: {problem}", problem.line))
            return
        # Otherwise our engine could not run the reference, or failed on values we do not model
        # on every rank (a gather's list off the root): a gap of ours, never a violation.
        _attach_placement(program, placement, report, "unknown")
        which = ("the single-device reference (the program at world size 1)" if problem.where == "reference"
                 else f"the program on mesh {program.mesh}")
        report.add(Diagnostic("unsupported", ERROR, f"equivalence not checked: {which} cannot be run by the "
                                                    f"verifier: {problem}", problem.line))
        return
    report.extra["solver"] = stats
    sizes = report.extra.get("sizes", "")
    passes = report.extra["passes"]
    gradients = bool(gradient_outputs)
    if status == "proven":
        _attach_placement(program, placement, report, "proven")
        passes["forward"] = "proven"
        if gradients:
            passes["backward"] = "proven"
        report.proven.append(f"equivalent to the single-device program on mesh {program.mesh} "
                             f"({'outputs and gradients' if gradients else 'outputs'}; {stats['cuts']} cut points, "
                             f"{stats['obligations']} solver obligations; {sizes})")
        return
    if status == "sat":
        candidates = [(model_to_inputs(program, values), values)] if values else []
        candidates += [({k: np.round(v) if v.dtype.kind == "f" else v for k, v in random_inputs(program, s).items()},
                        None) for s in range(100, 100 + CONFIRMATION_SEEDS)]
        for inputs, extra in candidates:
            outcome = run_concrete(program, placement.placements, inputs,
                                   extra={k: v for k, v in (extra or {}).items() if isinstance(v, np.ndarray)})
            if outcome.mismatch:
                _report_violation(program, placement, report, inputs, outcome,
                                  "found by Z3 and confirmed by concrete evaluation", gradient_outputs)
                return
    _attach_placement(program, placement, report, "unknown")
    reason = (_out_of_time(stats) if status == "timeout" else
              "the solver gave up (timeout)" if status == "unknown" else
              "the solver's counterexample relies on the uninterpreted-function model of non-linear ops and did "
              "not reproduce with real numbers")
    report.add(Diagnostic("unsupported", ERROR, f"equivalence inconclusive: {reason}"))


def _modelled_inputs(op, placement: PlacementResult) -> bool:
    """Every input of ``op`` has a shard/replicate/partial placement on every mesh dim."""
    if op is None:
        return False
    for name in op.args:
        placements = placement.placements.get(name)
        if placements is None or not all(isinstance(p, (Shard, Replicate, Partial)) for p in placements):
            return False
    return True


def _out_of_time(stats: dict) -> str:
    where = (f"after {stats.get('solver_calls', 0)} of {stats['obligations']} solver obligations"
             if stats.get("obligations") else "while building the symbolic terms")
    return f"the check's time budget ran out {where} (timeout)"


def _report_violation(program: Program, placement: PlacementResult, report: Report, inputs, outcome, how: str,
                      gradient_outputs: frozenset[str] = frozenset()) -> None:
    """One diagnostic per bug: the placement explanation if there is one, with the counterexample."""
    name = outcome.mismatch[0]
    report.extra["passes"]["backward" if name in gradient_outputs else "forward"] = "violated"
    before = len(report.diagnostics)
    _attach_placement(program, placement, report, "violation", outcome.divergence_op, name)
    cex = counterexample.build(program, inputs, outcome)
    if program.dims:
        cex.note += " (sizes " + ", ".join(f"{k}={v}" for k, v in program.dims.items()) + ")"
    explained = [d for d in report.diagnostics[before:] if d.severity == ERROR]
    if explained:
        explained[0].counterexample = cex
        explained[0].message += f" (confirmed: output {name} differs from the single-device program, {how})"
        return
    index = outcome.divergence_op if outcome.divergence_op is not None else placement.producers.get(name)
    op = program.ops[index] if index is not None else None
    line = op.span.line if op is not None else next((o.span.line for o in program.outputs if o.name == name), None)
    where = (f"; values first diverge at {op.kind} -> {', '.join(op.results)}" + (f" (line {line})" if line else "")
             if outcome.divergence_op is not None else "")
    report.add(Diagnostic("equivalence", ERROR,
                          f"output {name} differs from the single-device program ({how}){where}", line, cex))
