"""Symbolic dims: divisibility proofs and the reduced shapes the equivalence check runs on.

Why reduced shapes are enough (the TrainVerify argument, restricted to what we model): every
op we register acts uniformly along each dim — the same formula for every index, with
collectives and shard offsets depending only on which of ``size`` equal blocks an index falls
in.  A bug that mis-routes blocks, scales by the group size, or combines the wrong partials
already shows with one element per block; a bug that confuses two dims (a transpose) shows as
long as the two dims have different extents.  So we pick the smallest values for the
symbols that keep every shard non-empty and divisible, that are at least 2, and that are
pairwise distinct where the constraints allow.  Concrete (non-symbolic) dims are kept as
written.
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import z3

from .ir import Dim, Program, dim_symbols, eval_dim, mesh_sizes, split_requirement
from .placements import Shard


class ShapeProblem(Exception):
    def __init__(self, message: str, line: int | None = None):
        self.line = line
        super().__init__(message)


def _z3_env(program: Program) -> dict[str, z3.ArithRef]:
    return {name: z3.Int(name) for name in program.dims}


def mesh_size_names(program: Program) -> dict[str, int]:
    """In dim expressions ``tp_size`` is the size of mesh dim ``tp`` (1 in the reference)."""
    return mesh_sizes(program.mesh)


def _requirements(program: Program, env: dict[str, Any]) -> list:
    constraints = [symbol >= 1 for symbol in env.values()]
    for name, value in program.dims.items():
        if value is not None:
            constraints.append(env[name] == value)
    for requirement in program.requires:
        constraints.append(_parse_requirement(requirement, env))
    return constraints


def _parse_requirement(text: str, env: dict[str, Any]):
    parts = split_requirement(text)
    if parts is None:
        raise ShapeProblem(f"expected a requirement like 'H % 8 == 0', got {text!r}")
    try:
        left, operator, right = eval_dim(parts[0], env), parts[1], eval_dim(parts[2], env)
    except (KeyError, SyntaxError, z3.Z3Exception) as problem:
        raise ShapeProblem(f"expected a requirement over declared dims with + - * / %, got {text!r}"
                           f" ({problem.__class__.__name__})") from None
    return {"==": left == right, ">=": left >= right, "<=": left <= right, ">": left > right,
            "<": left < right, "!=": left != right}[operator]


def shard_factors(program: Program) -> list[tuple[str, Dim, int, int | None]]:
    """(input name, dim, number of shards, line) for every sharded input dim."""
    out = []
    for spec in program.inputs:
        factors: dict[int, int] = {}
        for (mesh_dim, size), placement in zip(program.mesh.dims, spec.placements):
            if isinstance(placement, Shard):
                if not -len(spec.shape) <= placement.dim < len(spec.shape):
                    raise ShapeProblem(f"input {spec.name} of rank {len(spec.shape)} cannot be sharded along dim "
                                       f"{placement.dim}", spec.span.line)
                dim = placement.dim % len(spec.shape)
                factors[dim] = factors.get(dim, 1) * size
        for dim, factor in factors.items():
            out.append((spec.name, spec.shape[dim], factor, spec.span.line))
    return out


def _expression_dims(program: Program) -> list[Dim]:
    """Every dim expression in input shapes and op attributes (so divisions stay exact)."""
    found: list[Dim] = [d for spec in program.inputs for d in spec.shape if not isinstance(d, int)]
    known = set(program.dims) | set(mesh_size_names(program))
    for op in program.ops:
        for value in op.attrs.values():
            for item in value if isinstance(value, list) else [value]:
                symbols = dim_symbols_safe(item) if isinstance(item, str) else set()
                if symbols and symbols <= known and symbols & set(program.dims):
                    found.append(item)
    return found


def dim_symbols_safe(text: str) -> set[str]:
    try:
        return dim_symbols(text)
    except SyntaxError:
        return set()


def _exactness(expression: Dim, env: dict[str, Any]) -> list:
    """Constraints saying every '/' in ``expression`` divides exactly and the value is positive."""
    import ast

    constraints = []
    if isinstance(expression, int):
        return constraints
    for node in ast.walk(ast.parse(expression, mode="eval")):
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.FloorDiv)):
            constraints.append(eval_dim(ast.unparse(node.left), env) % eval_dim(ast.unparse(node.right), env) == 0)
    return constraints


def prove_divisibility(program: Program) -> list[ShapeProblem]:
    """Prove, for all symbol values allowed by the program, that each sharded dim divides evenly."""
    problems = []
    env = _z3_env(program)
    base = _requirements(program, env)
    full = {**env, **mesh_size_names(program)}
    exactness = [c for d in set(_expression_dims(program)) for c in _exactness(d, full)]
    seen: set[tuple[Dim, int]] = set()
    for name, dim, factor, line in shard_factors(program):
        try:
            value = eval_dim(dim, env)
        except KeyError as missing:
            problems.append(ShapeProblem(f"input {name} uses undeclared dim {missing.args[0]!r}", line))
            continue
        if (dim, factor) in seen:
            continue  # one proof per (dim, shard count): inputs of repeated layers share them
        seen.add((dim, factor))
        solver = z3.Solver()
        solver.add(*base, *exactness)
        solver.add(value % factor != 0)
        if solver.check() == z3.sat:
            model = solver.model()
            witness = ", ".join(f"{symbol}={model.eval(env[symbol], model_completion=True)}"
                                for symbol in sorted(dim_symbols(dim)) if symbol in env)
            problems.append(ShapeProblem(
                f"dim {dim} of input {name} is sharded {factor} ways but need not be divisible by {factor}"
                + (f" (e.g. {witness}); add 'require {dim} % {factor} == 0'" if witness else ""), line))
    return problems


def bound_env(program: Program) -> dict[str, int] | None:
    """The declared values of every symbol, or None when some symbol is free."""
    if any(value is None for value in program.dims.values()):
        return None
    return {name: int(value) for name, value in program.dims.items()}


SMALL_ENOUGH = 512  # declared shapes up to this many input elements are checked as written
PREFERENCE_ELEMENTS = 20_000  # a size preference that needs more input elements than this is dropped


def _input_elements(program: Program, values: dict[str, int]) -> int:
    return sum(math.prod(int(eval_dim(d, values)) for d in spec.shape) for spec in program.inputs)


def _derived_sizes(program: Program, env: dict[str, Any]) -> list:
    """Sizes the program computes from its symbols: a shard's extent (``S`` split ``tp`` ways is
    ``S/tp`` rows per rank) and every dim expression, at this mesh's sizes.  A bug that permutes
    rows inside a shard is invisible when the shard has one row, so these must not collapse to 1."""
    full = {**env, **mesh_size_names(program)}
    derived = []
    for _, dim, factor, _ in shard_factors(program):
        if dim_symbols_safe(dim) if isinstance(dim, str) else False:
            derived.append(eval_dim(dim, env) / factor)
    for expression in set(_expression_dims(program)):
        if isinstance(expression, str) and not (expression in env):
            derived.append(eval_dim(expression, full))
    return [term for term in derived if not any(term.eq(symbol) for symbol in env.values())]


def _size_preferences(symbols: list, derived: list) -> list[list]:
    """Soft constraints, strongest first: every size >= 2 and all pairwise distinct; then sizes
    >= 2 with distinct symbols; then only the symbols >= 2; then anything that holds."""
    at_least_two = [s >= 2 for s in symbols + derived]
    distinct_all = [z3.Distinct(*symbols, *derived)] if len(symbols) + len(derived) > 1 else []
    distinct_symbols = [z3.Distinct(*symbols)] if len(symbols) > 1 else []
    return [at_least_two + distinct_all, at_least_two + distinct_symbols, at_least_two,
            [s >= 2 for s in symbols] + distinct_symbols, [s >= 2 for s in symbols], []]


def _holds(constraints: list, env: dict[str, Any], values: dict[str, int]) -> bool:
    pairs = [(env[name], z3.IntVal(value)) for name, value in values.items()]
    return all(z3.is_true(z3.simplify(z3.substitute(c, *pairs))) for c in constraints)


def reduced_env(program: Program) -> dict[str, int]:
    """Smallest symbol values keeping shards divisible (see the module docstring).

    Every declared and derived size is at least 2 and all are pairwise distinct unless the
    program forces otherwise; small declared sizes are kept when they already have that
    property."""
    if not program.dims:
        return {}
    env = _z3_env(program)
    hard = [symbol >= 1 for symbol in env.values()]
    hard += [_parse_requirement(r, env) for r in program.requires]
    for name, dim, factor, line in shard_factors(program):
        hard.append(eval_dim(dim, env) % factor == 0)
    full = {**env, **mesh_size_names(program)}
    for expression in set(_expression_dims(program)):
        hard += _exactness(expression, full)
        hard.append(eval_dim(expression, full) >= 1)
    symbols = list(env.values())
    preferences = _size_preferences(symbols, _derived_sizes(program, env))
    declared = bound_env(program)
    if declared is not None and sum(math.prod(int(eval_dim(d, declared)) for d in spec.shape)
                                    for spec in program.inputs) <= SMALL_ENOUGH \
            and _holds(preferences[1], env, declared):
        return declared  # only the input sizes matter here: no need to instantiate every op
    for soft in preferences:
        optimizer = z3.Optimize()
        optimizer.set("timeout", 5000)
        optimizer.add(*hard, *soft)
        optimizer.minimize(z3.Sum(symbols) if len(symbols) > 1 else symbols[0])
        if optimizer.check() == z3.sat:
            model = optimizer.model()
            values = {name: model.eval(symbol, model_completion=True).as_long() for name, symbol in env.items()}
            values = _lowered(values, env, hard + soft)
            if soft and _input_elements(program, values) > PREFERENCE_ELEMENTS:
                continue  # distinctness would blow the shapes up: settle for a weaker preference
            return values
    raise ShapeProblem("the dim constraints cannot all hold: " + "; ".join(program.requires))


def _lowered(values: dict[str, int], env: dict[str, Any], constraints: list) -> dict[str, int]:
    """Lower each symbol as far as the constraints allow, one at a time.

    With products of symbols in the constraints, Optimize may stop at a valid but far from
    minimal model (H=91); a plain descent on integers makes the result small and
    independent of earlier solver activity."""
    for name in sorted(values, key=values.get, reverse=True):
        for smaller in range(1, values[name]):
            trial = {**values, name: smaller}
            if _holds(constraints, env, trial):
                values = trial
                break
    return values



def _substitute(expression: str, env: dict[str, int]) -> str:
    import ast

    class Replace(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            return ast.Constant(env[node.id]) if node.id in env else node

    return ast.unparse(Replace().visit(ast.parse(expression, mode="eval")))


def instantiate(program: Program, env: dict[str, int]) -> Program:
    """Replace every dim expression (shapes and op attributes) by its value under ``env``."""

    mesh_names = set(program.mesh.names)

    def value_of(item: Any) -> Any:
        if isinstance(item, str) and item not in mesh_names:
            symbols = dim_symbols_safe(item)
            if symbols and symbols <= set(env):
                return int(eval_dim(item, env))
            if symbols & set(env) and symbols <= set(env) | set(mesh_size_names(program)):
                return _substitute(item, env)  # e.g. "V/tp_size": the mesh part is resolved per mesh
        return item

    inputs = tuple(replace(spec, shape=tuple(int(eval_dim(d, env)) for d in spec.shape),
                           bounds=tuple(int(eval_dim(b, env)) for b in spec.bounds) if spec.bounds else None)
                   for spec in program.inputs)
    ops = tuple(replace(op, attrs={key: ([value_of(v) for v in value] if isinstance(value, list) else value_of(value))
                                   for key, value in op.attrs.items()}) for op in program.ops)
    return replace(program, inputs=inputs, ops=ops, dims={name: env[name] for name in program.dims})
