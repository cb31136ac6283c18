"""A persistent kernel (``T.Persistent``): a fixed number of blocks walks every tile, wave by wave.

TileLang names the tile index it computes inside the loop ``bx`` like the block index it is
computed from (``bx = ((w * sm + bx) // 8) % m_blocks``), two TIR variables with one name. The
lifter once keyed let-bound values by name, so the block index in the wave's guard
(``w * sm + bx < tiles``) became the tile index and whole columns of tiles were never written: a
false `coverage` violation. Lets are now keyed by the variable itself.

The right kernel is verified, its one-line mutant (B's tile read at the row tile index) a
confirmed violation at the mutated line.
"""
from __future__ import annotations

import pytest
from lifter_helpers import lift_files, line_of

PERSISTENT_GEMM = '''
import torch
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[2])
def persistent_gemm(M, N, K, block_M=16, block_N=32, block_K=16):
    sm_num = 3  # a small device: 3 blocks walk every tile

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float16)):
        with T.Kernel(sm_num, threads=128) as block_id:
            A_shared = T.alloc_shared((block_M, block_K), T.float16)
            B_shared = T.alloc_shared((block_K, block_N), T.float16)
            C_local = T.alloc_fragment((block_M, block_N), T.float32)
            for bx, by in T.Persistent([T.ceildiv(M, block_M), T.ceildiv(N, block_N)], sm_num, block_id):
                T.clear(C_local)
                for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                    T.copy(A[bx * block_M, k * block_K], A_shared)
                    T.copy(B[k * block_K, by * block_N], B_shared)
                    T.gemm(A_shared, B_shared, C_local)
                T.copy(C_local, C[bx * block_M, by * block_N])

    return main


def ref_program(a, b):
    return a @ b


kernel = persistent_gemm(80, 320, 64)
a = torch.randn(80, 64, dtype=torch.float16, device="cuda")
b = torch.randn(64, 320, dtype=torch.float16, device="cuda")
torch.testing.assert_close(kernel(a, b), ref_program(a, b), rtol=1e-2, atol=1e-2)
'''

RIGHT_READ = "T.copy(B[k * block_K, by * block_N], B_shared)"
WRONG_READ = "T.copy(B[k * block_K, bx * block_N], B_shared)"
FILES = {
    "persistent_gemm.py": PERSISTENT_GEMM,
    "persistent_gemm_row_tile_for_b.py": PERSISTENT_GEMM.replace(RIGHT_READ, WRONG_READ),
}


def _messages(report) -> list[str]:
    return [d.message for d in report.diagnostics]


@pytest.mark.tilelang
def test_the_tile_index_named_like_the_block_index_does_not_replace_it(tmp_path):
    """The lifted guard of a wave reads the block index, the store the tile index computed from it."""
    pytest.importorskip("tilelang")
    import sys

    from tir_lifter.program import If
    from tir_lifter.tvm_frontend import build_primfunc, from_primfunc, import_user_file

    path = tmp_path / "persistent_gemm_def.py"
    path.write_text(PERSISTENT_GEMM.split("\nkernel = ")[0].replace("@tilelang.jit(out_idx=[2])\n", ""))
    module = import_user_file(str(path))
    sys.modules.pop(module.__name__, None)
    kernel = from_primfunc(build_primfunc(module, "persistent_gemm", {"M": 80, "N": 320, "K": 64}), "main")
    waves = kernel.body[0]
    guard = waves.body[0]
    assert isinstance(guard, If)
    # w * 3 + bx < 5 row tiles x 16 (10 column tiles rounded up to groups of 8): the block index
    # itself, not the tile index ((w * 3 + bx) / 8) % 5 TileLang also names bx
    assert str(guard.cond) == "(((w * 3) + bx) < 80)", guard.cond


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    pytest.importorskip("tilelang")
    folder = tmp_path_factory.mktemp("persistent_tiles")
    return folder, lift_files(folder, FILES)


@pytest.mark.tilelang
def test_a_persistent_gemm_walking_every_tile_is_verified(reports):
    report = reports[1]["persistent_gemm.py"]
    assert report.verdict == "verified", _messages(report)
    assert any("every element of C is written by exactly one block" in p for p in report.proven)


@pytest.mark.tilelang
def test_b_read_at_the_row_tile_index_is_a_confirmed_violation_at_that_line(reports):
    folder, found = reports
    report = found["persistent_gemm_row_tile_for_b.py"]
    assert report.verdict == "violations", _messages(report)
    spec = [d for d in report.diagnostics if d.check == "spec"]
    assert spec and spec[0].counterexample and spec[0].counterexample.confirmed
    assert spec[0].line == line_of(str(folder / "persistent_gemm_row_tile_for_b.py"), WRONG_READ)
