"""Who is wrong, the source or the LLM's IR?  Decided by running the source (``execute.py``).

Three moments need it:

* the verifier found a counterexample on LLM-proposed IR: find inputs at the *source's*
  shapes on which the IR's parallel and single-device runs differ, run the source on them
  on 1 and N ranks.  Source differs too -> the bug is real (``CONFIRMED``); source agrees
  with itself -> the IR is unfaithful (``IR_WRONG``, with a problem to send back);
* the IR verified: one random input, same runs.  The source differing from itself means the
  IR hid a real bug (``CONFIRMED``); the IR differing from the source means it is unfaithful;
* the IR has shape errors the verifier cannot run past: does the source itself run?

Without torch, or when the harness cannot run the file, the answer is ``UNCONFIRMED`` and
the verification finding stands as reported — it is never sent back to the model.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from verifier.equivalence import random_inputs, run_concrete
from verifier.ir import Program
from verifier.placement_check import propagate
from verifier.shapes import ShapeProblem, instantiate, reduced_env
from verifier.wellformed import infer_shapes

from . import execute
from .problems import EXECUTION, SHAPE, Problem, describe_op
from .source_facts import SourceFacts

CONFIRMED, IR_WRONG, UNCONFIRMED, CONSISTENT = "confirmed", "ir-wrong", "unconfirmed", "consistent"
SEARCH_SEEDS = 6
IR_RTOL, IR_ATOL = 1e-5, 1e-6  # IR (NumPy) against torch: different kernels, same float64 math
MAX_LISTED = 6


@dataclass(frozen=True)
class Finding:
    status: str
    note: str  # one sentence for the user's report
    problem: Problem | None = None  # what to send back when the IR is wrong
    detail: str = ""  # for a feedback message when a confirmed bug was hidden by the IR


@dataclass(frozen=True)
class Runner:
    """How to run the source: everything ``execute.run_source`` needs besides the inputs."""

    source: str
    path: str
    entry: str | None
    timeout: float
    enabled: bool = True

    def unavailable(self) -> str | None:
        if not self.enabled:
            return "execution triage is disabled"
        if not execute.torch_available():
            return "torch is not installed, so the source could not be run to confirm it"
        return None


def at_source_shapes(program: Program, facts: SourceFacts, input_shapes: dict[str, list[int]] | None = None
                     ) -> Program | None:
    """The program with every dim fixed to the source's sizes (free dims: from the entry's
    example inputs, then the verifier's reduced values); None if shapes do not work out."""
    env: dict[str, int] = {k: v for k, v in program.dims.items() if v is not None}
    shapes = {e.param: list(e.shape) for e in facts.example_inputs if e.param and e.shape}
    shapes.update(input_shapes or {})
    for spec in program.inputs:
        for dim, size in zip(spec.shape, shapes.get(spec.name, [])):
            if isinstance(dim, str) and dim in program.dims and dim not in env:
                env[dim] = size
    try:
        if any(name not in env for name in program.dims):
            env = {**reduced_env(program), **env}
        fixed = instantiate(program, env)
    except (ShapeProblem, KeyError, ValueError, ZeroDivisionError):
        return None
    return fixed if not infer_shapes(fixed).diagnostics else None


def _concrete(program: Program, seed: int):
    shapes = infer_shapes(program)
    placement = propagate(program, shapes.shapes)
    inputs = random_inputs(program, seed)
    return inputs, run_concrete(program, placement.placements, inputs, seed=seed)


def _summary(value: Any) -> str:
    array = np.asarray(value)
    flat = [f"{float(v):.4g}" if array.dtype.kind == "f" else str(v) for v in array.reshape(-1)[:MAX_LISTED]]
    more = ", ..." if array.size > MAX_LISTED else ""
    return f"shape {'x'.join(map(str, array.shape)) or 'scalar'} [{', '.join(flat)}{more}]"


def _value(value: Any, index: tuple[int, ...]) -> str:
    array = np.asarray(value)
    if index and array.ndim == len(index):
        return f"{float(array[index]):.6g}" if array.dtype.kind == "f" else str(array[index])
    return _summary(array)


def _ir_against_source(program: Program, outcome, run: execute.SourceRun, which: str) -> str | None:
    """Where the IR's values (per rank) differ from the source's, in words; None if they agree."""
    found = _first_disagreement(program, outcome, run, which)
    return found[0] if found else None


