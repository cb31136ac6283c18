"""A window of a large program around an edit, as a program of its own.

Re-verifying a 700-op stack for every candidate edit is what makes repair slow; the region
around the edit is what the edit can break.  The slice takes the ops of a window, turns the
values it reads from before the window into inputs (with the shapes and placements
propagation gave them) and the values read after it into outputs (with their propagated
placements), and grows the window until every boundary value has a placement the checker
can distribute (no ``V``), every async handle has its wait inside, and integer values come
from real inputs.  A verified slice says: given correct values at its inputs, the window
computes correct values at its outputs (forward only: gradients are left to the whole-program
check).  It is a filter, not the verdict — the fix that is shown is verified on the whole
program.
"""
from __future__ import annotations

from dataclasses import replace

from ..ir import Output, Program, Span, TensorSpec
from ..placements import Partial, Varying
from .symptoms import Analysis

DEFAULT_RADIUS = 6


def _distributable(placements) -> bool:
    """The checker can give every rank its piece (partial max/min values have no canonical split)."""
    return placements is not None and not any(
        isinstance(p, Varying) or (isinstance(p, Partial) and p.op in ("max", "min")) for p in placements)


def slice_around(analysis: Analysis, indices: list[int], radius: int = DEFAULT_RADIUS,
                 max_fraction: float = 0.5) -> Program | None:
    """The window program, or None when it would not be much smaller than the program."""
    program = analysis.checked
    ops = program.ops
    if not indices or not ops:
        return None
    lo, hi = max(0, min(indices) - radius), min(len(ops) - 1, max(indices) + radius)
    producers = analysis.placement.producers
    inputs = {spec.name: spec for spec in program.inputs}
    for _ in range(len(ops)):
        changed = False
        window = ops[lo:hi + 1]
        defined = {r for op in window for r in op.results}
        # handles: issuer and wait inside together
        for index in range(lo, hi + 1):
            handle = ops[index].attr("handle")
            if handle is None:
                continue
            partner = [j for j, op in enumerate(ops) if op.attr("handle") == handle]
            if partner and (min(partner) < lo or max(partner) > hi):
                lo, hi, changed = min(lo, min(partner)), max(hi, max(partner)), True
        # boundary inputs must be distributable and (when integer) real inputs
        for op in window:
            for arg in op.args:
                if arg in defined or arg in inputs:
                    continue
                integer = analysis.dtypes.get(arg, "f32").startswith(("i", "u", "b"))
                if integer or not _distributable(analysis.placements.get(arg)):
                    producer = producers.get(arg)
                    if producer is not None and producer < lo:
                        lo, changed = producer, True
        # boundary outputs must be distributable
        later = {a for op in ops[hi + 1:] for a in op.args} | {o.name for o in program.outputs}
        for name in sorted(defined & later):
            if not _distributable(analysis.placements.get(name)) and hi < len(ops) - 1:
                users = [j for j, op in enumerate(ops) if j > hi and name in op.args]
                hi, changed = (max(users) if users else len(ops) - 1), True
        if not changed:
            break
    if (hi - lo + 1) > max_fraction * len(ops):
        return None
    window = ops[lo:hi + 1]
    defined = {r for op in window for r in op.results}
    needed: list[str] = []
    for op in window:
        for arg in op.args:
            if arg not in defined and arg not in needed:
                needed.append(arg)
    slice_inputs = []
    for name in needed:
        if name in inputs:
            slice_inputs.append(inputs[name])
        else:
            slice_inputs.append(TensorSpec(name, tuple(analysis.shapes[name]), analysis.dtypes.get(name, "f32"),
                                           analysis.placements[name], Span(None, program.source)))
    later = {a for op in ops[hi + 1:] for a in op.args}
    outputs = [out for out in program.outputs if out.name in defined]
    outputs += [Output(name, analysis.placements[name], Span(None, program.source))
                for op in window for name in op.results
                if name in later and name not in {o.name for o in outputs}]
    if not outputs:
        return None
    extra = {"gradients": (), "backward_ops": ()} if hasattr(program, "gradients") else {}
    return replace(program, inputs=tuple(slice_inputs), ops=tuple(window), outputs=tuple(outputs), dims={},
                   requires=(), **extra)
