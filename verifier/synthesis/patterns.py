"""Repair patterns: a table of (what the symptom looks like) -> (edits worth trying).

Each ``Rule`` pairs a declarative ``Match`` — the kind of symptom, the op that shows it, the
placement it has and the one it should have — with generators that turn the matched
symptom into candidate edits.  The search (``search.py``) tries every generated edit and
lets verification and the cost model decide; a rule proposes, it never decides.

Read the table at the bottom of this file as the catalogue of communication bugs the
synthesizer knows how to repair.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Iterable

from ..placements import Partial, Replicate, Shard
from ..registry import get_rule
from .edits import (AFTER_PRODUCER, BEFORE_CONSUMER, ChangeCollective, Edit, InsertCollectives, InsertWait, MoveWait,
                    RemoveCollective, Step)
from .symptoms import DIVERGENCE, EARLY_READ, OUTPUT, REJECTED, UNWAITED, Analysis, Symptom

REDUCE_OPS = ("sum", "avg", "max", "min")
REDUCING = ("all_reduce", "reduce_scatter")
COMPUTE = "compute"  # any op that is not a collective
ANY_COLLECTIVE = "collective"
NEARBY = 3  # how many dataflow steps above a diverging op its collectives are suspected


@dataclass(frozen=True)
class Match:
    """A symptom pattern: ``None`` fields match anything."""

    symptom: str
    op: str | tuple[str, ...] | None = None  # op kind(s), COMPUTE or ANY_COLLECTIVE
    have: type | None = None  # Partial / Shard / Replicate
    want: type | None = None
    producer: str | tuple[str, ...] | None = None  # OUTPUT: kind of the op that produced the output

    def matches(self, symptom: Symptom, analysis: Analysis) -> bool:
        if symptom.kind != self.symptom:
            return False
        if self.have is not None and not isinstance(symptom.have, self.have):
            return False
        if self.want is not None and not isinstance(symptom.want, self.want):
            return False
        ops = analysis.checked.ops
        op = ops[symptom.op_index] if symptom.op_index is not None and symptom.op_index < len(ops) else None
        if self.op is not None and (op is None or not _kind_matches(op.kind, self.op)):
            return False
        if self.producer is not None and (op is None or not _kind_matches(op.kind, self.producer)):
            return False
        return True


def _is_collective(kind: str) -> bool:
    rule = get_rule(kind)
    return rule is not None and rule.is_collective


def _kind_matches(kind: str, wanted: str | tuple[str, ...]) -> bool:
    for item in (wanted,) if isinstance(wanted, str) else wanted:
        if item == kind or (item == COMPUTE and not _is_collective(kind)) or \
                (item == ANY_COLLECTIVE and _is_collective(kind)):
            return True
    return False


Generator = Callable[[Symptom, Analysis], Iterable[Edit]]


@dataclass(frozen=True)
class Rule:
    name: str
    match: Match
    generators: tuple[Generator, ...]


# --- generators --------------------------------------------------------------------------------
# Small factories so the table reads as "insert all_reduce(op = the partial's op)".

def _offending_value(symptom: Symptom, analysis: Analysis) -> str:
    if symptom.kind == OUTPUT:
        return symptom.output
    return analysis.checked.ops[symptom.op_index].args[symptom.operand]


def _positions(symptom: Symptom, analysis: Analysis, value: str) -> list[tuple[str, int | None]]:
    """After the producer; and just before the rejecting op when other readers come between."""
    positions: list[tuple[str, int | None]] = [(AFTER_PRODUCER, None)]
    if symptom.kind == REJECTED:
        producer = analysis.producer(value)
        start = 0 if producer is None else producer + 1
        if any(i < symptom.op_index for i in analysis.users(value, start)):
            positions.append((BEFORE_CONSUMER, symptom.op_index))
    return positions


# Backward duals an inserted collective may be written with (docs/ir.md, ``grad=``): which one
# a fix needs shows only when gradients are checked, and the source idiom must match it
# (Megatron's gather_from_tensor_model_parallel_region splits the gradient, a plain
# all-gather reduce-scatters it).
GRAD_DUALS: dict[str, tuple[tuple[tuple[str, object], ...], ...]] = {
    "all_gather": ((), (("grad", "split"),)),
    "local_chunk": ((), (("grad", "all_gather"),)),
}


def _with_duals(analysis: Analysis, step: Step) -> list[Step]:
    if not getattr(analysis.program, "gradients", ()):
        return [step]
    return [Step(step.kind, step.attrs + extra, step.local) for extra in GRAD_DUALS.get(step.kind, ((),))]


def _have_op(symptom: Symptom) -> str:
    return symptom.have.op if isinstance(symptom.have, Partial) else "sum"


def insert(kind: str, on_inputs: bool = True, **attrs: Callable[[Symptom], object] | object) -> Generator:
    """Insert one collective on the offending value; attr values may be functions of the symptom.

    ``on_inputs=False``: not on the program's inputs (their layout is the design being checked;
    gathering a sharded weight would undo the parallelism rather than repair it).
    """

    def generate(symptom: Symptom, analysis: Analysis) -> Iterable[Edit]:
        value = _offending_value(symptom, analysis)
        if not on_inputs and analysis.producer(value) is None:
            return
        resolved = tuple((k, v(symptom) if callable(v) else v) for k, v in attrs.items())
        for step in _with_duals(analysis, Step(kind, resolved)):
            for position, consumer in _positions(symptom, analysis, value):
                yield InsertCollectives(f"insert {kind}", value, (step,), symptom.mesh_dim, position, consumer)

    return generate


def reduce_scatter_all_gather() -> Generator:
    """The two halves of an all-reduce, on every dim the value can be scattered along."""

    def generate(symptom: Symptom, analysis: Analysis) -> Iterable[Edit]:
        value = _offending_value(symptom, analysis)
        size = analysis.checked.mesh.size(symptom.mesh_dim)
        for dim, extent in enumerate(analysis.shapes.get(value, ())):
            if extent % size:
                continue
            scatter = Step("reduce_scatter", (("dim", dim), ("op", _have_op(symptom))))
            for gather in _with_duals(analysis, Step("all_gather", (("dim", dim),))):
                for position, consumer in _positions(symptom, analysis, value):
                    yield InsertCollectives("reduce-scatter + all-gather", value, (scatter, gather), symptom.mesh_dim,
                                            position, consumer)

    return generate


def gather_then_sum() -> Generator:
    """All-gather the partial values along a new leading dim and add them up locally."""

    def generate(symptom: Symptom, analysis: Analysis) -> Iterable[Edit]:
        if _have_op(symptom) not in ("sum",):
            return
        value = _offending_value(symptom, analysis)
        placements = analysis.placements.get(value, ())
        if any(isinstance(p, Shard) for p in placements) or analysis.env != (analysis.program.dims or {}):
            return  # the stacking reshape is written with the value's (local = global) sizes
        shape = analysis.shapes.get(value)
        if shape is None:
            return
        steps = (Step("reshape", (("shape", [1, *shape]),), local=True), Step("all_gather", (("dim", 0),)),
                 Step("sum", (("dim", 0),), local=True))
        for position, consumer in _positions(symptom, analysis, value):
            yield InsertCollectives("all-gather + local sum", value, steps, symptom.mesh_dim, position, consumer)

    return generate


def align_with_sibling_shard() -> Generator:
    """Operands sharded along different dims: all-to-all this one onto the other's dim."""

    def generate(symptom: Symptom, analysis: Analysis) -> Iterable[Edit]:
        op = analysis.checked.ops[symptom.op_index]
        position = analysis.checked.mesh.index(symptom.mesh_dim)
        value = op.args[symptom.operand]
        ndim = len(analysis.shapes[value])
        for k, other in enumerate(op.args):
            sibling = analysis.placements[other][position]
            if k == symptom.operand or not isinstance(sibling, Shard) or len(analysis.shapes[other]) != ndim:
                continue
            if sibling.dim % ndim == symptom.have.dim % ndim:
                continue
            steps = (Step("all_to_all", (("split_dim", sibling.dim % ndim), ("concat_dim", symptom.have.dim % ndim))),)
            for position_kind, consumer in _positions(symptom, analysis, value):
                yield InsertCollectives("all-to-all onto the sibling's shard dim", value, steps, symptom.mesh_dim,
                                        position_kind, consumer)

    return generate