def _first_disagreement(program: Program, outcome, run: execute.SourceRun, which: str
                        ) -> tuple[str, str | None] | None:
    """(words, IR output name) for the first IR output whose values differ from the source's."""
    rank_values = outcome.per_rank if which == "parallel" else [outcome.reference]
    for position, out in enumerate(program.outputs):
        for rank, (ir_env, source_outputs) in enumerate(zip(rank_values, run.outputs)):
            if position >= len(source_outputs):
                return (f"the source returns {len(source_outputs)} value(s) but the IR declares output {out.name} "
                        f"as number {position + 1}"), None
            found = execute.compare(source_outputs[position], ir_env[out.name], IR_RTOL, IR_ATOL)
            if found is None:
                continue
            index, _ = found
            ir_value, source_value = ir_env[out.name], source_outputs[position]
            if np.shape(ir_value) != np.shape(source_value):
                return (f"output {out.name} has shape {np.shape(ir_value)} in your IR but the source returns shape "
                        f"{np.shape(source_value)}"), out.name
            where = f"{out.name}[{', '.join(map(str, index))}]" if index else out.name
            ranks = f"rank {rank} of {run.world}" if which == "parallel" else "1 rank"
            return (f"on {ranks}, your IR computes {where} = {_value(ir_value, index)} but the source computes "
                    f"{_value(source_value, index)}"), out.name
    return None


def _divergence(program: Program, outcome) -> str:
    if outcome.divergence_op is None:
        return ""
    op = program.ops[outcome.divergence_op]
    return (f" Your IR's parallel values first depart from its single-device values at `{describe_op(op)}`; "
            f"check what line {op.span.line} really does.")


def _inputs_text(inputs: dict[str, np.ndarray]) -> str:
    return "; ".join(f"{name} = {_summary(value)}" for name, value in inputs.items())


def triage_counterexample(program: Program, facts: SourceFacts, runner: Runner,
                          input_shapes: dict[str, list[int]] | None = None) -> Finding:
    """The verifier says the IR's parallel run differs from its single-device run: is the source's?"""
    reason = runner.unavailable()
    if reason:
        return Finding(UNCONFIRMED, f"unconfirmed: the IR was proposed by an LLM and {reason}")
    fixed = at_source_shapes(program, facts, input_shapes)
    if fixed is None:
        return Finding(UNCONFIRMED, "unconfirmed: the IR cannot be instantiated at the source's own shapes, so the "
                                    "source could not be run on the counterexample")
    for seed in range(SEARCH_SEEDS):
        inputs, outcome = _concrete(fixed, seed)
        if outcome.mismatch:
            break
    else:
        return Finding(UNCONFIRMED, "unconfirmed by execution: the IR's forward outputs agree with its single-device "
                                    "run at the source's own shapes, so the source was not run (execution compares "
                                    "forward outputs only)")
    execution = execute.run_source(runner.source, runner.path, mesh=program.mesh.dims, inputs=inputs,
                                   entry=runner.entry, timeout=runner.timeout)
    confirmed = _confirmed(execution, program)
    if confirmed is not None:
        return confirmed
    found = (_first_disagreement(fixed, outcome, execution.parallel, "parallel")
             or _first_disagreement(fixed, outcome, execution.reference, "reference"))
    if found is None:
        return Finding(UNCONFIRMED, "unconfirmed: the source's own numbers match the IR's, yet agree with the "
                                    "single-device run")
    mismatch, output = found
    message = (f"Running the source itself on these inputs gives the same result on 1 and on "
               f"{execution.parallel.world} ranks, so the source is consistent here and your IR is not a faithful "
               f"translation: {mismatch}. Inputs: {_inputs_text(inputs)}.{_divergence(fixed, outcome)}")
    return Finding(IR_WRONG, "the LLM's IR disagreed with the source's real numbers (sent back as feedback)",
                   Problem(EXECUTION, message, _line_of(fixed, outcome, output)))


