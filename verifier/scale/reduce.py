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
from dataclasses import replace

import z3

from ..ir import Program, dim_symbols, eval_dim
from ..report import ERROR, Diagnostic
from ..shapes import (ShapeProblem, _exactness, _expression_dims, _parse_requirement, bound_env, instantiate,
                      mesh_size_names, prove_divisibility, shard_factors)
from ..wellformed import infer_shapes


def reduced_sizes(program: Program) -> dict[str, int]:
    """Smallest sizes for the proof (module docstring); raises ``ShapeProblem`` if none exist."""
    if not program.dims:
        return {}
    env = {name: z3.Int(name) for name in program.dims}
    full = {**env, **mesh_size_names(program)}
    hard = [symbol >= 1 for symbol in env.values()]
    hard += [_parse_requirement(r, env) for r in program.requires]
    hard += [eval_dim(dim, env) % factor == 0 for _, dim, factor, _ in shard_factors(program)]
    expressions = set(_expression_dims(program))
    for expression in expressions:
        hard += _exactness(expression, full)
        hard.append(eval_dim(expression, full) >= 1)
    at_least_two = [symbol >= 2 for symbol in env.values()]
    ratios = [eval_dim(e, full) >= 2 for e in expressions
              if isinstance(e, str) and not any(s.endswith("_size") for s in dim_symbols(e))]
    distinct = []
    for spec in program.inputs:
        symbols = sorted({s for d in spec.shape if isinstance(d, str) for s in dim_symbols(d)} & set(env))
        distinct += [env[a] != env[b] for a, b in itertools.combinations(symbols, 2)]
    for soft in (at_least_two + ratios + distinct, at_least_two, []):
        optimizer = z3.Optimize()
        optimizer.add(*hard, *soft)
        optimizer.minimize(z3.Sum(list(env.values())))
        if optimizer.check() == z3.sat:
            model = optimizer.model()
            return {name: model.eval(symbol, model_completion=True).as_long() for name, symbol in env.items()}
    raise ShapeProblem("the dim constraints cannot all hold: " + "; ".join(program.requires))


def real_size_diagnostics(program: Program) -> list[Diagnostic]:
    """Divisibility proofs and shape inference at the declared (real) sizes."""
    try:
        problems = prove_divisibility(program)
    except ShapeProblem as problem:
        return [Diagnostic("well-formed", ERROR, str(problem), problem.line)]
    diagnostics = [Diagnostic("well-formed", ERROR, str(p), p.line) for p in problems]
    declared = bound_env(program)
    if declared is not None and not diagnostics:
        shapes = infer_shapes(instantiate(program, declared))
        diagnostics += [replace(d, message=f"at the real sizes: {d.message}") for d in shapes.diagnostics]
    return diagnostics


def at_sizes(program: Program, sizes: dict[str, int]) -> Program:
    """``program`` with every dim expression evaluated: the program the proof runs on."""
    return replace(instantiate(program, sizes), dims={}) if sizes else program
