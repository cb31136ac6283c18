"""Branches on the thread index (``tx = T.get_thread_binding(); if tx < 64: ... else: ...``) are
warp groups, as ``T.ws`` makes them: each runs beside the others, ordered with them only by
barriers.  The block's own statements before and after the branches are ordered with them for
on-chip memory by the ``__syncthreads`` TileLang's ThreadSync pass puts there (TileLang's CUDA for
this kernel has one before and one after the branches).  A kernel whose halves each work on their
rows (one through shared memory the block then copies out) is verified; a wrong value in one branch is a violation at its line; two branches writing
the same shared rows are ``unsupported`` (a race), never verified.
"""
from __future__ import annotations

import pytest
from lifter_helpers import lift_files, line_of

from tir_lifter.errors import Unsupported
from tir_lifter.tvm_frontend import _one_range

SPLIT = '''
import torch
import tilelang
import tilelang.language as T


@tilelang.jit
def split_rows(A, block_M, dtype=T.float32):
    M, N = T.const("M, N")
    A: T.Tensor((M, N), dtype)
    C = T.empty((M, N), dtype)
    with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
        A_shared = T.alloc_shared((block_M, N), dtype)
        S = T.alloc_shared((block_M, N), dtype)
        T.copy(A[bx * block_M, 0], A_shared)
        tx = T.get_thread_binding()
        if tx < 64:
            for i, j in T.Parallel(block_M // 2, N):
                S[i, j] = A_shared[i, j] * 2
        else:
            for i, j in T.Parallel(block_M // 2, N):
                C[bx * block_M + block_M // 2 + i, j] = A_shared[block_M // 2 + i, j] * 2
        T.copy(S[0:block_M // 2, :], C[bx * block_M, 0])
    return C


a = torch.randn(64, 16, device="cuda")
c = split_rows(a, 16)
torch.testing.assert_close(c, a * 2)
'''
SECOND = "                C[bx * block_M + block_M // 2 + i, j] = A_shared[block_M // 2 + i, j] * 2\n"


def _mutate(before: str, after: str) -> str:
    assert before in SPLIT, before
    return SPLIT.replace(before, after, 1)


FILES = {
    "split_rows.py": SPLIT,
    # the second half is tripled
    "split_rows_value.py": _mutate(SECOND, SECOND.replace("* 2", "* 3")),
    # the second half's threads write the first half's rows too: two groups write one element
    "split_rows_race.py": _mutate(SECOND, SECOND.replace("C[bx * block_M + block_M // 2 + i, j]", "S[i, j]")),
}


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    pytest.importorskip("tilelang")
    folder = tmp_path_factory.mktemp("thread_branches")
    return folder, lift_files(folder, FILES)


def _messages(report) -> list[str]:
    return [d.message for d in report.diagnostics]


@pytest.mark.tilelang
def test_branches_on_the_thread_index_each_on_their_rows_are_verified(reports):
    report = reports[1]["split_rows.py"]
    assert report.verdict == "verified", _messages(report)
    assert any("kernel computes C" in line for line in report.proven), report.proven


@pytest.mark.tilelang
def test_a_wrong_value_in_one_branch_is_a_confirmed_violation_at_its_line(reports):
    folder, found = reports
    report = found["split_rows_value.py"]
    assert report.verdict == "violations", _messages(report)
    wrong = [d for d in report.diagnostics if d.check == "spec" and d.counterexample and d.counterexample.confirmed]
    assert wrong, _messages(report)
    assert line_of(str(folder / "split_rows_value.py"), "* 3") in {d.line for d in wrong}, \
        [(d.line, d.message) for d in wrong]


@pytest.mark.tilelang
def test_two_branches_writing_one_shared_element_are_never_verified(reports):
    report = reports[1]["split_rows_race.py"]
    assert report.verdict == "unsupported", _messages(report)
    assert any("may still write it" in message for message in _messages(report)), _messages(report)


def test_a_branch_over_two_separate_thread_ranges_is_refused():
    assert _one_range([(0, 128), (128, 256)], 128, 160) == (0, 256)
    with pytest.raises(Unsupported, match="separate thread ranges"):
        _one_range([(0, 128), (160, 256)], 128, 160)
