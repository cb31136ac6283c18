"""What is wrong, as structured facts the repair patterns match on.

The verifier's diagnostics are for people; the synthesizer re-derives the same findings as
data: placement propagation says which op rejected which operand on which mesh dim (or
which output has the wrong placement), a scan of handles and waits finds reads of in-flight
results, and the report's lines (the divergence point of a counterexample) localise the
rest.  Everything here is cheap — no solver.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..ir import Program
from ..placement_check import PlacementResult, propagate
from ..placements import Partial, Placement, Replicate, Shard, Varying
from ..registry import PlacementContext, PlacementError, get_rule
from ..shapes import ShapeProblem, bound_env, instantiate, reduced_env
from ..wellformed import check_structure, infer_shapes

REJECTED = "rejected"  # an op's placement rule refused an operand
OUTPUT = "output"  # an output's placement is not the expected one
DIVERGENCE = "divergence"  # values differ from the reference from this op on (no placement explanation)
EARLY_READ = "early-read"  # an async collective's value read before its wait
UNWAITED = "unwaited"  # an async collective never waited

COMPARISONS = ("lt", "le", "gt", "ge", "eq", "ne", "logical_and", "logical_or", "logical_not")


@dataclass(frozen=True)
class Symptom:
    kind: str
    op_index: int | None  # rejecting op / producer of the output / reader / diverging op
    mesh_dim: str | None = None
    operand: int | None = None  # position in op.args of the offending operand
    have: Placement | None = None
    want: Placement | None = None
    line: int | None = None
    output: str | None = None
    issuer: int | None = None  # EARLY_READ / UNWAITED: the async op
    wait: int | None = None  # EARLY_READ: its wait


@dataclass
class Analysis:
    """A program instantiated at checking sizes, with shapes, placements and dtypes.

    ``checked`` is the forward program (its op indices are the given program's, so edits can
    name ops by index); ``full`` adds the generated backward when gradients are checked, and is
    what the concrete screen runs.
    """

    program: Program  # as given (symbolic dims)
    checked: Program  # instantiated at the reduced sizes
    shapes: dict[str, tuple[int, ...]]
    placement: PlacementResult
    dtypes: dict[str, str]
    env: dict[str, int]
    real_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    full: Program | None = None
    full_placement: PlacementResult | None = None

    @property
    def placements(self) -> dict[str, tuple[Placement, ...]]:
        return self.placement.placements

    def producer(self, value: str) -> int | None:
        return self.placement.producers.get(value)

    def users(self, value: str, start: int = 0) -> list[int]:
        return [i for i, op in enumerate(self.program.ops) if i >= start and value in op.args]


class NotAnalysable(Exception):
    """The program is not well-formed: no placement facts to repair from."""


def analyse(program: Program, env: dict[str, int] | None = None, with_real_sizes: bool = False) -> Analysis:
    if check_structure(program):
        raise NotAnalysable("not well-formed")
    try:
        env = reduced_env(program) if env is None else env
    except ShapeProblem as problem:
        raise NotAnalysable(str(problem)) from None
    checked = instantiate(program, env)
    if any(op.kind == "call" for op in checked.ops):
        raise NotAnalysable("custom autograd functions (call ops) are not repaired yet")
    shaped = infer_shapes(checked)
    if shaped.diagnostics:
        raise NotAnalysable(shaped.diagnostics[0].message)
    placement = propagate(checked, shaped.shapes)
    analysis = Analysis(program, checked, shaped.shapes, placement, dtypes_of(program), env,
                        full=checked, full_placement=placement)
    if getattr(checked, "gradients", ()):
        analysis.full, analysis.full_placement = _with_backward(checked, shaped.shapes)
    if with_real_sizes:
        analysis.real_shapes = real_shapes(program, env, shaped.shapes)
    return analysis


def _with_backward(checked: Program, shapes: dict[str, tuple[int, ...]]) -> tuple[Program, PlacementResult]:
    from ..backward import BackwardUnsupported, gradient_program

    try:
        full = gradient_program(checked, shapes)
    except (BackwardUnsupported, ValueError) as problem:
        raise NotAnalysable(f"no backward: {problem}") from None
    shaped = infer_shapes(full)
    if shaped.diagnostics:
        raise NotAnalysable(shaped.diagnostics[0].message)
    return full, propagate(full, shaped.shapes)


def real_shapes(program: Program, env: dict[str, int], reduced: dict[str, tuple[int, ...]]
                ) -> dict[str, tuple[int, ...]]:
    """Global shapes at the declared sizes (what the cost model charges), else the reduced ones."""
    declared = bound_env(program)
    if declared is None or declared == env:
        return reduced
    shaped = infer_shapes(instantiate(program, declared))
    return reduced if shaped.diagnostics else shaped.shapes


def dtypes_of(program: Program) -> dict[str, str]:
    dtypes = {spec.name: spec.dtype for spec in program.inputs}
    for op in program.ops:
        if op.attr("dtype") is not None:
            kind = str(op.attr("dtype"))
        elif op.kind in COMPARISONS:
            kind = "bool"
        elif op.kind in ("rank", "world_size"):
            kind = "i64"
        elif op.kind in ("embedding", "vocab_parallel_embedding") and len(op.args) > 1:
            kind = dtypes.get(op.args[1], "f32")
        else:
            kind = next((dtypes[a] for a in op.args if a in dtypes and dtypes[a] != "bool"), "f32")
        for name in op.results:
            dtypes[name] = kind
    return dtypes


# --- symptoms --------------------------------------------------------------------------------

def _rejections(analysis: Analysis, index: int) -> list[Symptom]:
    """Which operands, on which mesh dims, the op's rule refuses (re-run per mesh dim)."""
    program = analysis.checked
    op = program.ops[index]
    rule = get_rule(op.kind)
    found = []
    for position, (mesh_dim, size) in enumerate(program.mesh.dims):
        inputs = [analysis.placements[a][position] for a in op.args]
        ctx = PlacementContext(mesh_dim, size, tuple(analysis.shapes[a] for a in op.args), op.attrs, op.kind)
        try:
            rule.placement(inputs, ctx)
            continue
        except PlacementError:
            pass
        except Exception:  # noqa: BLE001 - a rule that cannot judge names no operand
            continue
        offenders = [k for k, p in enumerate(inputs) if isinstance(p, Partial)]
        offenders += [k for k, p in enumerate(inputs) if isinstance(p, Shard)]
        offenders += [k for k, p in enumerate(inputs) if isinstance(p, Replicate)][:1] if not offenders else []
        for k in offenders:
            found.append(Symptom(REJECTED, index, mesh_dim, k, inputs[k], None, op.span.line))
    return found


