"""Check a whole training plan: each structural class once, in a process pool, streaming.

``check_plan(plan)`` walks the unrolled training step block by block (``plans.py``),
splits each block into coordinate classes (``symmetry.py``), and reduces each class to
its canonical form (``canonical.py``): a form seen before costs a dictionary lookup, a new
one becomes a job for the pool (``solve.py``).  Blocks are generated lazily and at most
``2 * workers`` jobs are in flight, so memory stays bounded whatever the layer count.  The
pipeline schedule is checked at the real stage and microbatch counts in the parent while
the workers prove.  The argument that this proves the whole step is in
``verifier/scale/__init__.py``.
"""
from __future__ import annotations

import itertools
import multiprocessing
import os
import re
import resource
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field

from ..ir import Op, Program, eval_dim
from ..placements import Shard
from ..registry import get_rule
from ..report import ERROR
from ..shapes import bound_env, instantiate
from ..temporal import analyse_schedule
from ..wellformed import infer_shapes
from . import blocks
from .canonical import canonical_hash
from .faults import FaultError, parse_fault
from .plans import FORWARD_BACKWARD, GRAD_SYNC, Plan, Segment, TrainingProgram, accumulation_ops, pipeline_ops
from .report import Finding, ScaleReport
from .solve import ClassResult, Job, run, warm_up
from .symmetry import CoordinateClass, specialise


@dataclass(frozen=True)
class _Instance:
    """One block instance of a class: which block, and which of its coordinate classes."""

    segment: str
    layer: int | None
    stage: int
    coordinate: CoordinateClass


@dataclass
class _Class:
    key: str
    kind: str
    program: Program                      # specialised, at the real sizes (its spans are the block's lines)
    instances: list[_Instance] = field(default_factory=list)
    real_size_problems: bool = False
    result: ClassResult | None = None
    per_microbatch: int = 0               # segments whose ops this class counts, once per microbatch
    per_step: int = 0                     # ... and once per step


class _Runner:
    """Runs jobs inline (``workers <= 1``) or in a pool, with a bound on jobs in flight."""

    def __init__(self, workers: int):
        self.workers = workers
        self.pool: ProcessPoolExecutor | None = None
        self.pending: set[Future] = set()
        self.done: list[ClassResult] = []
        self.worker_peaks: dict[int, int] = {}
        if workers > 1:
            # fork: workers inherit the imports and need no ``__main__`` guard in the caller's script
            # (this process does no solver work, see solve.py, so there is no solver state to inherit)
            method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
            self.pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(method))
            for future in [self.pool.submit(warm_up) for _ in range(workers)]:
                future.result()

    def submit(self, job: Job) -> None:
        if self.pool is None:
            self._record(run(job))
            return
        while len(self.pending) >= 2 * self.workers:
            self._collect(FIRST_COMPLETED)
        self.pending.add(self.pool.submit(run, job))

    def _record(self, result: ClassResult) -> None:
        self.done.append(result)
        self.worker_peaks[result.pid] = max(self.worker_peaks.get(result.pid, 0), result.peak_kib)

    def _collect(self, how: str) -> None:
        finished, self.pending = wait(self.pending, return_when=how)
        for future in finished:
            self._record(future.result())

    def finish(self) -> list[ClassResult]:
        if self.pending:
            self._collect("ALL_COMPLETED")
        if self.pool is not None:
            self.pool.shutdown()
        return self.done

    def peak_mib(self) -> float:
        """Parent plus every worker at its own peak: an upper bound of the tree's peak RSS."""
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        workers = sum(peak for pid, peak in self.worker_peaks.items() if pid != os.getpid())
        return (own + workers) / 1024


def check_plan(plan: Plan, fault_spec: str | None = None, workers: int = 2) -> ScaleReport:
    """Verify ``plan`` (with an optional seeded fault) and report verdict, cost and findings."""
    started = time.perf_counter()
    fault = parse_fault(fault_spec, plan)
    program = TrainingProgram(plan, fault)
    _validate_fault(program)
    report = ScaleReport(plan.name, ranks=plan.ranks)
    runner = _Runner(workers)
    try:
        walk = _Walk(program, runner)
        walk.run(report)
        schedule = _schedule(program, report)
        for result in runner.finish():
            walk.receive(result, report)
    finally:
        if runner.pool is not None:
            runner.pool.shutdown(cancel_futures=True)
    classes = walk.classes
    _conclude(program, classes, report)
    report.ops = _count_ops(plan, classes, walk.parameters)
    proofs = sum(1 for c in classes.values() if c.result is not None)
    report.stats = {"blocks": walk.segments, "classes": len(classes), "proofs": proofs,
                    "instances": sum(len(c.instances) for c in classes.values()),
                    "real_size_checks": len(walk.instance_keys), "boundaries": walk.boundaries,
                    "plan": program.describe(),
                    "proof_seconds": round(sum(c.result.seconds for c in classes.values() if c.result), 2),
                    "schedule": schedule, "mesh": str(plan.mesh), "workers": max(workers, 1),
                    "by_kind": _by_kind(classes)}
    report.seconds = time.perf_counter() - started
    report.peak_mib = runner.peak_mib()
    return report


