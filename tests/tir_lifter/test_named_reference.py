"""A reference function named by convention (``ref_program``) that the file never calls (it only
benchmarks the kernel) and whose text the spec translator cannot read (a guard raising an error,
``einsum``): it is bound to the kernel's inputs in order, as TileLang's profiler calls a reference,
and re-run by torch at the reduced sizes.

The right kernel is verified, its one-line mutant (K's tile offset with the other tile size) a
confirmed violation at the mutated line; a reference whose binding would be a guess (a default
argument, parameters named in another order than the kernel's inputs) stays unsupported with the
translator's reason.
"""
from __future__ import annotations

import pytest
from lifter_helpers import lift_files, line_of

SCORES = 'import torch\nimport tilelang\nimport tilelang.language as T\n\n\n@tilelang.jit(out_idx=[2])\ndef scores(M, N, D, block_M=64, block_N=32):\n    @T.prim_func\n    def main(Q: T.Tensor((M, D), T.float16), K: T.Tensor((N, D), T.float16), S: T.Tensor((M, N), T.float32)):\n        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):\n            Q_shared = T.alloc_shared((block_M, D), T.float16)\n            K_shared = T.alloc_shared((block_N, D), T.float16)\n            acc = T.alloc_fragment((block_M, block_N), T.float32)\n            T.copy(Q[by * block_M, 0], Q_shared)\n            T.copy(K[bx * block_N, 0], K_shared)\n            T.clear(acc)\n            T.gemm(Q_shared, K_shared, acc, transpose_B=True)\n            T.copy(acc, S[by * block_M, bx * block_N])\n\n    return main\n\n\ndef ref_program(q, k):\n    if q.dim() != 2:\n        raise ValueError("expected 2-D queries")\n    return torch.einsum("md,nd->mn", q.float(), k.float())\n\n\nkernel = scores(256, 128, 64)\nprofiler = kernel.get_profiler(tensor_supply_type=tilelang.TensorSupplyType.Randn)\nprint(profiler.do_bench(warmup=10))\n'

WRONG = "T.copy(K[bx * block_M, 0], K_shared)"
FILES = {
    "scores.py": SCORES,
    "scores_wrong_offset.py": SCORES.replace("T.copy(K[bx * block_N, 0], K_shared)", WRONG),
    "scores_default_argument.py": SCORES.replace("def ref_program(q, k):", "def ref_program(q, k=None):"),
    "scores_other_names.py": SCORES.replace("def ref_program(q, k):", "def ref_program(k, q):"),
}


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    pytest.importorskip("tilelang")
    folder = tmp_path_factory.mktemp("named_reference")
    return folder, lift_files(folder, FILES)


def _messages(report) -> list[str]:
    return [d.message for d in report.diagnostics]


@pytest.mark.tilelang
def test_a_reference_the_file_never_calls_is_re_run_and_verifies_the_right_kernel(reports):
    report = reports[1]["scores.py"]
    assert report.verdict == "verified", _messages(report)
    proven = " ".join(report.proven)
    assert "S = ref_program(Q, K)" in proven
    assert "not called by the file: bound to the kernel's inputs in order" in proven


@pytest.mark.tilelang
def test_the_wrong_tile_offset_is_a_confirmed_violation_at_its_line(reports):
    folder, found = reports
    report = found["scores_wrong_offset.py"]
    assert report.verdict == "violations", _messages(report)
    spec = [d for d in report.diagnostics if d.check == "spec"]
    assert spec and spec[0].counterexample and spec[0].counterexample.confirmed
    assert spec[0].line == line_of(str(folder / "scores_wrong_offset.py"), WRONG)


@pytest.mark.tilelang
def test_a_reference_with_a_default_argument_is_not_bound_by_guess(reports):
    report = reports[1]["scores_default_argument.py"]
    assert report.verdict == "unsupported", _messages(report)
    assert any("ref_program is not translatable" in m for m in _messages(report))
    assert not any("ref_program" in p for p in report.proven)


@pytest.mark.tilelang
def test_a_reference_whose_parameters_are_not_the_kernels_inputs_by_name_is_not_bound(reports):
    report = reports[1]["scores_other_names.py"]
    assert report.verdict == "unsupported", _messages(report)
    assert not any("ref_program" in p for p in report.proven)
