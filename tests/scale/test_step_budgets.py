"""The traced proof's cut budgets count solver steps, not the CPU seconds around them.

Which values the proof cuts decides its path: a cut that fails leaves the next values' terms a layer
deeper, and a megatron-core training step (tests/traced/cases/k9_megatron_step_ok.py) verified in
40 CPU s on an idle machine but ran out of a 900 s ``--timeout`` in a loaded test run, its 1 s cut
probe spent partly on Python work (renaming keys) that a busy machine makes slower.  Here the machine
is made as slow as can be: every reading of the process's CPU clock is 5 s later than the one before.
"""
from __future__ import annotations

import itertools

import z3

import verifier.traced_check as traced_check
from verifier.budget import Budget, rlimit, steps_used
from verifier.proof_memo import ProofMemo


def _pairs() -> list:
    """Values equal only by the solver's algebra (normal forms keep them apart as written)."""
    x, y, z = z3.Reals("x y z")
    return [(x * (y + z) + i, x * y + x * z + i) for i in range(12)]


def _slow_clock(monkeypatch) -> None:
    ticks = itertools.count()
    monkeypatch.setattr(traced_check, "clock", lambda: 5.0 * next(ticks))


def test_a_cut_is_proven_however_slow_the_work_around_the_solver_is(monkeypatch):
    _slow_clock(monkeypatch)
    equal = traced_check._EqualUnder(ProofMemo([], {"renamings_skipped": 0}), [], float("inf"))
    assert equal(_pairs())
    assert 0 < equal.spent < 1   # the steps this small proof took, in budget seconds


def test_an_obligation_batch_is_decided_however_slow_the_machine_is(monkeypatch):
    _slow_clock(monkeypatch)
    counter = {"solver_calls": 0, "steps": 0}
    disequalities = [x != y for x, y in _pairs()]
    assert traced_check._decide(disequalities, [], 1.0, counter)[0] == "proven"
    assert counter["solver_calls"] >= 1 and counter["steps"] > 0
    x, y = z3.Reals("x y")
    status, model = traced_check._decide([x * y != y * x + 1], [], 1.0, counter)
    assert status == "sat" and model is not None


def test_a_check_is_charged_its_own_steps_not_the_contexts():
    """Z3's step count adds up over the whole context: after much work elsewhere, a trivial check
    costs a budget of 1 s next to nothing (before, each charge took the context's whole count)."""
    a, b, c = z3.Reals("a b c")
    busy = z3.Solver()
    for i in range(30):
        busy.push()
        busy.add(a * b * c == i + 1, a + b > c)
        busy.check()
        busy.pop()
    assert steps_used(busy) > 5_000
    budget = Budget(1.0)
    for _ in range(50):
        solver = z3.Solver()
        budget.limit(solver)
        solver.add(a > 1)
        assert solver.check() == z3.sat
        budget.charge(solver)
    assert not budget.spent() and budget.steps > rlimit(0.9)


def test_a_check_that_does_not_count_its_steps_is_also_stopped_on_the_clock():
    """``budget.bound`` sets the step limit and a wall-clock guard far above it: a Z3 check that does
    not count its work in steps (a cut query of a loss divided by a count of tokens ran for minutes under
    a step limit worth 1 s) ends, and one that counts its steps is never near the guard."""
    import z3

    from verifier.budget import GUARD_FACTOR, GUARD_MIN_S, bound

    solver = z3.Solver()
    bound(solver, 2_000_000)
    settings = str(solver.param_descrs())   # the parameters exist on this Z3
    assert "rlimit" in settings and "timeout" in settings
    assert GUARD_FACTOR >= 10 and GUARD_MIN_S >= 10
    x, y = z3.Reals("x y")
    solver.add(x * x == 2, y == x + 1)
    assert solver.check() == z3.sat
