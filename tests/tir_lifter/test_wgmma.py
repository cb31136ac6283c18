"""Hopper's ``T.wgmma_gemm``: the same ``C (+)= A @ B`` as ``T.gemm``, run asynchronously by the
tensor core and seen by its issuing threads only once ``T.wait_wgmma(n)`` leaves at most ``n``
later ones in flight; ``T.set_max_nreg`` (a register budget) and ``T.fence_proxy_async`` (an order
the interpreter already keeps) change no value.  A kernel that
waits before it overwrites the operands or reads the accumulator is verified; a wrong
``clear_accum`` is a confirmed violation; a missing or too lax wait is ``unsupported`` with the
reason, never verified.
"""
from __future__ import annotations

import pytest
from lifter_helpers import lift_files, line_of

from tir_lifter.errors import Unsupported
from tir_lifter.sync import WarpGroups

WG_GEMM = '''
import torch
import tilelang
import tilelang.language as T


@tilelang.jit
def wg_gemm(A, B, block_M, block_N, block_K, dtype=T.float16, accum_dtype=T.float32):
    M, N, K = T.const("M, N, K")
    A: T.Tensor((M, K), dtype)
    B: T.Tensor((K, N), dtype)
    C = T.empty((M, N), dtype)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        A_shared = T.alloc_shared((block_M, block_K), dtype)
        B_shared = T.alloc_shared((block_K, block_N), dtype)
        C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
        T.set_max_nreg(240, 1)
        for ko in T.serial(T.ceildiv(K, block_K)):
            T.copy(A[by * block_M, ko * block_K], A_shared)
            T.copy(B[ko * block_K, bx * block_N], B_shared)
            T.fence_proxy_async()
            T.wgmma_gemm(A_shared, B_shared, C_local, clear_accum=ko == 0)
            T.wait_wgmma(0)
        T.copy(C_local, C[by * block_M, bx * block_N])
    return C


a = torch.randn(256, 256, device="cuda", dtype=torch.float16)
b = torch.randn(256, 256, device="cuda", dtype=torch.float16)
c = wg_gemm(a, b, 64, 64, 32)
torch.testing.assert_close(c, (a.float() @ b.float()).half(), rtol=1e-2, atol=1e-2)
'''

WAIT = "            T.wait_wgmma(0)\n"


def _mutate(before: str, after: str) -> str:
    assert before in WG_GEMM, before
    return WG_GEMM.replace(before, after, 1)


FILES = {
    "wg_gemm.py": WG_GEMM,
    # every K tile clears the accumulator: only the last tile's product is left
    "wg_gemm_clear_each.py": _mutate("clear_accum=ko == 0", "clear_accum=True"),
    # the B tile of the other block index: a wrong product, whose statement the violation names
    "wg_gemm_b_tile.py": _mutate("T.copy(B[ko * block_K, bx * block_N], B_shared)",
                                 "T.copy(B[ko * block_K, by * block_N], B_shared)"),
    # no wait: the next tile's copy overwrites what the tensor core may still read
    "wg_gemm_no_wait.py": _mutate(WAIT, ""),
    # a synchronous-looking T.gemm told not to wait (wg_wait=-1), and no wait after it
    "wg_gemm_annotated.py": _mutate("T.wgmma_gemm(A_shared, B_shared, C_local, clear_accum=ko == 0)",
                                    "T.gemm(A_shared, B_shared, C_local, clear_accum=ko == 0, "
                                    "annotations={'wg_wait': -1})").replace(WAIT, ""),
}
REASONS = {
    "wg_gemm_no_wait.py": "may still read it",
    "wg_gemm_annotated.py": "may still read it",
}


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    pytest.importorskip("tilelang")
    folder = tmp_path_factory.mktemp("wgmma")
    return folder, lift_files(folder, FILES)


def _messages(report) -> list[str]:
    return [d.message for d in report.diagnostics]


@pytest.mark.tilelang
def test_a_wgmma_gemm_waited_for_is_verified(reports):
    report = reports[1]["wg_gemm.py"]
    assert report.verdict == "verified", _messages(report)
    assert any("kernel computes C" in line for line in report.proven), report.proven


@pytest.mark.tilelang
@pytest.mark.parametrize("name, mutated", [("wg_gemm_clear_each.py", None),
                                           ("wg_gemm_b_tile.py", "by * block_N], B_shared")])
def test_a_wrong_wgmma_kernel_is_a_confirmed_violation(reports, name, mutated):
    folder, found = reports
    report = found[name]
    assert report.verdict == "violations", _messages(report)
    wrong = [d for d in report.diagnostics if d.check == "spec" and d.counterexample and d.counterexample.confirmed]
    assert wrong, _messages(report)
    if mutated is not None:
        assert line_of(str(folder / name), mutated) in {d.line for d in wrong}, [(d.line, d.message) for d in wrong]


@pytest.mark.tilelang
@pytest.mark.parametrize("name", sorted(REASONS))
def test_a_wgmma_without_its_wait_is_never_verified(reports, name):
    report = reports[1][name]
    assert report.verdict == "unsupported", _messages(report)
    assert any(REASONS[name] in message for message in _messages(report)), _messages(report)


BLOCK = (0, 128)


def _wgmma(groups: WarpGroups, operand: str = "A_shared") -> None:
    groups.async_wgmma(None)
    groups.access(operand, (0,), False, None)
    groups.access("C_local", (0,), False, None)
    groups.access("C_local", (0,), True, None)
    groups.end_async_wgmma()


def _groups() -> WarpGroups:
    groups = WarpGroups(128, {})
    groups.group = BLOCK
    return groups


def test_reading_the_accumulator_before_wait_wgmma_is_refused():
    groups = _groups()
    _wgmma(groups)
    with pytest.raises(Unsupported, match="may still write it"):
        groups.access("C_local", (0,), False, None)


def test_wait_wgmma_n_retires_all_but_the_n_latest():
    groups = _groups()
    _wgmma(groups, "A0")
    _wgmma(groups, "A1")
    groups.wgmma_wait(1, None)
    groups.access("A0", (0,), True, None)  # the first is done
    with pytest.raises(Unsupported, match="may still read it"):
        groups.access("A1", (0,), True, None)  # the second may still be in flight
    groups.wgmma_wait(0, None)
    groups.access("A1", (0,), True, None)
    groups.access("C_local", (0,), False, None)