def cross_check(program: Program, facts: SourceFacts, runner: Runner,
                input_shapes: dict[str, list[int]] | None = None) -> Finding:
    """The IR verified: does the source agree, with itself and with the IR, on a random input?"""
    reason = runner.unavailable()
    if reason:
        return Finding(UNCONFIRMED, f"the IR was proposed by an LLM and not cross-checked by execution: {reason}")
    fixed = at_source_shapes(program, facts, input_shapes)
    if fixed is None:
        return Finding(UNCONFIRMED, "not cross-checked by execution: the IR cannot be instantiated at the source's "
                                    "shapes")
    inputs, outcome = _concrete(fixed, 0)
    execution = execute.run_source(runner.source, runner.path, mesh=program.mesh.dims, inputs=inputs,
                                   entry=runner.entry, timeout=runner.timeout)
    confirmed = _confirmed(execution, program)
    if confirmed is not None:
        if confirmed.status == CONFIRMED:
            mismatch = _ir_against_source(fixed, outcome, execution.parallel, "parallel") or ""
            detail = (f"Running the source on {execution.parallel.world} ranks gives a different result than on 1 "
                      f"rank ({execution.difference() or execution.parallel.failure()}), but your IR is equivalent "
                      f"to its single-device version, so it leaves out or changes something the source does"
                      + (f": {mismatch}" if mismatch else "") + f". Inputs: {_inputs_text(inputs)}.")
            return Finding(CONFIRMED, confirmed.note, Problem(EXECUTION, detail), detail)
        return confirmed
    mismatch = (_ir_against_source(fixed, outcome, execution.parallel, "parallel")
                or _ir_against_source(fixed, outcome, execution.reference, "reference"))
    if mismatch is not None:
        message = (f"Running the source on the same inputs shows your IR computes something else: {mismatch}. "
                   f"Inputs: {_inputs_text(inputs)}.")
        return Finding(IR_WRONG, "the LLM's IR disagreed with the source's real numbers (sent back as feedback)",
                       Problem(EXECUTION, message))
    return Finding(CONSISTENT, f"cross-checked by execution: the source on 1 and {execution.parallel.world} gloo "
                               f"ranks matches the IR on a random input")


def triage_shape_error(program: Program, runner: Runner, messages: list[tuple[str, int | None]]) -> Finding:
    """The IR has shape errors: are they the source's (it fails too) or the IR's?"""
    reason = runner.unavailable()
    if reason:
        return Finding(UNCONFIRMED, f"unconfirmed: the IR was proposed by an LLM and {reason}")
    execution = execute.run_source(runner.source, runner.path, mesh=program.mesh.dims, inputs=None,
                                   entry=runner.entry, timeout=runner.timeout)
    if execution.reference.unrunnable or execution.parallel.unrunnable:
        run = execution.reference if execution.reference.unrunnable else execution.parallel
        return Finding(UNCONFIRMED, f"unconfirmed: the source could not be run ({run.failure()})")
    if not execution.reference.ok:
        return Finding(CONFIRMED, f"confirmed by execution: the source fails on 1 rank too "
                                  f"({execution.reference.failure()})")
    if not execution.parallel.ok:
        return Finding(CONFIRMED, f"confirmed by execution: the source fails on {execution.parallel.world} ranks "
                                  f"({execution.parallel.failure()})")
    listed = "; ".join(f"line {line}: {text}" if line else text for text, line in messages)
    return Finding(IR_WRONG, "the LLM's IR had shape errors the source does not have (sent back as feedback)",
                   Problem(SHAPE, f"the source runs on its example inputs on 1 and {execution.parallel.world} ranks, "
                                  f"but your IR does not type-check: {listed}", messages[0][1] if messages else None))


def _confirmed(execution: execute.Execution, program: Program) -> Finding | None:
    """A finding when the source's runs decide the matter on their own, else None."""
    reference, parallel = execution.reference, execution.parallel
    if reference.unrunnable or parallel.unrunnable or not reference.ok:
        run = reference if (reference.unrunnable or not reference.ok) else parallel
        return Finding(UNCONFIRMED, f"unconfirmed: the source could not be run to confirm it ({run.failure()})")
    if not parallel.ok:
        return Finding(CONFIRMED, f"confirmed by execution: on {parallel.world} gloo ranks the source "
                                  f"{'does not finish' if parallel.timed_out else 'fails'} "
                                  f"({parallel.failure()}) while it runs on 1 rank")
    difference = execution.difference()
    if difference is not None:
        return Finding(CONFIRMED, f"confirmed by execution: with the same inputs, the source's {difference}")
    return None


def _line_of(program: Program, outcome, output: str | None) -> int | None:
    """The line to quote: where the IR's values first diverge, else where the output is made."""
    if outcome.divergence_op is not None:
        return program.ops[outcome.divergence_op].span.line
    producer = next((op for op in reversed(program.ops) if output in op.results), None)
    return producer.span.line if producer is not None else None
