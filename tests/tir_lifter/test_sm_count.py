"""A persistent kernel launches one block per SM (``T.Kernel(driver.get_num_sms())``) and walks
the output tiles in waves.  The stand-in GPU's SM count (132, an H100) is a count of the build,
like ``num_split``: the reduced build asks TileLang for the kernel on 2 SMs (3, then 5, when 2
cannot keep the real tiling cases), the real one on 132, so the waves' cases (a partial last
wave) are kept and the check runs 2 blocks instead of 132.

Twins (examples/kernels/persistent_gemm.py): the right persistent GEMM is verified with ``num_sms=2 (from 132)`` in every proven line
(on the old code the proof ran the 132 stand-in SMs); B's
tile read at ``bx`` where ``by`` is meant is a confirmed violation at the mutated line; a wave
stride of ``sm_num - 1`` (tiles computed twice, others never) is a write conflict and a
coverage violation.
"""
from __future__ import annotations

import pytest
from lifter_helpers import EXAMPLES, lift_files, line_of

PERSISTENT = (EXAMPLES / "persistent_gemm.py").read_text()

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