def chunk_replicated_partner() -> Generator:
    """A shard meets a replicated operand that should be sharded too: take this rank's chunk (free)."""

    def generate(symptom: Symptom, analysis: Analysis) -> Iterable[Edit]:
        op = analysis.checked.ops[symptom.op_index]
        position = analysis.checked.mesh.index(symptom.mesh_dim)
        size = analysis.checked.mesh.size(symptom.mesh_dim)
        for k, other in enumerate(op.args):
            if k == symptom.operand or not isinstance(analysis.placements[other][position], Replicate):
                continue
            if analysis.dtypes.get(other, "f32") == "bool" or other in {s.name for s in analysis.checked.inputs}:
                continue  # chunking a declared input changes what the caller passes, not the communication
            for dim, extent in enumerate(analysis.shapes[other]):
                if extent % size == 0 and extent > 1:
                    fake = Symptom(REJECTED, symptom.op_index, symptom.mesh_dim, k, Replicate(), None, symptom.line)
                    for step in _with_duals(analysis, Step("local_chunk", (("dim", dim),))):
                        for position_kind, consumer in _positions(fake, analysis, other):
                            yield InsertCollectives("take this rank's chunk of the replicated operand", other,
                                                    (step,), symptom.mesh_dim, position_kind, consumer)

    return generate


