"""Check 3 — equivalence with the same program on a mesh of size 1.

1. Concrete screening: run the parallel and the reference program with NumPy on a few random
   inputs.  A mismatch is already a counterexample checked by concrete evaluation.
2. Proof: run both with the Z3 backend in lock-step.  Whenever a value with a shard/replicate
   placement is provably equal (by normal form) to its reference, both are replaced by the same
   fresh variables (a *cut point*: sound for proving, since the fresh variables range over
   every value, including the real one), so terms stay the size of one layer.  At the outputs,
   each remaining difference goes to the solver: ``unsat`` for all = verified.
3. A ``sat`` model is turned into concrete inputs and re-checked with NumPy; only a confirmed
   difference is reported as a violation.  An unconfirmed one (possible when a non-linear op
   is abstracted as an uninterpreted function, or after a cut) makes the result inconclusive.
Localisation: under the counterexample, the first op whose result, re-assembled by its
inferred placement, differs from the reference names the line.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Callable

import numpy as np
import z3

from .budget import Budget
from .backends import NumpyBackend, Z3Backend, as_term, fresh_array, normal_form, same_term
from .distribute import NotDistributable, distribute, reassemble
from .engine import Engine, EngineError
from .ir import Program, TensorSpec
from .placements import Partial, Placement, Replicate, Shard

MAX_SYMBOLIC_ELEMENTS = 60_000
SOLVER_TIMEOUT_MS = 20_000
PROGRESS_FROM_OPS = 200  # smaller proofs finish before a progress line would help


# --- inputs -----------------------------------------------------------------------------------

def _kind(dtype: str) -> str:
    return "int" if dtype.startswith(("i", "u")) else "bool" if dtype == "bool" else "real"


def symbolic_inputs(program: Program) -> tuple[dict[str, np.ndarray], list, dict[str, Any]]:
    """Global inputs as arrays of Z3 variables, their domain constraints, and name -> variable."""
    arrays, domain, variables = {}, [], {}
    for spec in program.inputs:
        shape = tuple(int(d) for d in spec.shape)
        array = np.empty(shape, dtype=object)
        for index in np.ndindex(*shape):
            name = f"{spec.name}[{','.join(map(str, index))}]" if shape else spec.name
            kind = _kind(spec.dtype)
            var = z3.Int(name) if kind == "int" else z3.Bool(name) if kind == "bool" else z3.Real(name)
            domain += integer_domain(var, spec)
            array[index] = var
            variables[name] = var
        arrays[spec.name] = array
    return arrays, domain, variables


def integer_domain(var: Any, spec: TensorSpec) -> list:
    """Constraints on one element of an integer input: within its bounds, or one of the values it
    also takes outside them (``extra_values``: a label's padding value)."""
    if spec.bounds is None:
        return []
    inside = [var >= int(spec.bounds[0]), var < int(spec.bounds[1])]
    if not spec.extra_values:
        return inside
    return [z3.Or(z3.And(*inside), *(var == int(value) for value in spec.extra_values))]


EXTRA_VALUE_SHARE = 0.25  # of an integer input's random elements drawn from its extra values


def random_inputs(program: Program, seed: int) -> dict[str, np.ndarray]:
    return random_values(program.inputs, seed)


def random_values(specs, seed: int, kind_of: Callable[[Any], str] = lambda spec: _kind(spec.dtype)
                  ) -> dict[str, np.ndarray]:
    """Seeded values for input specs: ints within their bounds, bools, otherwise standard normal reals."""
    rng = np.random.default_rng(seed)
    out = {}
    for spec in specs:
        shape = tuple(int(d) for d in spec.shape)
        kind = kind_of(spec)
        if kind == "int":
            low, high = (int(spec.bounds[0]), int(spec.bounds[1])) if spec.bounds else (0, 4)
            values = rng.integers(low, high, size=shape)
            extras = spec.extra_values
            if extras:
                chosen = rng.random(shape) < EXTRA_VALUE_SHARE
                values = np.where(chosen, rng.choice(np.asarray(extras), size=shape), values)
            out[spec.name] = values
        elif kind == "bool":
            out[spec.name] = rng.random(shape) < 0.5
        else:
            out[spec.name] = rng.standard_normal(shape)
    return out


# --- running both programs -------------------------------------------------------------------

@dataclass
class _Run:
    reference: Engine
    parallel: Engine


def _start(program: Program, xp: Any, global_inputs: dict[str, Any], fresh: Callable) -> _Run:
    unit = program.mesh.unit()
    reference = Engine(program, unit, xp, [dict(global_inputs)])
    locals_per_rank: list[dict[str, Any]] = [dict() for _ in range(program.mesh.world)]
    for spec in program.inputs:
        pieces = distribute(global_inputs[spec.name], spec.placements, program.mesh,
                            lambda shape, tag, _n=spec.name: fresh(shape, f"{_n}@{tag}"))
        for rank, piece in enumerate(pieces):
            locals_per_rank[rank][spec.name] = piece
    return _Run(reference, Engine(program, program.mesh, xp, locals_per_rank))


def _lockstep(run: _Run, on_complete: Callable[[int], None]) -> None:
    done_ref: set[int] = set()
    done_par: set[int] = set()
    handled: set[int] = set()
    while not (run.reference.finished and run.parallel.finished):
        moved = False
        for engine, done in ((run.reference, done_ref), (run.parallel, done_par)):
            if not engine.finished:
                try:
                    moved |= engine.step()
                except EngineError as problem:
                    problem.where = "reference" if engine is run.reference else "parallel"
                    raise
                done.update(engine.completed)
        if not moved:
            stuck = run.parallel if not run.parallel.finished else run.reference
            problem = EngineError(None, "ranks cannot make progress: " + stuck.stuck_report())
            problem.where = "parallel" if stuck is run.parallel else "reference"
            raise problem
        for index in sorted((done_ref & done_par) - handled):
            handled.add(index)
            on_complete(index)


def _known(placements: tuple[Placement, ...] | None, allow_partial: bool) -> bool:
    allowed = (Shard, Replicate, Partial) if allow_partial else (Shard, Replicate)
    return placements is not None and all(isinstance(p, allowed) for p in placements)


# --- concrete ----------------------------------------------------------------------------------

def _close(a: Any, b: Any) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if a.dtype.kind == "b" or b.dtype.kind == "b":
        return bool(np.array_equal(a, b))
    return bool(np.allclose(a.astype(float), b.astype(float), rtol=1e-6, atol=1e-8, equal_nan=True))


@dataclass
class ConcreteOutcome:
    mismatch: tuple[str, tuple[int, ...], Any, list[Any], Any] | None  # output, index, reference, per-rank, got
    divergence_op: int | None
    reference: dict[str, Any]
    per_rank: list[dict[str, Any]]


def run_concrete(program: Program, placements: dict[str, tuple[Placement, ...]],
                 global_inputs: dict[str, np.ndarray], extra: dict[str, np.ndarray] | None = None,
                 seed: int = 0) -> ConcreteOutcome:
    """Evaluate with NumPy; report the first differing output element and first diverging op."""
    xp = NumpyBackend()
    rng = np.random.default_rng(seed + 1000)
    extra = extra or {}

    def fresh(shape, tag):
        return extra[tag] if tag in extra else rng.standard_normal(shape)

    run = _start(program, xp, global_inputs, fresh)
    divergence: list[int] = []

    def on_complete(index: int) -> None:
        if divergence or not program.ops[index].args:
            return  # rank/world_size/const differ from the reference by design
        for name in program.ops[index].results:
            if not _known(placements.get(name), allow_partial=True):
                continue
            try:
                value, agreements = reassemble([r.env[name] for r in run.parallel.ranks], placements[name],
                                               program.mesh, xp)
            except (NotDistributable, ValueError):
                continue
            if not _close(value, run.reference.ranks[0].env[name]) or any(not _close(a, b) for a, b, _, _ in agreements):
                divergence.append(index)
                return

    _lockstep(run, on_complete)
    reference = run.reference.ranks[0].env
    per_rank = [rank.env for rank in run.parallel.ranks]
    mismatch = None
    for out in program.outputs:
        want = reference[out.name]
        value, agreements = reassemble([env[out.name] for env in per_rank], out.placements, program.mesh, xp)
        candidates = [(value, want)] + [(a, b) for a, b, _, _ in agreements]
        for got, expected in candidates:
            got, expected = np.asarray(got), np.asarray(expected)
            if got.shape != expected.shape:
                mismatch = (out.name, (), want, [env[out.name] for env in per_rank], got)
                break
            if not _close(got, expected):
                bad = np.argwhere(~np.isclose(got.astype(float), expected.astype(float), rtol=1e-6, atol=1e-8,
                                              equal_nan=True)) if got.dtype.kind != "b" else np.argwhere(got != expected)
                index = tuple(int(i) for i in bad[0]) if len(bad) else ()
                mismatch = (out.name, index, want, [env[out.name] for env in per_rank], got)
                break
        if mismatch:
            break
    return ConcreteOutcome(mismatch, divergence[0] if divergence else None, reference, per_rank)


# --- symbolic ----------------------------------------------------------------------------------

def _provably_equal(a: Any, b: Any) -> bool:
    if not isinstance(a, z3.ExprRef) and not isinstance(b, z3.ExprRef):
        return bool(a == b)
    if isinstance(a, z3.ExprRef) and isinstance(b, z3.ExprRef) and same_term(a, b):
        return True
    a, b = as_term(a), as_term(b)
    if z3.is_bool(a) or z3.is_bool(b):
        return z3.is_true(z3.simplify(a == b))
    difference = normal_form(a - b)
    return z3.is_rational_value(difference) and difference.numerator_as_long() == 0


def _arrays_equal(a: Any, b: Any) -> bool:
    a, b = np.asarray(a, dtype=object), np.asarray(b, dtype=object)
    return a.shape == b.shape and all(_provably_equal(x, y) for x, y in zip(a.reshape(-1), b.reshape(-1)))


def _disequality(a: Any, b: Any):
    return as_term(a) != as_term(b)


def _model_value(model: z3.ModelRef, var: z3.ExprRef) -> Any:
    value = model.eval(var, model_completion=True)
    if z3.is_true(value) or z3.is_false(value):
        return z3.is_true(value)
    if z3.is_int_value(value):
        return value.as_long()
    if z3.is_rational_value(value):
        return float(Fraction(value.numerator_as_long(), value.denominator_as_long()))
    if z3.is_algebraic_value(value):
        return float(value.approx(20).as_fraction())
    return 0.0


class _OutOfTime(Exception):
    pass


def prove(program: Program, placements: dict[str, tuple[Placement, ...]],
          timeout_ms: int = SOLVER_TIMEOUT_MS, progress: Callable[[str], None] | None = None,
          budget: Budget | None = None) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """Return (status, model values for inputs and partial pieces, stats); status
    proven|sat|unknown|timeout.

    ``budget`` (``verifier.budget``: solver steps and CPU time, not wall time) is shared by the
    symbolic run and every obligation; each solver call gets at most ``timeout_ms`` worth of
    steps and what is left."""
    budget = budget or Budget(None)
    try:
        return _prove(program, placements, timeout_ms, progress, budget)
    except _OutOfTime as stopped:
        return "timeout", {}, stopped.args[0]


def _prove(program: Program, placements: dict[str, tuple[Placement, ...]], timeout_ms: int,
           progress: Callable[[str], None] | None, budget: Budget
           ) -> tuple[str, dict[str, Any], dict[str, Any]]:
    xp = Z3Backend()
    global_inputs, domain, variables = symbolic_inputs(program)
    extra_vars: dict[str, np.ndarray] = {}
    counter = [0]

    def fresh(shape, tag):
        array = np.empty(shape, dtype=object)
        for index in np.ndindex(*shape):
            array[index] = z3.Real(f"{tag}[{','.join(map(str, index))}]")
        extra_vars[tag] = array
        return array

    def cut_variables(name, shape, sample):
        """Fresh Real constants for a proven-equal value, or None where a cut would lose
        what later ops need: numerals, and Int/Bool values (indices and masks are used
        by value, e.g. in lookups and comparisons)."""
        counter[0] += 1
        flat = sample.reshape(-1)
        if not flat.size or not all(isinstance(t, z3.ArithRef) and t.is_real() and not z3.is_rational_value(t)
                                    for t in (flat[0], flat[-1])):
            return None
        return fresh_array(f"cut{counter[0]}:{name}", shape, z3.RealSort())

    run = _start(program, xp, global_inputs, fresh)
    stats = {"cuts": 0, "obligations": 0, "solver_calls": 0}

    step = max(1, len(program.ops) // 10)

    def on_complete(index: int) -> None:
        if budget.spent():
            raise _OutOfTime(stats)
        if progress is not None and len(program.ops) >= PROGRESS_FROM_OPS and index % step == step - 1:
            progress(f"equivalence: {index + 1}/{len(program.ops)} ops, {stats['cuts']} cut points")
        for name in program.ops[index].results:
            if not _known(placements.get(name), allow_partial=False):
                continue
            reference = np.asarray(run.reference.ranks[0].env[name], dtype=object)
            try:
                value, agreements = reassemble([r.env[name] for r in run.parallel.ranks], placements[name],
                                               program.mesh, xp)
            except (NotDistributable, ValueError):
                continue
            if not _arrays_equal(value, reference) or not all(_arrays_equal(a, b) for a, b, _, _ in agreements):
                continue
            cut = cut_variables(name, reference.shape, reference)
            if cut is None:
                continue
            run.reference.ranks[0].env[name] = cut
            for rank, piece in zip(run.parallel.ranks,
                                   distribute(cut, placements[name], program.mesh, lambda s, t: None)):
                rank.env[name] = piece
            stats["cuts"] += 1

    _lockstep(run, on_complete)
    reference = run.reference.ranks[0].env
    obligations = []
    for out in program.outputs:
        value, agreements = reassemble([r.env[out.name] for r in run.parallel.ranks], out.placements,
                                       program.mesh, xp)
        want = np.asarray(reference[out.name], dtype=object)
        pairs = [(value, want)] + [(a, b) for a, b, _, _ in agreements]
        for got, expected in pairs:
            got, expected = np.asarray(got, dtype=object), np.asarray(expected, dtype=object)
            if got.shape != expected.shape:
                return "sat", {}, stats
            for x, y in zip(got.reshape(-1), expected.reshape(-1)):
                if not _provably_equal(x, y):
                    obligations.append(_disequality(x, y))
    stats["obligations"] = len(obligations)
    if progress is not None and obligations:
        progress(f"equivalence: {len(obligations)} obligations for the solver")
    if not obligations:
        return "proven", {}, stats
    unknown = False
    every = max(1, len(obligations) // 10)
    for number, obligation in enumerate(obligations, 1):
        if budget.spent():
            raise _OutOfTime(stats)
        if progress is not None and len(obligations) > 1 and number % every == 0:
            progress(f"equivalence: obligation {number}/{len(obligations)}")
        solver = z3.Solver()
        budget.limit(solver, timeout_ms / 1000)
        solver.add(*domain)
        solver.add(obligation)
        stats["solver_calls"] += 1
        answer = solver.check()
        budget.charge(solver)
        if answer == z3.sat:
            model = solver.model()
            values = {name: _model_value(model, var) for name, var in variables.items()}
            for tag, array in extra_vars.items():
                values[tag] = np.vectorize(lambda v: _model_value(model, v), otypes=[float])(array) \
                    if array.size else np.zeros(array.shape)
            return "sat", values, stats
        if answer == z3.unknown:
            if budget.spent():
                raise _OutOfTime(stats)
            unknown = True
    return ("unknown" if unknown else "proven"), {}, stats


def model_to_inputs(program: Program, values: dict[str, Any]) -> dict[str, np.ndarray]:
    out = {}
    for spec in program.inputs:
        shape = tuple(int(d) for d in spec.shape)
        kind = _kind(spec.dtype)
        array = np.zeros(shape, dtype=np.int64 if kind == "int" else bool if kind == "bool" else float)
        for index in np.ndindex(*shape):
            key = f"{spec.name}[{','.join(map(str, index))}]" if shape else spec.name
            array[index] = values.get(key, 0)
        out[spec.name] = array
    return out
