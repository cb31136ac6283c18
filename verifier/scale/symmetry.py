"""Rank symmetry: which ranks run the same program, and the programs where they do not.

A segment's program runs on every rank of the plan's mesh.  Ranks that differ only in a
coordinate the program never reads run the *same* op list (on their own data), so one
proof covers all of them.  A program reads a coordinate only through ``when=`` predicates,
``rank(mesh_dim=...)`` and ``peer=`` expressions; collectives and ``world_size`` over a dim
are not reads of a coordinate, and only happen over the segment's own mesh dims.

For the outer dims a program does read (dims of the plan's mesh outside the segment's
mesh, e.g. ``when="not (dp == 3)"`` in a tensor-parallel block), ``specialise`` evaluates
the predicates for every combination of those coordinates (only the dims read, so at
most a few hundred combinations) and groups the combinations by outcome: each group is a
*coordinate class* of ranks running one specialised program — an op whose predicate is
true there loses its ``when=``, an op whose predicate is false is removed and its results
alias its first argument (the IR's semantics of a skipped op), ``rank()`` of an outer dim
becomes a constant.  A predicate that also reads an inner coordinate keeps its inner part
(``when="dp == 3 and tp == 0"`` on ``dp=3`` becomes ``when="3 == 3 and tp == 0"``): the
check of the class runs every rank of the segment's own mesh anyway.
"""
from __future__ import annotations

import ast
import itertools
from dataclasses import dataclass, replace

from ..ir import Mesh, Op, Program
from ..temporal.expr import ExprError, evaluate


class SymmetryError(ValueError):
    """A segment that uses an outer mesh dim in a way symmetry cannot split (a collective)."""


@dataclass(frozen=True)
class CoordinateClass:
    """Values of the outer dims a program reads, for the ranks of one class."""

    dims: tuple[str, ...] = ()
    sizes: tuple[int, ...] = ()
    members: tuple[tuple[int, ...], ...] = ((),)
    changes: tuple[str, ...] = ()   # what specialisation did to the program on these ranks

    @property
    def everywhere(self) -> bool:
        return not self.dims

    def describe(self) -> str:
        if self.everywhere:
            return "every rank"
        total = 1
        for size in self.sizes:
            total *= size
        if len(self.members) <= 4:
            return " or ".join(", ".join(f"{d}={v}" for d, v in zip(self.dims, m)) for m in self.members)
        return f"{len(self.members)} of the {total} coordinates of {'x'.join(self.dims)}"

    def to_json(self) -> dict[str, object]:
        return {"dims": list(self.dims), "members": [list(m) for m in self.members[:16]],
                "count": len(self.members)}


EVERYWHERE = CoordinateClass()


def _names(expression: str) -> set[str]:
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError:
        return set()
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}


def outer_reads(program: Program, plan_mesh: Mesh) -> tuple[str, ...]:
    """Outer dims (plan mesh, not the program's) whose coordinate the program reads."""
    inner = set(program.mesh.names)
    outer = [name for name in plan_mesh.names if name not in inner]
    read: set[str] = set()
    for op in program.ops + program.backward_ops:
        mesh_dim = op.attrs.get("mesh_dim")
        if mesh_dim in outer and op.kind != "rank":
            raise SymmetryError(f"{op.kind} (line {op.span.line}) runs over mesh dim {mesh_dim!r}, which is not in "
                                f"the block's mesh {program.mesh}")
        if op.kind == "rank" and mesh_dim in outer:
            read.add(mesh_dim)
        for key in ("when", "peer"):
            if isinstance(op.attrs.get(key), str):
                names = _names(op.attrs[key])
                read |= names & set(outer)
                sizes = {n[:-len("_size")] for n in names if n.endswith("_size")} & set(outer)
                read |= sizes  # a size is not a coordinate, but keep the program on the safe side
    return tuple(name for name in plan_mesh.names if name in read)


def _substitute(expression: str, values: dict[str, int]) -> str:
    class Replace(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            return ast.Constant(values[node.id]) if node.id in values else node

    return ast.unparse(Replace().visit(ast.parse(expression, mode="eval")))


def _decide(expression: str, values: dict[str, int]) -> bool | str:
    text = _substitute(expression, values)
    try:
        return bool(evaluate(text, {}))
    except ExprError:
        return text  # still reads an inner coordinate


def specialise(program: Program, plan_mesh: Mesh) -> list[tuple[CoordinateClass, Program]]:
    """The coordinate classes of ``program`` on ``plan_mesh`` and the program each runs."""
    read = outer_reads(program, plan_mesh)
    if not read:
        return [(EVERYWHERE, program)]
    dim_sizes = tuple(plan_mesh.size(name) for name in read)
    sizes = {f"{name}_size": size for name, size in plan_mesh.dims}
    groups: dict[tuple, list[tuple[int, ...]]] = {}
    for coords in itertools.product(*(range(size) for size in dim_sizes)):
        values = {**sizes, **dict(zip(read, coords))}
        decisions = tuple(_decide(op.attrs["when"], values) if isinstance(op.attrs.get("when"), str) else None
                          for op in program.ops + program.backward_ops)
        ranks = tuple(coords[read.index(op.attrs["mesh_dim"])] if op.kind == "rank" and op.attrs.get("mesh_dim")
                      in read else None for op in program.ops + program.backward_ops)
        groups.setdefault((decisions, ranks), []).append(coords)
    classes = []
    for (decisions, ranks), members in groups.items():
        specialised, changes = _apply(program, decisions, ranks)
        classes.append((CoordinateClass(read, dim_sizes, tuple(members), tuple(changes)), specialised))
    return classes


def _apply(program: Program, decisions: tuple, ranks: tuple) -> tuple[Program, list[str]]:
    alias: dict[str, str] = {}
    forward, backward, changes = [], [], []
    count = len(program.ops)
    for index, op in enumerate(program.ops + program.backward_ops):
        op = replace(op, args=tuple(alias.get(a, a) for a in op.args))
        decision, rank = decisions[index], ranks[index]
        if rank is not None:
            changes.append(f"line {op.span.line}: rank(mesh_dim={op.attrs['mesh_dim']}) is {rank} here")
            op = Op(op.results, "const", (), {"value": rank, "dtype": "i64"}, op.span)
        elif decision is True:
            op = replace(op, attrs={k: v for k, v in op.attrs.items() if k != "when"})
        elif decision is False and op.args:
            changes.append(f"line {op.span.line}: {op.kind} -> {', '.join(op.results)} does not run here "
                           f"(when=\"{op.attrs['when']}\")")
            alias.update({result: op.args[0] for result in op.results})
            continue
        elif isinstance(decision, str) or decision is False:
            op = replace(op, attrs={**op.attrs, "when": decision if isinstance(decision, str) else "0 == 1"})
        (forward if index < count else backward).append(op)
    outputs = tuple(replace(o, name=alias.get(o.name, o.name)) for o in program.outputs)
    gradients = tuple(replace(g, value=alias.get(g.value, g.value)) for g in program.gradients)
    return replace(program, ops=tuple(forward), backward_ops=tuple(backward), outputs=outputs,
                   gradients=gradients), changes