def _validate_fault(program: TrainingProgram) -> None:
    fault = program.fault
    if fault.kind != "double-divide":
        return
    match = re.fullmatch(r"layers\.(\d+)\..+", fault.grad or "")
    candidates: list[blocks.Block]
    if match:
        layer = int(match.group(1))
        if layer >= program.plan.model.layers:
            raise FaultError(f"layer {layer} is outside 0..{program.plan.model.layers - 1}")
        candidates = blocks.layer_blocks(program.plan, layer, fault)
    else:
        candidates = [blocks.embedding(program.plan), blocks.head(program.plan)]
    paths = [param.path for block in candidates for param in block.params]
    if fault.grad not in paths:
        raise FaultError(f"no gradient named {fault.grad!r}; e.g. {', '.join(paths[:6])}")


class _Walk:
    """Walk the blocks, dedupe, submit new classes and new real sizes; then collect results.

    A proof is keyed by the block's canonical form *without* dim values (the reduced sizes,
    and so the proof, are a function of it); real-size checks by the form *with* values.
    """

    def __init__(self, program: TrainingProgram, runner: _Runner):
        self.program = program
        self.runner = runner
        self.classes: dict[str, _Class] = {}
        self.instance_keys: dict[str, tuple[str, _Instance]] = {}  # form with values -> (class, first instance)
        self.segments = 0
        self.parameters = 0
        self.boundaries = 0

    def run(self, report: ScaleReport) -> None:
        plan = self.program.plan
        previous: tuple[Segment, tuple] | None = None
        for segment in self.program.segments():
            self.segments += 1
            self.parameters += segment.phase == GRAD_SYNC
            if segment.phase == FORWARD_BACKWARD:
                previous = self._boundary(previous, segment, report)
            for position, (coordinate, specialised) in enumerate(specialise(segment.program, plan.mesh)):
                instance = _Instance(segment.name, segment.layer, segment.stage, coordinate)
                key = self._key(segment, specialised, instance)
                record = self.classes[key]
                record.instances.append(instance)
                if position == 0:  # ops are counted once per block, whatever its coordinate classes
                    record.per_microbatch += segment.phase == FORWARD_BACKWARD
                    record.per_step += 1

    def _boundary(self, previous: tuple[Segment, tuple] | None, segment: Segment, report: ScaleReport
                  ) -> tuple[Segment, tuple]:
        """The residual stream a block takes must be the one the block before it gives (same real
        shape, same placement over tp), within a stage and across a stage boundary, where the
        pipeline moves it unchanged to the same tp coordinates of the next stage."""
        program = segment.program
        if previous is not None and segment.kind != blocks.EMBEDDING:
            before, given = previous
            taken = _contract(program, program.inputs[0])
            self.boundaries += 1
            if taken != given:
                crossing = " across the pipeline stage boundary" if before.stage != segment.stage else ""
                report.findings.append(Finding(
                    "contract", f"{segment.name} takes the residual stream as {taken[0]} placed {taken[1]}, but "
                                f"{before.name} gives {given[0]} placed {given[1]}{crossing}",
                    segment.name, segment.layer, segment.stage % self.program.plan.parallel.pp))
        out = program.outputs[0]
        spec = next((s for s in program.inputs if s.name == out.name), None)
        return segment, _contract(program, spec, out.placements, out.name)

    def _key(self, segment: Segment, specialised: Program, instance: _Instance) -> str:
        instance_key = canonical_hash(specialised)
        known = self.instance_keys.get(instance_key)
        if known is not None:
            return known[0]
        key = canonical_hash(specialised, with_dim_values=False)
        self.instance_keys[instance_key] = (key, instance)
        if key not in self.classes:
            self.classes[key] = _Class(key, segment.kind, specialised)
            self.runner.submit(Job(key, segment.name, specialised))
        else:
            self.runner.submit(Job(instance_key, segment.name, specialised, prove=False))
        return key

    def receive(self, result: ClassResult, report: ScaleReport) -> None:
        plan = self.program.plan
        if result.proof:
            record = self.classes[result.key]
            record.result = result
            instance = record.instances[0]
        else:
            key, instance = self.instance_keys[result.key]
            record = self.classes[key]
        for diagnostic in result.real_size:
            if diagnostic.severity != ERROR:
                continue
            record.real_size_problems = True
            report.findings.append(Finding(diagnostic.check, diagnostic.message, instance.segment, instance.layer,
                                           instance.stage % plan.parallel.pp, _ranks(plan, instance),
                                           diagnostic.line, _statement_at(record.program, diagnostic.line)))


