"""A reference the file calls with the profiler's inputs, scratch buffers included
(``ref_program(*profiler._get_inputs())`` where the kernel writes ``Partial`` before its output,
as DeepSeek MLA's AMD decoding does): a parameter the reference's code never names is given
``None``, any other stays a tensor the kernel writes, and the reference is then not the kernel's.

The right kernel is verified, its one-line mutant a confirmed violation at the mutated line; a
reference that reads the scratch buffer is not used as the spec.
"""
from __future__ import annotations

import pytest
from lifter_helpers import lift_files, line_of

from tir_lifter.reference import unread_parameters


def test_a_parameter_the_code_never_names_is_unread():
    def ref(q, scratch, out):
        out = q * 2  # stored before any load: named, so not unread
        return out
    assert unread_parameters(ref) == {"scratch"}


def test_a_parameter_read_by_a_closure_or_reachable_through_locals_is_not_unread():
    def closure(q, scratch):
        return (lambda: q + scratch)()

    def by_name(q, scratch):
        return q + locals()["scratch"]
    assert unread_parameters(closure) == set()
    assert unread_parameters(by_name) == set()


SPLIT_SUM = '''
import torch
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[2])
def split_sum(M, N, block_M=32):
    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), Partial: T.Tensor((2, M), T.float32), Y: T.Tensor((M,), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M), 2, threads=128) as (bx, half):
            tile = T.alloc_fragment((block_M, N // 2), T.float32)
            part = T.alloc_fragment((block_M,), T.float32)
            T.copy(X[bx * block_M, half * (N // 2)], tile)
            T.reduce_sum(tile, part, dim=1)
            T.copy(part, Partial[half, bx * block_M])
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            for i in T.Parallel(block_M):
                Y[bx * block_M + i] = Partial[0, bx * block_M + i] + Partial[1, bx * block_M + i]

    return main


def ref_program(x, partial):
    return x.sum(-1)


kernel = split_sum(256, 64)
profiler = kernel.get_profiler(tensor_supply_type=tilelang.TensorSupplyType.Randn)
inputs = profiler._get_inputs()
torch.testing.assert_close(kernel(*inputs), ref_program(*inputs))
'''

WRONG_LINE = "Y[bx * block_M + i] = Partial[0, bx * block_M + i] + Partial[1, bx * block_M + i]"
FILES = {
    "split_sum.py": SPLIT_SUM,
    "split_sum_first_half.py": SPLIT_SUM.replace(WRONG_LINE, "Y[bx * block_M + i] = Partial[0, bx * block_M + i]"),
    "split_sum_reads_scratch.py": SPLIT_SUM.replace("return x.sum(-1)", "return x.sum(-1) + 0 * partial[0]"),
}


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    pytest.importorskip("tilelang")
    folder = tmp_path_factory.mktemp("scratch_arguments")
    return folder, lift_files(folder, FILES)


def _messages(report) -> list[str]:
    return [d.message for d in report.diagnostics]


@pytest.mark.tilelang
def test_the_reference_given_the_scratch_buffer_it_never_reads_verifies_the_right_kernel(reports):
    report = reports[1]["split_sum.py"]
    assert report.verdict == "verified", _messages(report)
    proven = " ".join(report.proven)
    assert "Y = ref_program(X, partial=unread)" in proven
    assert "partial passed buffers the kernel writes, which ref_program never reads (given None)" in proven


@pytest.mark.tilelang
def test_the_kernel_adding_one_half_only_is_a_confirmed_violation_at_that_line(reports):
    folder, found = reports
    report = found["split_sum_first_half.py"]
    assert report.verdict == "violations", _messages(report)
    spec = [d for d in report.diagnostics if d.check == "spec"]
    assert spec and spec[0].counterexample and spec[0].counterexample.confirmed
    assert spec[0].line == line_of(str(folder / "split_sum_first_half.py"), "Y[bx * block_M + i] = Partial[0,")


@pytest.mark.tilelang
def test_a_reference_reading_the_scratch_buffer_is_not_the_kernels_spec(reports):
    report = reports[1]["split_sum_reads_scratch.py"]
    assert report.verdict == "unsupported", _messages(report)
    assert not any("ref_program" in p for p in report.proven)
