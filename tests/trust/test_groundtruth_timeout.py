"""The mutation and repair campaigns' ground-truth runs (benchmarks/mutants/forked.py) time out on
CPU seconds, not on the wall clock: a loaded machine must not turn a slow run into a "hang" (the
repair campaign once counted four fixes real ranks confirm as refuted that way)."""
from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "tests"))

from mutants import forked  # noqa: E402


class _Clock:
    """Fake wall clock, per-rank CPU readings and main-thread states for ``Run._stuck``."""

    def __init__(self, monkeypatch, ranks=(0, 1)):
        self.now = 100.0
        self.cpu = {1000 + r: 0.0 for r in ranks}
        self.runnable = False
        monkeypatch.setattr(forked, "cpu_seconds_of", lambda pid: self.cpu[pid])
        monkeypatch.setattr(forked, "is_runnable", lambda pid: self.runnable)
        run = forked.Run.__new__(forked.Run)
        run.timeout = 2.0
        run.alive = {r: 1000 + r for r in ranks}
        run.started = run.window_start = run.checked = self.now
        run.cpu = {r: 0.0 for r in ranks}
        run.window_cpu, run.window_busy = dict(run.cpu), False
        self.run = run

    def advance(self, seconds: float, cpu_each: float, runnable: bool | None = None) -> bool:
        """``seconds`` of wall time in steps of 0.5 s, each rank using ``cpu_each`` per step; its main
        thread runnable (by default: when it uses CPU)."""
        self.runnable = cpu_each > 0 if runnable is None else runnable
        stuck = False
        for _ in range(int(seconds / 0.5)):
            self.now += 0.5
            for pid in self.cpu:
                self.cpu[pid] += cpu_each
            stuck = stuck or self.run._stuck(self.now)
        return stuck


def test_slow_run_on_a_loaded_machine_is_not_a_hang(monkeypatch):
    clock = _Clock(monkeypatch)
    # 10 wall seconds (five times the budget) at 2 % of a core each: starved, not stuck
    assert not clock.advance(10.0, 0.01)


def test_run_past_its_cpu_budget_is_stuck(monkeypatch):
    clock = _Clock(monkeypatch)
    assert clock.advance(3.0, 0.5)


def test_run_whose_ranks_use_no_cpu_after_the_budget_is_a_hang(monkeypatch):
    clock = _Clock(monkeypatch)
    assert not clock.advance(1.0, 0.1)          # started, then every rank waits
    assert not clock.advance(forked._STALL, 0.0)  # idle, but not yet past the budget on the wall
    assert clock.advance(forked._STALL + 1.0, 0.0)


def test_hung_gloo_ranks_background_ticks_do_not_hide_the_hang(monkeypatch):
    clock = _Clock(monkeypatch)
    # measured: a rank hung in gloo's recv uses one clock tick (0.01 CPU s) every 3-4 s alone, more
    # beside a test suite (its background threads), while its main thread sleeps
    stuck = any(clock.advance(3.0, 0.05 / 6, runnable=False) for _ in range(5))
    assert stuck and clock.now - 100.0 < 4 * forked._STALL


def test_a_starved_rank_is_runnable_and_not_a_hang(monkeypatch):
    clock = _Clock(monkeypatch)
    # at load 50 on 2 cores a working rank gets little CPU but its main thread waits to run (state R)
    assert not clock.advance(14.0, 0.001, runnable=True)   # (the outer bound is at 16 s)


def test_wall_clock_outer_bound_ends_a_run_that_barely_progresses(monkeypatch):
    clock = _Clock(monkeypatch)
    assert not clock.advance(forked._WALL_FACTOR * 2.0 - 1.0, 0.005)
    assert clock.advance(2.0, 0.005)


@pytest.mark.torch
def test_real_deadlock_is_found_by_its_stall_before_the_outer_bound(monkeypatch):
    pytest.importorskip("torch")
    from groundtruth import runner as base

    from mutants import groundtruth as gt

    import torch.distributed as dist

    if dist.is_initialized():  # ranks are forked from this process: they must not inherit a group
        pytest.skip("a process group is initialised in this test process")
    gt._prepare_parent(gt.GALLERY)
    spec = base.JobSpec(str(REPO / "examples" / "models" / "dist_p2p_both_recv_first_deadlock.py"), timeout=4.0)
    # the wall clock's outer bound out of reach: only the stall (or the CPU budget) can end the run,
    # however long a loaded machine takes the ranks to reach the deadlock
    monkeypatch.setattr(forked, "_WALL_FACTOR", 1000.0)
    run = forked.Run(gt.GALLERY, spec, 2, 4.0)
    while not run.poll():
        time.sleep(0.01)
    assert run.outcome.timed_out and run.outcome.stuck_ranks == [0, 1], (run.cpu, run.outcome.seconds)
    assert max(run.cpu.values()) < 4.0   # a hang uses no CPU: the stall ended it, not the CPU budget


def _outcome(errors: dict):
    from groundtruth import runner

    out = runner._Outcome()
    out.errors = dict(errors)  # arrival order: the rank that raised first, then those stopped after it
    return out


_RAISED = "Traceback ...\nRuntimeError: aten.nll_loss_backward.default got mixed torch.Tensor and DTensor"
_STOPPED = "did not finish after a peer failed (stopped)"


def test_ranks_stopped_after_a_peer_raised_the_one_devices_exception_are_invalid_not_differing():
    # the 500-mutant campaign's one `verified` where the numbers "differ": dtensor_loss_parallel_ok.py
    # returning its DTensor loss, whose backward raises outside loss_parallel() on one device and on
    # every rank alike; under load the 4-rank run's rank 0 was stopped before it reported, and its
    # note, not rank 3's exception, was compared with the single device's
    from mutants import groundtruth as gt

    ref = _outcome({0: _RAISED})
    par = _outcome({3: _RAISED, 0: _STOPPED, 1: _STOPPED, 2: _STOPPED})
    truth = gt._classify("grad", 4, ref, par, None)
    assert truth.status == gt.INVALID, truth.reason
    # its twin: the ranks raise an exception of their own, which one device does not: they differ
    other = _outcome({2: "Traceback ...\nRuntimeError: shape '[4, 8]' is invalid", 0: _STOPPED})
    truth = gt._classify("grad", 4, ref, other, None)
    assert truth.status == gt.DIFFER and "shape" in truth.reason, truth.reason
