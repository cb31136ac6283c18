"""The same verdicts on an idle machine and beside 8 busy processes: budgets count solver steps
and CPU time, not wall-clock time (``verifier/budget.py``)."""
from __future__ import annotations

import contextlib
import multiprocessing
from pathlib import Path

import pytest

from verifier.budget import Budget, rlimit

ROOT = Path(__file__).resolve().parents[2]
FILES = ("megatron_sequence_parallel_block.py", "ring_attention_online_softmax.py",
         "megatron_vocab_parallel_lm_loss.py", "megatron_sp_layernorm_grad_not_reduced.py")


def _spin() -> None:
    while True:
        pass


@contextlib.contextmanager
def busy(processes: int = 8):
    ctx = multiprocessing.get_context("fork")
    spinners = [ctx.Process(target=_spin, daemon=True) for _ in range(processes)]
    for spinner in spinners:
        spinner.start()
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.join()


def _outcome(report) -> tuple:
    return report.verdict, tuple(sorted((d.check, d.line) for d in report.diagnostics if d.severity == "error")), \
        tuple(report.proven)


def test_a_solver_call_is_bounded_by_steps_not_milliseconds():
    import z3

    xs = [z3.Real(f"x{i}") for i in range(5)]
    answers = []
    for load in (contextlib.nullcontext(), busy()):
        with load:
            solver = z3.Solver()
            solver.add(sum(x * x * x for x in xs) == sum(xs) ** 3 + 1, sum(xs) == 3, *[x * x * x > 1 for x in xs])
            Budget(0.2).limit(solver)
            answers.append((str(solver.check()), solver.reason_unknown()))
    assert answers[0] == answers[1] == ("unknown", "max. resource limit exceeded")
    assert rlimit(0.2) == 200_000


@pytest.mark.torch
@pytest.mark.slow
def test_traced_verdicts_are_the_same_idle_and_under_load():
    pytest.importorskip("torch")
    from frontends.traced import TraceOptions, trace_file
    from verifier.traced_check import check_traced

    programs = {name: trace_file(ROOT / "examples" / "realworld" / name, TraceOptions(world=2)) for name in FILES}
    idle = {name: _outcome(check_traced(program, timeout_s=60)) for name, program in programs.items()}
    with busy():
        loaded = {name: _outcome(check_traced(program, timeout_s=60)) for name, program in programs.items()}
    assert loaded == idle
    assert {verdict for verdict, _, _ in idle.values()} <= {"verified", "violations"}
