"""Check 2 — placements: propagate each value's placement on every mesh dim.

Op rules are written for one mesh dim; this module applies them to each dim of the mesh
independently (the expansion DTensor does for its op strategies).  A rule that rejects its
inputs yields a diagnostic and ``V`` (unknown) for the result, so one mistake is reported
once rather than at every downstream op.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .ir import Program
from .placements import Partial, Placement, Replicate, Shard, V, Varying
from .registry import PlacementContext, PlacementError, get_rule
from .report import ERROR, Diagnostic

CHECK = "placement"


@dataclass
class PlacementProblem:
    diagnostic: Diagnostic
    op_index: int | None = None  # the op whose rule failed, or the producer of a wrong output
    output: str | None = None


@dataclass
class PlacementResult:
    placements: dict[str, tuple[Placement, ...]] = field(default_factory=dict)
    producers: dict[str, int] = field(default_factory=dict)  # value -> index of the op that made it
    problems: list[PlacementProblem] = field(default_factory=list)

    @property
    def diagnostics(self) -> list[Diagnostic]:
        return [problem.diagnostic for problem in self.problems]


def propagate(program: Program, shapes: dict[str, tuple[int, ...]]) -> PlacementResult:
    result = PlacementResult()
    mesh = program.mesh
    for spec in program.inputs:
        result.placements[spec.name] = spec.placements or tuple(Replicate() for _ in mesh.names)
    for index, op in enumerate(program.ops):
        rule = get_rule(op.kind)
        per_dim: list[list[Placement]] = []
        for position, (mesh_dim, size) in enumerate(mesh.dims):
            inputs = [result.placements[a][position] for a in op.args]
            ctx = PlacementContext(mesh_dim, size, tuple(shapes[a] for a in op.args), op.attrs, op.kind)
            if op.attr("when") is not None:
                outputs = [V] * len(op.results)  # control flow on rank: the temporal check judges it
            else:
                try:
                    outputs = list(rule.placement(inputs, ctx))
                except PlacementError as problem:
                    result.problems.append(PlacementProblem(Diagnostic(CHECK, ERROR, str(problem), op.span.line),
                                                            index))
                    outputs = [V] * len(op.results)
            per_dim.append(outputs + [V] * (len(op.results) - len(outputs)))
        for k, name in enumerate(op.results):
            result.placements[name] = tuple(per_dim[d][k] for d in range(len(mesh.dims)))
            result.producers[name] = index
    result.problems.extend(check_outputs(program, result))
    return result


def check_outputs(program: Program, result: PlacementResult) -> list[PlacementProblem]:
    problems = []
    for out in program.outputs:
        actual = result.placements.get(out.name)
        if actual is None:
            continue
        for mesh_dim, have, want in zip(program.mesh.names, actual, out.placements or (Replicate(),) * len(actual)):
            if isinstance(have, Varying) or have == want:
                continue
            producer = result.producers.get(out.name)
            line = program.ops[producer].span.line if producer is not None else out.span.line
            diagnostic = Diagnostic(CHECK, ERROR, _output_message(out.name, mesh_dim, have, want),
                                    line if line is not None else out.span.line,
                                    hint=_output_hint(have, want, mesh_dim))
            problems.append(PlacementProblem(diagnostic, producer, out.name))
    return problems


def _output_message(name: str, mesh_dim: str, have: Placement, want: Placement) -> str:
    if isinstance(have, Partial):
        return (f"output {name} is still a partial {have.op} over {mesh_dim} (expected {want}): its partial values "
                f"are never reduced")
    if isinstance(have, Shard):
        return f"output {name} is sharded along dim {have.dim} over {mesh_dim}, but {want} is expected"
    return f"output {name} is {have} over {mesh_dim}, but {want} is expected"


def _output_hint(have: Placement, want: Placement, mesh_dim: str) -> str | None:
    if isinstance(have, Partial) and isinstance(want, Replicate):
        return f"all_reduce(op={have.op}) over {mesh_dim} after this line"
    if isinstance(have, Partial) and isinstance(want, Shard):
        return f"reduce_scatter(dim={want.dim}, op={have.op}) over {mesh_dim} after this line"
    if isinstance(have, Shard) and isinstance(want, Replicate):
        return f"all_gather(dim={have.dim}) over {mesh_dim} after this line"
    return None
