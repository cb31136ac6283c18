"""Warp groups that each run their own loop and hand tiles over through mbarriers: the producer
runs ahead until it waits for a stage the consumer has not freed, then the consumer goes on
(``tir_lifter/schedule.py``), one schedule the barriers allow, which the ordering checks make
every schedule's.  A double-buffered copy is verified; a wrong value is a violation at its line;
a wait on the wrong parity, a missing arrival (no group can go on) and a read of the stage the
producer fills next are ``unsupported`` with the reason, never verified.
"""
from __future__ import annotations

import pytest
from lifter_helpers import lift_files, line_of

PIPE = '''
import torch
import tilelang
import tilelang.language as T


@tilelang.jit
def pipe(A, block_M, dtype=T.float32):
    M, N = T.const("M, N")
    A: T.Tensor((M, N), dtype)
    C = T.empty((M, N), dtype)
    with T.Kernel(1, threads=256) as bx:
        S = T.alloc_shared((2, block_M, N), dtype)
        full = T.alloc_barrier([128] * 2)
        empty = T.alloc_barrier([128] * 2)
        tx = T.get_thread_binding()
        if tx < 128:
            for k in T.serial(T.ceildiv(M, block_M)):
                T.mbarrier_wait_parity(empty[k % 2], ((k // 2) & 1) ^ 1)
                T.copy(A[k * block_M:(k + 1) * block_M, :], S[k % 2, :, :])
                T.mbarrier_arrive(full[k % 2])
        else:
            for k in T.serial(T.ceildiv(M, block_M)):
                T.mbarrier_wait_parity(full[k % 2], (k // 2) & 1)
                for i, j in T.Parallel(block_M, N):
                    C[k * block_M + i, j] = S[k % 2, i, j] * 2
                T.mbarrier_arrive(empty[k % 2])
    return C


a = torch.randn(64, 8, device="cuda")
c = pipe(a, 8)
torch.testing.assert_close(c, a * 2)
'''


def _mutate(before: str, after: str) -> str:
    assert before in PIPE, before
    return PIPE.replace(before, after, 1)


FILES = {
    "pipe.py": PIPE,
    "pipe_value.py": _mutate("S[k % 2, i, j] * 2", "S[k % 2, i, j] * 3"),
    "pipe_parity.py": _mutate("T.mbarrier_wait_parity(full[k % 2], (k // 2) & 1)",
                              "T.mbarrier_wait_parity(full[k % 2], ((k // 2) & 1) ^ 1)"),
    "pipe_no_free.py": _mutate("                T.mbarrier_arrive(empty[k % 2])\n", ""),
    "pipe_next_stage.py": _mutate("S[k % 2, i, j] * 2", "S[(k + 1) % 2, i, j] * 2"),
}
REASONS = {
    "pipe_parity.py": "wait for phase parity",
    "pipe_no_free.py": "no warp group can go on to complete it",
    "pipe_next_stage.py": "no barrier orders the two",
}


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    pytest.importorskip("tilelang")
    folder = tmp_path_factory.mktemp("group_schedule")
    return folder, lift_files(folder, FILES)


def _messages(report) -> list[str]:
    return [d.message for d in report.diagnostics]


@pytest.mark.tilelang
def test_a_producer_running_ahead_of_its_consumer_is_verified(reports):
    report = reports[1]["pipe.py"]
    assert report.verdict == "verified", _messages(report)


@pytest.mark.tilelang
def test_a_wrong_value_in_the_consumer_is_a_violation_at_its_line(reports):
    folder, found = reports
    report = found["pipe_value.py"]
    assert report.verdict == "violations", _messages(report)
    wrong = [d for d in report.diagnostics if d.check == "spec" and d.counterexample and d.counterexample.confirmed]
    assert line_of(str(folder / "pipe_value.py"), "* 3") in {d.line for d in wrong}, \
        [(d.line, d.message) for d in report.diagnostics]


@pytest.mark.tilelang
@pytest.mark.parametrize("name", sorted(REASONS))
def test_a_broken_hand_over_is_never_verified(reports, name):
    report = reports[1][name]
    assert report.verdict == "unsupported", _messages(report)
    assert any(REASONS[name] in message for message in _messages(report)), _messages(report)
