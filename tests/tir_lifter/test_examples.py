"""Each example kernel gets the verdict its docstring promises (text frontend)."""
from __future__ import annotations

import re

import pytest

from tir_lifter import run_lift

from lifter_helpers import EXAMPLES, line_of


def _expected(path) -> str:
    match = re.search(r"^Expected: (\w+)", path.read_text(), re.M)
    assert match, f"{path.name} documents no expected verdict"
    return match.group(1)


TEXT_READABLE = [p for p in sorted(EXAMPLES.glob("*.py")) if "@tilelang.jit" not in p.read_text()
                 and "def ref_" not in p.read_text()]  # eager/jit styles: tests/tir_lifter/test_elaborate.py


@pytest.mark.parametrize("path", TEXT_READABLE, ids=lambda p: p.name)
def test_example_verdict_matches_its_docstring(path):
    assert run_lift(str(path), frontend="text").verdict == _expected(path)


def test_tiled_gemm_is_proven_equal_to_matmul_on_reduced_sizes():
    report = run_lift(str(EXAMPLES / "gemm.py"), frontend="text")
    assert report.verdict == "verified"
    assert any("C = A @ B" in p and "(from 1024)" in p for p in report.proven)
    tiles = {k: v for k, v in report.extra["reduced_sizes"].items() if k.startswith("block_")}
    assert sorted(tiles.values()) == [2, 4, 8] and tiles["block_K"] == 2  # distinct, in order of the real sizes


def test_split_k_with_atomic_add_is_verified_with_two_k_slices():
    report = run_lift(str(EXAMPLES / "splitk_gemm_atomic.py"), frontend="text")
    assert report.verdict == "verified"
    assert report.extra["reduced_sizes"]["split_k"] == 2


def test_split_k_with_plain_copy_is_a_write_conflict_at_the_copy_line():
    path = str(EXAMPLES / "splitk_gemm_plain_copy.py")
    report = run_lift(path, frontend="text")
    assert report.verdict == "violations"
    [diag] = [d for d in report.diagnostics if d.check == "write-conflict"]
    assert diag.line == line_of(path, "T.copy(C_local, C[")
    assert "bz=0" in diag.message and "bz=1" in diag.message
    assert diag.counterexample is not None and diag.counterexample.confirmed


def test_floor_division_grid_leaves_the_boundary_rows_unwritten():
    path = str(EXAMPLES / "gemm_floor_grid.py")
    report = run_lift(path, frontend="text")
    [diag] = [d for d in report.diagnostics if d.check == "coverage"]
    assert diag.line == line_of(path, "with T.Kernel(")
    # the rows past the last whole block_M tile (M has a partial tile, as the real 1000 does)
    assert re.search(r"C\[\d+, :\]", diag.message) and "T.ceildiv" in diag.message
    assert diag.counterexample.confirmed


def test_boundary_tiles_are_kept_when_the_real_size_has_a_remainder():
    report = run_lift(str(EXAMPLES / "row_sum.py"), frontend="text")
    assert report.verdict == "verified"
    assert report.extra["reduced_sizes"]["M"] % 2 == 1 and report.extra["reduced_sizes"]["N"] % 2 == 1


def test_softmax_is_checked_against_the_reference_function_in_the_file():
    report = run_lift(str(EXAMPLES / "softmax_rows.py"), frontend="text")
    assert report.verdict == "verified"
    assert report.extra["spec_origin"].startswith("ref_program")