def change(kind: str | None = None, drop: tuple[str, ...] = (), **attrs) -> Generator:
    """Change the rejecting collective (its kind and/or attrs)."""

    def generate(symptom: Symptom, analysis: Analysis) -> Iterable[Edit]:
        op = analysis.checked.ops[symptom.op_index]
        resolved = tuple((k, v(symptom) if callable(v) else v) for k, v in attrs.items())
        if kind in (None, op.kind) and all(op.attrs.get(k) == v for k, v in resolved):
            return
        yield ChangeCollective(f"change {op.kind}", symptom.op_index, kind, resolved, drop)

    return generate


def remove() -> Generator:
    def generate(symptom: Symptom, analysis: Analysis) -> Iterable[Edit]:
        yield RemoveCollective("remove collective", symptom.op_index)

    return generate


def change_producer(**attrs) -> Generator:
    """OUTPUT symptoms: change the collective that produced the output."""

    def generate(symptom: Symptom, analysis: Analysis) -> Iterable[Edit]:
        if symptom.op_index is None:
            return
        op = analysis.checked.ops[symptom.op_index]
        resolved = tuple((k, v(symptom) if callable(v) else v) for k, v in attrs.items())
        if all(op.attrs.get(k) == v for k, v in resolved):
            return
        yield ChangeCollective(f"change {op.kind}", symptom.op_index, None, resolved)

    return generate


def move_wait_before_reader() -> Generator:
    def generate(symptom: Symptom, analysis: Analysis) -> Iterable[Edit]:
        yield MoveWait("move wait", symptom.wait, symptom.op_index)

    return generate


def insert_wait_before_reader() -> Generator:
    def generate(symptom: Symptom, analysis: Analysis) -> Iterable[Edit]:
        handle = analysis.checked.ops[symptom.issuer].attr("handle")
        yield InsertWait("insert wait", str(handle), symptom.op_index)

    return generate


def nearby_collectives() -> Generator:
    """No placement explains the divergence: re-try the collectives just above it."""

    def generate(symptom: Symptom, analysis: Analysis) -> Iterable[Edit]:
        ops = analysis.checked.ops
        frontier, seen = {symptom.op_index}, set()
        for _ in range(NEARBY + 1):
            seen |= frontier
            frontier = {analysis.producer(a) for i in frontier for a in ops[i].args} - {None} - seen
        for index in sorted(seen):
            op = ops[index]
            if op.kind not in REDUCING + ("all_gather",):
                continue
            yield RemoveCollective("remove collective near the divergence", index)
            if op.kind in REDUCING:
                for reduce_op in REDUCE_OPS:
                    if reduce_op != op.attrs.get("op", "sum"):
                        yield ChangeCollective("change reduce op near the divergence", index, None,
                                               (("op", reduce_op),))

    return generate


