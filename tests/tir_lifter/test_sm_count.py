"""A persistent kernel launches one block per SM (``T.Kernel(driver.get_num_sms())``) and walks
the output tiles in waves.  The stand-in GPU's SM count (132, an H100) is a count of the build,
like ``num_split``: the reduced build asks TileLang for the kernel on 2 SMs (3, then 5, when 2
cannot keep the real tiling cases), the real one on 132, so the waves' cases (a partial last
wave) are kept and the check runs 2 blocks instead of 132.

Twins: the right persistent GEMM is verified with ``num_sms=2 (from 132)`` in every proven line
(on the old code the proof ran the 132 stand-in SMs, 2.4x the CPU time: 15.7 s against 6.4 s); B's
tile read at ``bx`` where ``by`` is meant is a confirmed violation at the mutated line; a wave
stride of ``sm_num - 1`` (tiles computed twice, others never) is a write conflict and a
coverage violation.
"""
from __future__ import annotations

import pytest
from lifter_helpers import lift_files, line_of

PERSISTENT = 'import torch\nimport tilelang\nimport tilelang.language as T\nfrom tilelang.carver.arch import driver\n\n\n@tilelang.jit(out_idx=[2])\ndef matmul(M, N, K, block_M=128, block_N=128, block_K=32):\n    sm_num = driver.get_num_sms()\n    m_tiles = T.ceildiv(M, block_M)\n    n_tiles = T.ceildiv(N, block_N)\n    waves = T.ceildiv(m_tiles * n_tiles, sm_num)\n\n    @T.prim_func\n    def main(A: T.Tensor((M, K), T.float32), B: T.Tensor((K, N), T.float32), C: T.Tensor((M, N), T.float32)):\n        with T.Kernel(sm_num, threads=128) as block_id:\n            A_shared = T.alloc_shared((block_M, block_K), T.float32)\n            B_shared = T.alloc_shared((block_K, block_N), T.float32)\n            C_local = T.alloc_fragment((block_M, block_N), T.float32)\n            for w in T.serial(waves):\n                tile_id = sm_num * w + block_id\n                bx = tile_id // n_tiles\n                by = tile_id % n_tiles\n                if bx < m_tiles:\n                    T.clear(C_local)\n                    for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):\n                        T.copy(A[bx * block_M, k * block_K], A_shared)\n                        T.copy(B[k * block_K, by * block_N], B_shared)\n                        T.gemm(A_shared, B_shared, C_local)\n                    T.copy(C_local, C[bx * block_M, by * block_N])\n\n    return main\n\n\ndef ref_program(a, b):\n    return a @ b\n\n\nkernel = matmul(4224, 4096, 1024)\na = torch.randn(4224, 1024, device="cuda")\nb = torch.randn(1024, 4096, device="cuda")\ntorch.testing.assert_close(kernel(a, b), ref_program(a, b))\n'

WRONG_TILE = "T.copy(B[k * block_K, bx * block_N], B_shared)"
FILES = {
    "persistent_gemm.py": PERSISTENT,
    "persistent_gemm_wrong_tile.py": PERSISTENT.replace("T.copy(B[k * block_K, by * block_N], B_shared)", WRONG_TILE),
    "persistent_gemm_wave_stride.py": PERSISTENT.replace("tile_id = sm_num * w + block_id",
                                                         "tile_id = (sm_num - 1) * w + block_id"),
}


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    pytest.importorskip("tilelang")
    folder = tmp_path_factory.mktemp("sm_count")
    return folder, lift_files(folder, FILES)


def _messages(report) -> list[str]:
    return [d.message for d in report.diagnostics]


@pytest.mark.tilelang
def test_the_persistent_gemm_is_verified_on_a_reduced_sm_count(reports):
    report = reports[1]["persistent_gemm.py"]
    assert report.verdict == "verified", _messages(report)
    assert report.proven and all("num_sms=2 (from 132)" in p for p in report.proven), report.proven
    assert any("C = ref_program(A, B)" in p for p in report.proven)


@pytest.mark.tilelang
def test_a_wrong_tile_is_a_confirmed_violation_at_its_line(reports):
    folder, found = reports
    report = found["persistent_gemm_wrong_tile.py"]
    assert report.verdict == "violations", _messages(report)
    spec = [d for d in report.diagnostics if d.check == "spec"]
    assert spec and spec[0].counterexample and spec[0].counterexample.confirmed
    assert spec[0].line == line_of(str(folder / "persistent_gemm_wrong_tile.py"), WRONG_TILE)


@pytest.mark.tilelang
def test_a_wrong_wave_stride_writes_some_tiles_twice_and_others_never(reports):
    report = reports[1]["persistent_gemm_wave_stride.py"]
    assert report.verdict == "violations", _messages(report)
    assert {"write-conflict", "coverage"} <= {d.check for d in report.diagnostics}, _messages(report)
