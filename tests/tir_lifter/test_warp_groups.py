"""Warp-specialized kernels (``T.ws``) with mbarriers and ``tma_copy``: the groups' program order
is taken as the schedule only when the barriers order every access one group makes to what
another uses; a wait on the wrong parity, a missing wait or arrival is ``unsupported`` with the
reason, never verified.  The vector-clock model is tested on its own as well.
"""
from __future__ import annotations

import pytest
from lifter_helpers import lift_files

from tir_lifter.errors import Unsupported
from tir_lifter.sync import WarpGroups

WS_GEMM = '''
import torch
import tilelang
import tilelang.language as T


@tilelang.jit
def ws_gemm(A, B, block_M, block_N, block_K, dtype=T.float16, accum_dtype=T.float32):
    M, N, K = T.const("M, N, K")
    A: T.Tensor((M, K), dtype)
    B: T.Tensor((K, N), dtype)
    C = T.empty((M, N), dtype)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
        A_shared = T.alloc_shared((block_M, block_K), dtype)
        B_shared = T.alloc_shared((block_K, block_N), dtype)
        C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
        loaded = T.alloc_barrier(arrive_count=128)
        consumed = T.alloc_barrier(arrive_count=128)
        with T.ws(1):
            T.clear(C_local)
        for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=0):
            with T.ws(0):
                T.barrier_wait(consumed, (ko + 1) % 2)
                T.tma_copy(A[by * block_M, ko * block_K], A_shared, barrier=loaded)
                T.tma_copy(B[ko * block_K, bx * block_N], B_shared, barrier=loaded)
                T.barrier_arrive(loaded)
            with T.ws(1):
                T.barrier_wait(loaded, ko % 2)
                T.gemm(A_shared, B_shared, C_local)
                T.barrier_arrive(consumed)
        with T.ws(1):
            T.copy(C_local, C[by * block_M, bx * block_N])
    return C


a = torch.randn(512, 256, device="cuda", dtype=torch.float16)
b = torch.randn(256, 512, device="cuda", dtype=torch.float16)
torch.testing.assert_close(ws_gemm(a, b, 128, 128, 64), a @ b, rtol=1e-2, atol=1e-2)
'''


def _mutate(before: str, after: str) -> str:
    assert before in WS_GEMM, before
    return WS_GEMM.replace(before, after, 1)


FILES = {
    "ws_gemm.py": WS_GEMM,
    # the A tile of the wrong block row: a value bug, found as usual
    "ws_gemm_row.py": _mutate("T.tma_copy(A[by * block_M", "T.tma_copy(A[bx * block_M"),
    # the consumer waits for the phase before the copies of this iteration land
    "ws_gemm_parity.py": _mutate("T.barrier_wait(loaded, ko % 2)", "T.barrier_wait(loaded, (ko + 1) % 2)"),
    # the producer overwrites the tiles the consumer may still be reading
    "ws_gemm_no_producer_wait.py": _mutate("                T.barrier_wait(consumed, (ko + 1) % 2)\n", ""),
    # the consumer reads the tiles while the copy engine may still write them
    "ws_gemm_no_consumer_wait.py": _mutate("                T.barrier_wait(loaded, ko % 2)\n", ""),
    # the consumer signals the wrong barrier: the producer's second wait never completes
    "ws_gemm_wrong_arrive.py": _mutate("T.barrier_arrive(consumed)", "T.barrier_arrive(loaded)"),
}
REASONS = {
    # the groups run side by side until every one waits for a phase none can complete
    "ws_gemm_parity.py": "(the kernel can hang)",
    "ws_gemm_no_producer_wait.py": "is written by a tma_copy of the threads 0..127 while",
    "ws_gemm_no_consumer_wait.py": "is read by the threads 128..255 while the copy engine of loaded[0] may still "
                                   "write it",
    "ws_gemm_wrong_arrive.py": "(the kernel can hang)",
}


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    pytest.importorskip("tilelang")
    return lift_files(tmp_path_factory.mktemp("warp_groups"), FILES)


def _messages(report) -> list[str]:
    return [d.message for d in report.diagnostics]


@pytest.mark.tilelang
def test_a_warp_specialized_gemm_ordered_by_its_barriers_is_verified(reports):
    report = reports["ws_gemm.py"]
    assert report.verdict == "verified", _messages(report)
    assert any("barriers: every on-chip element one warp group" in line for line in report.proven)


@pytest.mark.tilelang
def test_a_value_bug_in_a_warp_specialized_gemm_is_a_confirmed_violation(reports):
    report = reports["ws_gemm_row.py"]
    assert report.verdict == "violations", _messages(report)
    assert any(d.check == "spec" and d.counterexample and d.counterexample.confirmed for d in report.diagnostics)


@pytest.mark.tilelang
@pytest.mark.parametrize("name", sorted(REASONS))
def test_a_broken_barrier_protocol_is_never_verified(reports, name):
    report = reports[name]
    assert report.verdict == "unsupported", _messages(report)
    assert any(REASONS[name] in message for message in _messages(report)), _messages(report)


PRODUCER, CONSUMER = (0, 128), (128, 256)
LOADED, CONSUMED = ("bars", (0,)), ("bars", (1,))


def _groups() -> WarpGroups:
    return WarpGroups(256, {"bars": (128, 128)})


def _produce(groups: WarpGroups, iteration: int) -> None:
    groups.group = PRODUCER
    groups.wait(CONSUMED, (iteration + 1) % 2, None)
    groups.async_copy(LOADED, None)
    groups.access("tile", (0,), True, None)
    groups.end_async_copy(LOADED)
    groups.arrive(LOADED, None)


def _consume(groups: WarpGroups, iteration: int) -> None:
    groups.group = CONSUMER
    groups.wait(LOADED, iteration % 2, None)
    groups.access("tile", (0,), False, None)
    groups.arrive(CONSUMED, None)


def test_a_producer_and_consumer_alternating_through_two_barriers_are_ordered():
    groups = _groups()
    for iteration in range(4):
        _produce(groups, iteration)
        _consume(groups, iteration)
    assert len(groups.barriers[LOADED].phases) == 4 and len(groups.barriers[CONSUMED].phases) == 4


def test_a_read_of_what_the_copy_engine_writes_needs_the_barriers_phase():
    groups = _groups()
    _produce(groups, 0)
    groups.group = CONSUMER
    with pytest.raises(Unsupported, match="may still write it"):
        groups.access("tile", (0,), False, None)


def test_a_wait_another_schedule_could_see_a_later_phase_of_is_refused():
    # the consumer waits for phase 0 of LOADED; the producer then completes phase 1 without
    # waiting for the consumer: a slower consumer would see phase 1 instead
    groups = _groups()
    _produce(groups, 0)
    groups.group = CONSUMER
    groups.wait(LOADED, 0, None)
    groups.group = PRODUCER
    with pytest.raises(Unsupported, match="depends on the schedule"):
        groups.arrive(LOADED, None)


def test_more_arrivals_than_a_barriers_count_are_refused():
    groups = WarpGroups(256, {"bars": (128, 128)})
    groups.group = (0, 256)
    with pytest.raises(Unsupported, match="more than its count 128"):
        groups.arrive(LOADED, None)