def _contract(program: Program, spec, placements=None, name: str | None = None) -> tuple:
    """(real shape, placement over tp) of a residual-stream value, seen per data-parallel replica:
    a value stacked over ``ep`` (the routed experts' tokens) counts one replica's share."""
    if spec is not None:
        shape = [int(eval_dim(d, program.dims)) for d in spec.shape]
        placements = spec.placements
    else:
        shapes = infer_shapes(instantiate(program, bound_env(program) or {})).shapes
        shape = list(shapes.get(name, ()))
    by_dim = dict(zip(program.mesh.names, placements or ()))
    if "ep" in by_dim and by_dim["ep"] == Shard(0) and shape:
        shape[0] //= program.mesh.size("ep")
    return tuple(shape), str(by_dim.get("tp", "R"))


def _schedule(program: TrainingProgram, report: ScaleReport) -> dict[str, object]:
    plan = program.plan
    schedule = program.schedule()
    started = time.perf_counter()
    result = analyse_schedule(schedule)
    replicas = plan.ranks // plan.parallel.pp  # pp is the major mesh dim: stage s holds a contiguous range
    for diagnostic in result.diagnostics:
        stages = [int(r) for r in re.findall(r"\brank (\d+)", diagnostic.message)]
        stage = stages[0] if stages else None
        ranks = (f"pp={stage} (all {replicas} ranks of the stage: global {stage * replicas}-"
                 f"{(stage + 1) * replicas - 1})" if stage is not None else "")
        report.findings.append(Finding(diagnostic.check, diagnostic.message, "pipeline schedule", None, stage, ranks,
                                       severity=diagnostic.severity, phase="schedule"))
    report.proven.extend(result.proven)
    return {"kind": schedule.name, "stages": schedule.stages, "microbatches": schedule.microbatches,
            "chunks": schedule.chunks, "events": result.events, "seconds": round(time.perf_counter() - started, 3)}


# --- conclusions ----------------------------------------------------------------------------------

def _statement_at(program: Program, line: int | None) -> str:
    if line is None:
        return ""
    for spec in program.inputs:
        if spec.span.line == line:
            return f"input {spec.name}: {spec.dtype}{list(spec.shape)}"
    for op in program.ops + program.backward_ops:
        if op.span.line == line:
            return _format_op(op)
    for gradient in program.gradients:
        if gradient.span.line == line:
            return f"grad {gradient.input} = {gradient.value}"
    return ""


def _format_op(op: Op) -> str:
    arguments = list(op.args) + [f"{key}={value!r}" if isinstance(value, str) and " " in value else f"{key}={value}"
                                 for key, value in op.attrs.items()]
    head = f"{', '.join(op.results)} = " if op.results else ""
    return f"{head}{op.kind}({', '.join(arguments)})"


def _ranks(plan: Plan, instance: _Instance) -> str:
    """The ranks of ``plan.mesh`` that run ``instance``: fixed coordinates and global ranks."""
    fixed: dict[str, set[int]] = {"pp": {instance.stage % plan.parallel.pp}}
    coordinate = instance.coordinate
    if not coordinate.everywhere:
        for position, dim in enumerate(coordinate.dims):
            fixed[dim] = {member[position] for member in coordinate.members}
    ranges = [sorted(fixed.get(name, range(size))) for name, size in plan.mesh.dims]
    count = 1
    for values in ranges:
        count *= len(values)
    parts = []
    for (name, size), values in zip(plan.mesh.dims, ranges):
        if size == 1:
            continue
        if len(values) == size:
            parts.append(f"{name}=0..{size - 1}")
        elif len(values) <= 3:
            parts.append(f"{name}={','.join(map(str, values))}")
        else:
            parts.append(f"{name}: {len(values)} of {size}")
    text = ", ".join(parts) + f" ({count} ranks"
    if count <= 64:
        sizes = [size for _, size in plan.mesh.dims]
        ranks = []
        for coords in itertools.product(*ranges):
            index = 0
            for value, size in zip(coords, sizes):
                index = index * size + value
            ranks.append(index)
        text += ": global " + _compress(ranks)
    return text + ")"


def _compress(numbers: list[int]) -> str:
    numbers = sorted(numbers)
    runs, start = [], numbers[0]
    for previous, current in zip(numbers, numbers[1:] + [None]):
        if current != previous + 1:
            runs.append(f"{start}" if start == previous else f"{start}-{previous}")
            start = current
    return ", ".join(runs)


