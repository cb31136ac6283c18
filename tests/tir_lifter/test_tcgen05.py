"""Blackwell's ``T.tcgen05_gemm``: the same ``C (+)= A @ B`` as ``T.gemm``, run asynchronously by
the tensor core and seen by the threads only through the one arrival its commit makes on
``mbar``.  A kernel that waits for that arrival before it overwrites the operands or reads the
accumulator is verified; a wrong ``clear_accum`` is a confirmed violation; a missing or wrong
wait is ``unsupported`` with the reason, never verified.
"""
from __future__ import annotations

import pytest
from lifter_helpers import lift_files

from tir_lifter.errors import Unsupported
from tir_lifter.sync import WarpGroups

TC_GEMM = '''
import torch
import tilelang
import tilelang.language as T


@tilelang.jit
def tc_gemm(A, B, block_M, block_N, block_K, dtype=T.bfloat16, accum_dtype=T.float32):
    M, N, K = T.const("M, N, K")
    A: T.Tensor((M, K), dtype)
    B: T.Tensor((N, K), dtype)
    C = T.empty((M, N), dtype)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        A_shared = T.alloc_shared((block_M, block_K), dtype)
        B_shared = T.alloc_shared((block_N, block_K), dtype)
        C_tmem = T.alloc_tmem([block_M, block_N], accum_dtype)
        done = T.alloc_barrier(1)
        C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
        for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=0):
            T.copy(A[by * block_M, ko * block_K], A_shared)
            T.copy(B[bx * block_N, ko * block_K], B_shared)
            T.tcgen05_gemm(A_shared, B_shared, C_tmem, False, True, mbar=done, clear_accum=ko == 0)
            T.mbarrier_wait_parity(done, ko % 2)
        T.copy(C_tmem, C_local)
        T.copy(C_local, C[by * block_M, bx * block_N])
    return C


a = torch.randn(512, 256, device="cuda", dtype=torch.bfloat16)
b = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16)
c = tc_gemm(a, b, 128, 128, 64)
torch.testing.assert_close(c, (a.float() @ b.float().T).to(torch.bfloat16), rtol=1e-2, atol=1e-2)
'''

WAIT = "            T.mbarrier_wait_parity(done, ko % 2)\n"


def _mutate(before: str, after: str) -> str:
    assert before in TC_GEMM, before
    return TC_GEMM.replace(before, after, 1)


FILES = {
    "tc_gemm.py": TC_GEMM,
    # every K tile clears the accumulator: only the last tile's product is left
    "tc_gemm_clear_each.py": _mutate("clear_accum=ko == 0", "clear_accum=True"),
    # the second tile clears: the first tile's product is lost
    "tc_gemm_clear_second.py": _mutate("clear_accum=ko == 0", "clear_accum=ko == 1"),
    # waits for the phase before this MMA's
    "tc_gemm_parity.py": _mutate("T.mbarrier_wait_parity(done, ko % 2)", "T.mbarrier_wait_parity(done, (ko + 1) % 2)"),
    # no wait at all: the next tile's copy overwrites what the tensor core may still read
    "tc_gemm_no_wait.py": _mutate(WAIT, ""),
    # the wait after the loop only: the same race on the operands
    "tc_gemm_wait_after.py": _mutate(WAIT, "").replace("        T.copy(C_tmem, C_local)\n",
                                                          "        T.mbarrier_wait_parity(done, 0)\n"
                                                          "        T.copy(C_tmem, C_local)\n", 1),
    # no completion barrier: the kernel cannot know when C is written
    "tc_gemm_no_mbar.py": _mutate("mbar=done, ", "mbar=None, ").replace(WAIT, ""),
}
REASONS = {
    "tc_gemm_parity.py": "wait for phase parity 1 of barrier done[0] before that phase completes",
    "tc_gemm_no_wait.py": "may still read it: no barrier orders the two",
    "tc_gemm_wait_after.py": "may still read it: no barrier orders the two",
    "tc_gemm_no_mbar.py": "a tcgen05_gemm without mbar",
}


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    pytest.importorskip("tilelang")
    return lift_files(tmp_path_factory.mktemp("tcgen05"), FILES)


def _messages(report) -> list[str]:
    return [d.message for d in report.diagnostics]


@pytest.mark.tilelang
def test_a_tcgen05_gemm_waiting_for_each_mma_is_verified(reports):
    report = reports["tc_gemm.py"]
    assert report.verdict == "verified", _messages(report)
    assert any("kernel computes C" in line for line in report.proven), report.proven


@pytest.mark.tilelang
@pytest.mark.parametrize("name", ["tc_gemm_clear_each.py", "tc_gemm_clear_second.py"])
def test_a_wrong_clear_accum_expression_is_a_confirmed_violation(reports, name):
    report = reports[name]
    assert report.verdict == "violations", _messages(report)
    assert any(d.check == "spec" and d.counterexample and d.counterexample.confirmed for d in report.diagnostics)


@pytest.mark.tilelang
@pytest.mark.parametrize("name", sorted(REASONS))
def test_a_tcgen05_gemm_without_its_wait_is_never_verified(reports, name):
    report = reports[name]
    assert report.verdict == "unsupported", _messages(report)
    assert any(REASONS[name] in message for message in _messages(report)), _messages(report)


BLOCK, DONE = (0, 128), ("done", (0,))


def _groups() -> WarpGroups:
    groups = WarpGroups(128, {"done": (1,)})
    groups.group = BLOCK
    return groups


def _mma(groups: WarpGroups) -> None:
    groups.async_mma(DONE, None)
    groups.access("A_shared", (0,), False, None)
    groups.access("C_tmem", (0,), False, None)
    groups.access("C_tmem", (0,), True, None)
    groups.end_async_mma(DONE, None)


def test_the_mma_commit_is_one_arrival_that_completes_a_phase():
    groups = _groups()
    _mma(groups)
    assert len(groups.barriers[DONE].phases) == 1


def test_overwriting_an_operand_the_tensor_core_may_still_read_is_refused():
    groups = _groups()
    _mma(groups)
    with pytest.raises(Unsupported, match="may still read it"):
        groups.access("A_shared", (0,), True, None)


def test_reading_the_accumulator_before_the_wait_is_refused():
    groups = _groups()
    _mma(groups)
    with pytest.raises(Unsupported, match="may still write it"):
        groups.access("C_tmem", (0,), False, None)


def test_after_the_wait_the_threads_see_the_mma():
    groups = _groups()
    _mma(groups)
    groups.wait(DONE, 0, None)
    groups.access("A_shared", (0,), True, None)
    groups.access("C_tmem", (0,), False, None)


def test_mmas_of_one_issue_stream_accumulate_in_order_without_a_wait():
    groups = WarpGroups(128, {"done": (1,), "other": (1,)})
    groups.group = BLOCK
    _mma(groups)
    groups.async_mma(("other", (0,)), None)
    groups.access("C_tmem", (0,), False, None)
    groups.access("C_tmem", (0,), True, None)
    groups.end_async_mma(("other", (0,)), None)
