"""A kernel TileLang itself rejects at the file's own sizes (an operand shape check of a tile op:
``T.gemm K shape check failed``) is a ``build`` violation at the statement TileLang rejects,
not ``unsupported``: the file's program does not build as it is called.  Only TileLang's
own tile-op checks count; the file's own ``assert`` failing, or a build that fails only at the
reduced sizes, stays ``unsupported``; so does an autotune config TileLang rejects (the tuner
skips configs that do not build).
"""
from __future__ import annotations

import pytest
from lifter_helpers import ROOT, lift_files, line_of

GEMM = '''
import torch
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[2])
def matmul(M, N, K, block_M, block_N, block_K, dtype=T.float16, accum_dtype=T.float32):
    assert K % block_K == 0

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


kernel = matmul(256, 256, 256, 64, 128, 32)
a = torch.randn(256, 256, dtype=torch.float16, device="cuda")
b = torch.randn(256, 256, dtype=torch.float16, device="cuda")
torch.testing.assert_close(kernel(a, b), a @ b, rtol=1e-2, atol=1e-2)
'''

WRONG = "T.gemm(A_shared, B_shared, C_local, transpose_B=True)"
AUTOTUNED = (ROOT / "examples" / "kernels" / "autotuned_gemm.py").read_text()
AUTOTUNED_FIXED_B = AUTOTUNED.replace("B_s = T.alloc_shared((block_K, block_N), dtype)",
                                      "B_s = T.alloc_shared((16, block_N), dtype)").replace(
    "    chosen = matmul(128, 96, 64, 64, 32, 16)\n    chosen.get_profiler().assert_allclose(ref_program, rtol=1e-2, "
    "atol=1e-2)\n", "")
FILES = {
    "gemm.py": GEMM,
    "gemm_transposed_b.py": GEMM.replace("T.gemm(A_shared, B_shared, C_local)", WRONG),
    "gemm_own_assert.py": GEMM.replace("assert K % block_K == 0", "assert K % block_K == 1"),
    "autotuned_config_rejected.py": AUTOTUNED_FIXED_B,
}


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    pytest.importorskip("tilelang")
    folder = tmp_path_factory.mktemp("rejected_build")
    return folder, lift_files(folder, FILES)


def _messages(report) -> list[str]:
    return [d.message for d in report.diagnostics]


@pytest.mark.tilelang
def test_the_right_gemm_builds_and_is_verified(reports):
    report = reports[1]["gemm.py"]
    assert report.verdict == "verified", _messages(report)


@pytest.mark.tilelang
def test_a_gemm_tilelang_rejects_at_the_files_sizes_is_a_build_violation_at_its_line(reports):
    folder, found = reports
    report = found["gemm_transposed_b.py"]
    assert report.verdict == "violations", _messages(report)
    build = [d for d in report.diagnostics if d.check == "build"]
    assert build and "T.gemm K shape check failed: K_A = 32, K_B = 128" in build[0].message
    assert "at the file's own sizes" in build[0].message
    assert build[0].line == line_of(str(folder / "gemm_transposed_b.py"), WRONG)


@pytest.mark.tilelang
def test_the_files_own_assert_failing_is_not_a_finding(reports):
    report = reports[1]["gemm_own_assert.py"]
    assert report.verdict == "unsupported", _messages(report)
    assert not any(d.check == "build" for d in report.diagnostics)


@pytest.mark.tilelang
def test_an_autotune_config_tilelang_rejects_is_not_a_finding(reports):
    assert "(16, block_N)" in AUTOTUNED_FIXED_B  # the file's text as meant: only the tuned call, B's tile fixed
    assert "chosen" not in AUTOTUNED_FIXED_B.split("def main")[1]
    report = reports[1]["autotuned_config_rejected.py"]
    assert report.verdict == "unsupported", _messages(report)
    assert not any(d.check == "build" for d in report.diagnostics), _messages(report)
