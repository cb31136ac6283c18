"""``T.sync_grid()``: every block of the grid waits until all have reached it (a persistent
split-then-combine kernel, DeepSeek MLA's ``example_mla_decode_persistent.py``).  At the top of a
``T.Kernel``'s body it splits the kernel into launches run in turn over the same grid, the later
ones continuing the blocks: a read of a value a block kept on chip across the barrier is
refused, as is a barrier inside a loop or branch.

Twins: the right two-phase kernel (row sums into a scratch tensor, then each row minus its
mirror row's sum, which another block wrote) is verified; the phase-one tile offset off by one
is a confirmed violation at that line; the mirror index off by one a violation listing its line;
the barrier dropped is a violation (blocks would read sums not yet written); a value kept in a
fragment across the barrier and a barrier inside a loop are unsupported.
"""
from __future__ import annotations

import pytest
from lifter_helpers import lift_files, line_of

TWO_PHASE = 'import torch\nimport tilelang\nimport tilelang.language as T\n\n\n@tilelang.jit(out_idx=[2])\ndef mirrored_row_sums(M, N, block_M=32):\n    @T.prim_func\n    def main(X: T.Tensor((M, N), T.float32), Sums: T.Tensor((M,), T.float32), Y: T.Tensor((M,), T.float32)):\n        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:\n            tile = T.alloc_fragment((block_M, N), T.float32)\n            row = T.alloc_fragment((block_M,), T.float32)\n            T.copy(X[bx * block_M, 0], tile)\n            T.reduce_sum(tile, row, dim=1)\n            T.copy(row, Sums[bx * block_M])\n            T.sync_grid()\n            for i in T.Parallel(block_M):\n                Y[bx * block_M + i] = Sums[bx * block_M + i] - Sums[M - 1 - bx * block_M - i]\n\n    return main\n\n\ndef ref_program(x):\n    sums = x.sum(-1)\n    return sums - sums.flip(0)\n\n\nkernel = mirrored_row_sums(256, 64)\nx = torch.randn(256, 64, device="cuda")\nsums = torch.empty(256, device="cuda")\ntorch.testing.assert_close(kernel(x, sums), ref_program(x))\n'

SHIFTED = "T.copy(X[bx * block_M + 1, 0], tile)"
MIRROR = "Sums[M - bx * block_M - i]"
FILES = {
    "two_phase.py": TWO_PHASE,
    "two_phase_shifted_tile.py": TWO_PHASE.replace("T.copy(X[bx * block_M, 0], tile)", SHIFTED),
    "two_phase_mirror_off_by_one.py": TWO_PHASE.replace("Sums[M - 1 - bx * block_M - i]", MIRROR),
    "two_phase_no_barrier.py": TWO_PHASE.replace("            T.sync_grid()\n", ""),
    "two_phase_kept_fragment.py": TWO_PHASE.replace("Y[bx * block_M + i] = Sums[bx * block_M + i] - ",
                                                    "Y[bx * block_M + i] = row[i] - "),
    "two_phase_barrier_in_loop.py": TWO_PHASE.replace("            T.sync_grid()\n",
                                                      "            for _ in T.serial(1):\n                T.sync_grid()\n"),
}


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    pytest.importorskip("tilelang")
    folder = tmp_path_factory.mktemp("sync_grid")
    return folder, lift_files(folder, FILES)


def _messages(report) -> list[str]:
    return [d.message for d in report.diagnostics]


def _spec_violation(report):
    assert report.verdict == "violations", _messages(report)
    spec = [d for d in report.diagnostics if d.check == "spec"]
    assert spec and spec[0].counterexample and spec[0].counterexample.confirmed
    return spec[0]


@pytest.mark.tilelang
def test_the_two_phase_kernel_is_verified(reports):
    report = reports[1]["two_phase.py"]
    assert report.verdict == "verified", _messages(report)
    assert any("Y = ref_program(X)" in p for p in report.proven)


@pytest.mark.tilelang
def test_a_wrong_tile_before_the_barrier_is_a_violation_at_its_line(reports):
    folder, found = reports
    finding = _spec_violation(found["two_phase_shifted_tile.py"])
    assert finding.line == line_of(str(folder / "two_phase_shifted_tile.py"), SHIFTED)


@pytest.mark.tilelang
def test_a_wrong_index_after_the_barrier_is_a_violation_through_its_line(reports):
    folder, found = reports
    finding = _spec_violation(found["two_phase_mirror_off_by_one.py"])
    line = line_of(str(folder / "two_phase_mirror_off_by_one.py"), MIRROR)
    assert finding.line == line or str(line) in finding.message.split("comes through lines")[1].split(";")[0]


@pytest.mark.tilelang
def test_without_the_barrier_blocks_read_sums_not_yet_written(reports):
    _spec_violation(reports[1]["two_phase_no_barrier.py"])


@pytest.mark.tilelang
@pytest.mark.parametrize("name, reason", [
    ("two_phase_kept_fragment.py", "kept on chip: a value kept across the grid barrier is not modelled"),
    ("two_phase_barrier_in_loop.py", "T.sync_grid() inside a loop or branch is not modelled"),
])
def test_what_the_split_cannot_model_is_unsupported(reports, name, reason):
    report = reports[1][name]
    assert report.verdict == "unsupported", _messages(report)
    assert any(reason in m for m in _messages(report)), _messages(report)