def placement_symptoms(analysis: Analysis) -> list[Symptom]:
    """Forward symptoms (the ops a fix can edit); backward findings show up in the screen."""
    symptoms: list[Symptom] = []
    seen: set[int] = set()
    for problem in analysis.placement.problems:
        if problem.output is not None:
            symptoms.extend(_output_symptoms(analysis, problem.output))
        elif problem.op_index is not None and problem.op_index not in seen:
            seen.add(problem.op_index)
            symptoms.extend(_rejections(analysis, problem.op_index))
    return symptoms


def _output_symptoms(analysis: Analysis, name: str) -> list[Symptom]:
    program = analysis.checked
    out = next(o for o in program.outputs if o.name == name)
    have_all = analysis.placements.get(name)
    producer = analysis.producer(name)
    found = []
    for position, mesh_dim in enumerate(program.mesh.names):
        have = have_all[position]
        want = out.placements[position] if out.placements else Replicate()
        if isinstance(have, Varying) or have == want:
            continue
        line = program.ops[producer].span.line if producer is not None else out.span.line
        found.append(Symptom(OUTPUT, producer, mesh_dim, None, have, want, line, name))
    return found


def async_symptoms(program: Program) -> list[Symptom]:
    """Reads of an async collective's operand or result before its wait; handles never waited."""
    found = []
    for index, op in enumerate(program.ops):
        handle = op.attr("handle")
        if handle is None or op.kind == "wait":
            continue
        wait = next((j for j in range(index + 1, len(program.ops))
                     if program.ops[j].kind == "wait" and program.ops[j].attr("handle") == handle), None)
        buffers = set(op.args) | set(op.results)
        end = wait if wait is not None else len(program.ops)
        reader = next((j for j in range(index + 1, end) if buffers & set(program.ops[j].args)), None)
        if wait is None:
            found.append(Symptom(UNWAITED, reader if reader is not None else len(program.ops), issuer=index,
                                 line=op.span.line))
        elif reader is not None:
            found.append(Symptom(EARLY_READ, reader, line=program.ops[reader].span.line, issuer=index, wait=wait))
    return found


def divergence_symptoms(program: Program, lines: set[int]) -> list[Symptom]:
    """Ops on the blamed lines, for diagnostics no placement rule explains (scaling, offsets)."""
    return [Symptom(DIVERGENCE, index, line=op.span.line) for index, op in enumerate(program.ops)
            if op.span.line in lines]


def symptoms_of(analysis: Analysis, blamed_lines: set[int] | None = None) -> list[Symptom]:
    """All symptoms; with ``blamed_lines`` (from the report) those on these lines come first."""
    found = placement_symptoms(analysis) + async_symptoms(analysis.checked)
    if not found and blamed_lines:
        found = divergence_symptoms(analysis.checked, blamed_lines)
    if blamed_lines:
        found.sort(key=lambda s: s.line not in blamed_lines)
    return found