def _conclude(program: TrainingProgram, classes: dict[str, _Class], report: ScaleReport) -> None:
    plan = program.plan
    for record in classes.values():
        result = record.result
        errors = [d for d in (result.diagnostics if result else []) if d.severity == ERROR]
        if errors:
            report.findings.append(_finding(plan, record, errors, result.phase))
        elif result is not None and result.verdict == "unsupported":
            reasons = "; ".join(d.message for d in result.diagnostics if d.check == "unsupported")
            report.unsupported.append(f"{record.instances[0].segment}: {reasons or 'not proven'}")
    done = [r for r in classes.values() if r.result is not None and r.result.verdict == "verified"
            and not r.real_size_problems]
    blocks_ok = [r for r in done if r.kind != "grad-sync"]
    syncs_ok = [r for r in done if r.kind == "grad-sync"]
    if blocks_ok:
        instances = sum(len(r.instances) for r in blocks_ok)
        report.proven.append(
            f"blocks: {instances} block instances in {len(blocks_ok)} structural classes proven equivalent to their "
            f"single-device programs, forward and gradients, tensor-parallel gradient sync included, on the real "
            f"tp/ep group sizes; shard divisibility and shapes at the real sizes")
    ordered = [r for r in blocks_ok if any("collective order agrees" in claim for claim in r.result.proven)]
    if blocks_ok and len(ordered) == sum(1 for r in blocks_ok if _collectives(r.program)):
        report.proven.append(
            "collective order: every class's collectives agree in order within each of its tp/ep groups, and all "
            "members of a group run the same blocks in the same order (same stage and layers; no block has a "
            "collective over pp or over a dim it was specialised on), so the order agrees over the whole step")
    if blocks_ok and not report.findings:
        sizes = [len(r) for r in plan.stage_layers()]
        report.proven.append(
            f"pipeline layout: {plan.model.layers} layers on {len(sizes)} virtual stages {_runs(sizes)}, embedding "
            f"on the first and head on the last; the residual stream contract holds at every block and stage "
            f"boundary")
    if syncs_ok:
        instances = sum(len(r.instances) for r in syncs_ok)
        dp = blocks.data_parallel_mesh(plan, False)
        report.proven.append(
            f"gradient sync: {instances} parameter gradients in {len(syncs_ok)} classes proven to equal the gradient "
            f"of the global mean loss after synchronisation over {dp} (real sizes): what the optimizer consumes")


def _collectives(program: Program) -> int:
    return sum(1 for op in program.ops if (rule := get_rule(op.kind)) is not None and rule.is_collective)


def _runs(sizes: list[int]) -> str:
    """``[7, 8, 8, 8, 7]`` -> ``"[7, 8x3, 7]"``."""
    parts = []
    for size, group in itertools.groupby(sizes):
        count = len(list(group))
        parts.append(f"{size}x{count}" if count > 1 else str(size))
    return "[" + ", ".join(parts) + "]"


def _finding(plan: Plan, record: _Class, errors: list, phase: str) -> Finding:
    """One finding per faulty class: where its first instance runs, its first error, the rest as details."""
    first = record.instances[0]
    primary = errors[0]
    message = primary.message
    if first.coordinate.changes:
        message += "; on these ranks " + "; ".join(first.coordinate.changes)
    others = len(record.instances) - 1
    if others:
        message += (f" (the same form, so the same finding: {others} more block{'s' if others != 1 else ''}, e.g. "
                    f"{', '.join(i.segment for i in record.instances[1:4])})")
    details = [f"line {d.line}: {d.message}" if d.line is not None else d.message for d in errors[1:]]
    if record.kind == "grad-sync" and phase == "backward":
        phase = "gradient sync"  # the stand-in's forward is not the plan's; its backward section is
    return Finding(primary.check, message, first.segment, first.layer, first.stage % plan.parallel.pp,
                   _ranks(plan, first), primary.line, _statement_at(record.program, primary.line),
                   len(record.instances), phase=phase, details=details)


def _count_ops(plan: Plan, classes: dict[str, _Class], params: int) -> int:
    microbatches = plan.parallel.microbatches
    total = 0
    for record in classes.values():
        if record.result is None:
            continue
        ops = record.result.ops
        if record.kind == "grad-sync":
            total += record.per_step * ops.sync
        else:
            total += record.per_microbatch * microbatches * (ops.forward + ops.backward) + record.per_step * ops.sync
    return total + pipeline_ops(plan) + accumulation_ops(plan, params)


def _by_kind(classes: dict[str, _Class]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for record in classes.values():
        entry = out.setdefault(record.kind, {"instances": 0, "classes": 0, "seconds": 0.0})
        entry["instances"] += len(record.instances)
        entry["classes"] += 1
        entry["seconds"] = round(entry["seconds"] + (record.result.seconds if record.result else 0.0), 2)
    return out
