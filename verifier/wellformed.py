"""Check 1 — well-formedness: SSA, known ops and attributes, shapes, divisibility.

Shapes are global shapes, computed with each op's shape rule on an instantiated program
(every dim an int).  Divisibility of symbolic dims is proven separately in ``shapes.py``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .ir import Program
from .placements import Partial, Varying
from .registry import ShapeError, get_rule
from .report import ERROR, Diagnostic

CHECK = "well-formed"


@dataclass
class WellFormedness:
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.diagnostics


def check_structure(program: Program) -> list[Diagnostic]:
    """SSA and op signatures; independent of dim values."""
    problems: list[Diagnostic] = []
    defined: set[str] = set()
    mesh_names = set(program.mesh.names)
    clash = mesh_names & set(program.dims)
    if clash:
        problems.append(Diagnostic(CHECK, ERROR, f"dim symbol {sorted(clash)[0]!r} has the name of a mesh dim"))
    for spec in program.inputs:
        if spec.name in defined:
            problems.append(Diagnostic(CHECK, ERROR, f"input {spec.name!r} declared twice", spec.span.line))
        defined.add(spec.name)
        if len(spec.placements) not in (0, len(program.mesh.dims)):
            problems.append(Diagnostic(CHECK, ERROR, f"input {spec.name!r} needs one placement per mesh dim",
                                       spec.span.line))
        if any(isinstance(p, Varying) for p in spec.placements):
            problems.append(Diagnostic(CHECK, ERROR, f"input {spec.name!r} is placed rank-varying (V): there is no "
                                                     f"global value to give the ranks", spec.span.line))
        for unmodelled in {p.op for p in spec.placements if isinstance(p, Partial) and p.op not in ("sum", "avg")}:
            problems.append(Diagnostic("unsupported", ERROR, f"input {spec.name!r} is a partial {unmodelled}: only "
                                                             f"sum and avg partial inputs are modelled", spec.span.line))
    for op in program.ops:
        line = op.span.line
        rule = get_rule(op.kind)
        if rule is None:
            problems.append(Diagnostic(CHECK, ERROR, f"unknown op {op.kind!r}", line))
            continue
        low, high = rule.arity
        if not low <= len(op.args) <= high:
            expected = str(low) if low == high else f"{low} to {high}"
            problems.append(Diagnostic(CHECK, ERROR, f"{op.kind} takes {expected} tensor arguments, got {len(op.args)}",
                                       line))
        for name in op.args:
            if name not in defined:
                problems.append(Diagnostic(CHECK, ERROR, f"{op.kind} reads {name!r} before it is defined", line))
        for attr in rule.required_attrs:
            if attr not in op.attrs:
                problems.append(Diagnostic(CHECK, ERROR, f"{op.kind} needs the attribute {attr}=", line))
        mesh_dim = op.attrs.get("mesh_dim")
        if mesh_dim is not None and mesh_dim not in mesh_names:
            problems.append(Diagnostic(CHECK, ERROR, f"{op.kind} runs over mesh dim {mesh_dim!r}, but the mesh has "
                                                     f"{', '.join(program.mesh.names)}", line))
        for name in op.results:
            if name in defined:
                problems.append(Diagnostic(CHECK, ERROR, f"{name!r} is assigned twice (the IR is SSA)", line))
            defined.add(name)
    inputs = {spec.name for spec in program.inputs}
    for gradient in program.gradients:
        if gradient.input not in inputs:
            problems.append(Diagnostic(CHECK, ERROR, f"grad {gradient.input!r} names no input", gradient.span.line))
    for out in program.outputs:
        if out.name not in defined:
            problems.append(Diagnostic(CHECK, ERROR, f"output {out.name!r} is never defined", out.span.line))
        if any(isinstance(p, Varying) for p in out.placements):
            problems.append(Diagnostic(CHECK, ERROR, f"output {out.name!r} is expected rank-varying (V): there is "
                                                     f"no global value to compare", out.span.line))
        if any(isinstance(p, Partial) and p.op not in ("sum", "avg", "max", "min") for p in out.placements):
            problems.append(Diagnostic(CHECK, ERROR, f"output {out.name!r} has an unknown partial op", out.span.line))
    return problems


def infer_shapes(program: Program) -> WellFormedness:
    """Global shapes of every value of an instantiated, structurally valid program."""
    result = WellFormedness()
    unit = program.mesh.unit()
    for spec in program.inputs:
        result.shapes[spec.name] = tuple(int(d) for d in spec.shape)
    for op in program.ops:
        rule = get_rule(op.kind)
        try:
            shapes = rule.shape([result.shapes[a] for a in op.args], op.attrs, unit)
        except (ShapeError, KeyError, ValueError, TypeError, IndexError) as exc:
            result.diagnostics.append(Diagnostic(CHECK, ERROR, f"{op.kind}: {_reason(exc)}", op.span.line))
            return result
        if len(shapes) != len(op.results):
            result.diagnostics.append(Diagnostic(CHECK, ERROR, f"{op.kind} produces {len(shapes)} values but "
                                                               f"{len(op.results)} names are given", op.span.line))
            return result
        for name, shape in zip(op.results, shapes):
            result.shapes[name] = tuple(shape)
        for mesh_dim, size in program.mesh.dims:
            if op.kind == "local_chunk" and op.attrs.get("mesh_dim") == mesh_dim:
                dim = int(op.attrs["dim"])
                extent = result.shapes[op.args[0]][dim]
                if extent % size:
                    result.diagnostics.append(Diagnostic(
                        CHECK, ERROR, f"dim {dim} of {op.args[0]} has {extent} elements, not divisible into {size} "
                                      f"chunks over {mesh_dim}", op.span.line))
    return result


def _reason(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"missing attribute or value {exc.args[0]!r}"
    return str(exc)