def _dim_of(placement_attr: str) -> Callable[[Symptom], int]:
    return lambda s: getattr(s, placement_attr).dim


HAVE_OP = _have_op
HAVE_DIM = _dim_of("have")
WANT_DIM = _dim_of("want")


# --- the table ---------------------------------------------------------------------------------

RULES: tuple[Rule, ...] = (
    Rule("a partial sum reaches an op that needs the reduced value",
         Match(REJECTED, op=COMPUTE, have=Partial),
         (insert("all_reduce", op=HAVE_OP), reduce_scatter_all_gather(), gather_then_sum())),
    Rule("a shard reaches an op that needs the whole dim",
         Match(REJECTED, op=COMPUTE, have=Shard),
         (insert("all_gather", on_inputs=False, dim=HAVE_DIM), align_with_sibling_shard(), chunk_replicated_partner())),
    Rule("output still partial where a replicated value is expected",
         Match(OUTPUT, have=Partial, want=Replicate),
         (insert("all_reduce", op=HAVE_OP), reduce_scatter_all_gather(), gather_then_sum())),
    Rule("output partial where a shard is expected",
         Match(OUTPUT, have=Partial, want=Shard),
         (insert("reduce_scatter", dim=WANT_DIM, op=HAVE_OP),)),
    Rule("output sharded where a replicated value is expected",
         Match(OUTPUT, have=Shard, want=Replicate),
         (insert("all_gather", dim=HAVE_DIM),)),
    Rule("output scattered or gathered along the wrong dim",
         Match(OUTPUT, have=Shard, want=Shard, producer=("reduce_scatter", "scatter")),
         (change_producer(dim=WANT_DIM),)),
    Rule("reduction of a value that is already replicated",
         Match(REJECTED, op=REDUCING, have=Replicate),
         (remove(),)),
    Rule("reduce op differs from how the partial values combine",
         Match(REJECTED, op=REDUCING, have=Partial),
         (change(op=HAVE_OP),)),
    Rule("gather along another dim than the shard",
         Match(REJECTED, op="all_gather", have=Shard),
         (change(dim=HAVE_DIM),)),
    Rule("gather of a value that is already replicated",
         Match(REJECTED, op="all_gather", have=Replicate),
         (remove(),)),
    Rule("gather of partial sums that must be added",
         Match(REJECTED, op="all_gather", have=Partial),
         (change("all_reduce", drop=("dim",), op=HAVE_OP),)),
    Rule("all-reduce of shards that must be concatenated",
         Match(REJECTED, op="all_reduce", have=Shard),
         (change("all_gather", drop=("op",), dim=HAVE_DIM),)),
    Rule("async result read before its wait",
         Match(EARLY_READ),
         (move_wait_before_reader(),)),
    Rule("async handle never waited",
         Match(UNWAITED),
         (insert_wait_before_reader(),)),
    Rule("values diverge just below a collective",
         Match(DIVERGENCE),
         (nearby_collectives(),)),
)


def candidate_edits(symptoms: Iterable[Symptom], analysis: Analysis, rules: tuple[Rule, ...] = RULES
                    ) -> list[tuple[Rule, Edit]]:
    """Every edit the table proposes for these symptoms, in table order, without duplicates."""
    out, seen = [], set()
    for symptom in symptoms:
        for rule in rules:
            if not rule.match.matches(symptom, analysis):
                continue
            for generator in rule.generators:
                for edit in generator(symptom, analysis):
                    key = repr(replace(edit, rule=""))
                    if key in seen:
                        continue
                    seen.add(key)
                    out.append((rule, edit))
    return out
