"""Real sizes for the shape checks, reduced sizes for the proofs.

A block's dims are symbols bound to the model's real sizes.  At the real sizes we prove
that every sharded dim divides evenly (``verifier/shapes.prove_divisibility``) and infer
every value's shape (so a dim confused with another one of the same reduced extent is
still a shape error); both are arithmetic on a few integers.  The equivalence proof runs on
reduced sizes: the smallest values that keep every shard non-empty and divisible and
every ratio exact (the TrainVerify argument written down in ``verifier/shapes.py``), at
least 2 where possible, and distinct among the symbols of one input's shape.

``verifier/shapes.reduced_env`` additionally keeps *all* symbols pairwise distinct.  For a
Llama attention block on ``tp=8`` that pushes the head counts and the sequence from 8/16/8
to 16/32/16, and the proof from 4 s to 40 s; since shapes are checked at the real sizes,
distinctness within a tensor is what remains useful.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

import z3

from ..ir import Program, dim_symbols, eval_dim
from ..report import ERROR, Diagnostic
from ..shapes import (ShapeProblem, _exactness, _expression_dims, _parse_requirement, bound_env, instantiate,
                      mesh_size_names, prove_divisibility, shard_factors)
from ..wellformed import infer_shapes


def reduced_sizes(program: Program) -> dict[str, int]:
    """Smallest sizes for the proof (module docstring); raises ``ShapeProblem`` if none exist.

    Z3's optimizer gives the starting point, a descent on plain integers makes it minimal:
    the constraints have products of symbols (``NH*D % 8 == 0``), where ``Optimize`` is
    incomplete and now and then answers with a feasible but far from minimal model
    (``H=91, D=94``) depending on earlier solver activity in the process.
    """
    if not program.dims:
        return {}
    names = list(program.dims)
    for tier in (_Tier(program, "all"), _Tier(program, "two"), _Tier(program, "none")):
        start = _optimizer_start(names, tier)
        if start is None:
            declared = bound_env(program)
            start = declared if declared is not None and tier.holds(declared) else None
        if start is not None:
            return _descend(names, start, tier)
    raise ShapeProblem("the dim constraints cannot all hold: " + "; ".join(program.requires))


@dataclass(frozen=True)
class _Tier:
    """One level of wishes on top of the hard constraints: "all", "two" (every symbol >= 2) or "none"."""

    program: Program
    soft: str

    @property
    def symbolic(self) -> list:
        return _build(self.program, {name: z3.Int(name) for name in self.program.dims}, self.soft)

    def holds(self, values: dict[str, int]) -> bool:
        try:
            return all(bool(c) for c in _build(self.program, values, self.soft))
        except ZeroDivisionError:
            return False


def _build(program: Program, env: dict, soft: str) -> list:
    """Constraints over ``env`` (Z3 terms or ints): the hard ones, then the tier's wishes."""
    full = {**env, **mesh_size_names(program)}
    out = [env[name] >= 1 for name in program.dims]
    out += [_parse_requirement(r, env) for r in program.requires]
    out += [eval_dim(dim, env) % factor == 0 for _, dim, factor, _ in shard_factors(program)]
    expressions = sorted(set(_expression_dims(program)), key=str)
    for expression in expressions:
        out += _exactness(expression, full)
        out.append(eval_dim(expression, full) >= 1)
    if soft in ("all", "two"):
        out += [env[name] >= 2 for name in program.dims]
    if soft == "all":
        out += [eval_dim(e, full) >= 2 for e in expressions
                if isinstance(e, str) and not any(s.endswith("_size") for s in dim_symbols(e))]
        for spec in program.inputs:
            symbols = sorted({s for d in spec.shape if isinstance(d, str) for s in dim_symbols(d)} & set(env))
            out += [env[a] != env[b] for a, b in itertools.combinations(symbols, 2)]
    return out


def _optimizer_start(names: list[str], tier: _Tier) -> dict[str, int] | None:
    optimizer = z3.Optimize()
    optimizer.set("timeout", 10_000)
    optimizer.add(*tier.symbolic)
    optimizer.minimize(z3.Sum([z3.Int(name) for name in names]))
    if optimizer.check() != z3.sat:
        return None
    model = optimizer.model()
    return {name: model.eval(z3.Int(name), model_completion=True).as_long() for name in names}


def _descend(names: list[str], values: dict[str, int], tier: _Tier) -> dict[str, int]:
    """Lower one symbol at a time to its smallest value that keeps every constraint, until none moves."""
    values = dict(values)
    moved = True
    while moved:
        moved = False
        for name in names:
            for value in range(1, values[name]):
                candidate = {**values, name: value}
                if tier.holds(candidate):
                    values, moved = candidate, True
                    break
    return values


def real_size_diagnostics(program: Program) -> list[Diagnostic]:
    """Divisibility proofs and shape inference at the declared (real) sizes."""
    try:
        problems = prove_divisibility(program)
    except ShapeProblem as problem:
        return [Diagnostic("well-formed", ERROR, str(problem), problem.line)]
    diagnostics = [Diagnostic("well-formed", ERROR, str(p), p.line) for p in problems]
    declared = bound_env(program)
    if declared is not None:
        # bound dims contradicting a requirement would make the proofs above vacuous
        for requirement in program.requires:
            if not _parse_requirement(requirement, declared):
                diagnostics.append(Diagnostic("well-formed", ERROR, f"requirement {requirement} does not hold at the "
                                                                    f"real sizes ({_values(requirement, declared)})"))
    if declared is not None and not diagnostics:
        shapes = infer_shapes(instantiate(program, declared))
        diagnostics += [replace(d, message=f"at the real sizes: {d.message}") for d in shapes.diagnostics]
    return diagnostics


def at_sizes(program: Program, sizes: dict[str, int]) -> Program:
    """``program`` with every dim expression evaluated: the program the proof runs on (its
    requirements hold there by construction of ``sizes``)."""
    return replace(instantiate(program, sizes), dims={}, requires=()) if sizes else program


def _values(expression: str, env: dict[str, int]) -> str:
    return ", ".join(f"{name}={env[name]}" for name in sorted(dim_symbols(expression.split("==")[0])) if name in env)
