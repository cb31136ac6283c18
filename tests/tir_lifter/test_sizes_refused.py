"""Reduced sizes the factory or TileLang refuses, although the real ones build: tiles the factory
needs at least 16 wide, tiles related by ``min(block_N, block_M // 2)`` (1 at the smallest tiles),
two sizes asserted in one statement.  The reduction raises what is refused (tiles together, in the
order of their real values, never above them; the sizes one failing statement names, together)
until the build is accepted, and says so in every proven line; so are tiles under which a loop runs
never where the real build runs it (``block_M // 16`` strips at ``block_M = 2``: nothing in it would
be checked, and the output it writes would look unwritten).

Every right kernel is verified, its one-line wrong mutant a violation at that line; all files go
through one elaboration child.  The estimate that refuses runs too large to check adds loops that
run one after the other instead of multiplying them.
"""
from __future__ import annotations

import pytest
from lifter_helpers import lift_files

from tir_lifter.program import BinOp, Buffer, Const, GridAxis, Kernel, Loop, Var
from tir_lifter.sizes import concrete_cost, describe_cost

WIDE_TILES = '''
import torch
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def double_rows(M, N, block_M=64, dtype=T.float32):
    assert block_M % 16 == 0  # whole 16-row fragments only
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            tile = T.alloc_fragment((block_M, N), dtype)
            T.copy(X[bx * block_M, 0], tile)
            for i, j in T.Parallel(block_M, N):
                tile[i, j] = tile[i, j] * 2.0
            T.copy(tile, Y[bx * block_M, 0])

    return main


x = torch.randn(256, 4, device="cuda")
torch.testing.assert_close(double_rows(256, 4)(x), x * 2.0)
'''

HALF_TILES = '''
import torch
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def scale_halves(M, N, block_M=64, block_N=64, dtype=T.float32):
    sub = min(block_N, block_M // 2)  # each row tile walked in two halves
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            part = T.alloc_fragment((sub, N), dtype)
            for h in T.serial(block_M // sub):
                T.copy(X[bx * block_M + h * sub, 0], part)
                for i, j in T.Parallel(sub, N):
                    part[i, j] = part[i, j] * 3.0
                T.copy(part, Y[bx * block_M + h * sub, 0])

    return main


x = torch.randn(256, 4, device="cuda")
torch.testing.assert_close(scale_halves(256, 4)(x), x * 3.0)
'''

TWO_ASSERTED = '''
import torch
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def chunk_sums(S, D, dtype=T.float32):
    chunk, width = 64, 32  # the factory's own tiles
    assert S % chunk == 0 and D % width == 0
    @T.prim_func
    def main(X: T.Tensor((S, D), dtype), Y: T.Tensor((S // chunk, D), dtype)):
        with T.Kernel(S // chunk, D // width, threads=128) as (bx, by):
            tile = T.alloc_fragment((chunk, width), dtype)
            part = T.alloc_fragment((width,), dtype)
            T.copy(X[bx * chunk, by * width], tile)
            T.reduce_sum(tile, part, dim=0)
            T.copy(part, Y[bx, by * width])

    return main


x = torch.randn(256, 96, device="cuda")
torch.testing.assert_close(chunk_sums(256, 96)(x), x.unflatten(0, (-1, 64)).sum(1))
'''

STRIPS = '''
import torch
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def scale_strips(M, N, block_M=64, dtype=T.float32):
    strip = 16  # rows moved per step

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            part = T.alloc_fragment((strip, N), dtype)
            for h in T.serial(block_M // strip):
                T.copy(X[bx * block_M + h * strip, 0], part)
                for i, j in T.Parallel(strip, N):
                    part[i, j] = part[i, j] * 3.0
                T.copy(part, Y[bx * block_M + h * strip, 0])

    return main


x = torch.randn(256, 4, device="cuda")
torch.testing.assert_close(scale_strips(256, 4)(x), x * 3.0)
'''

FILES = {
    "wide_tiles.py": WIDE_TILES,
    "wide_tiles_wrong.py": WIDE_TILES.replace("T.copy(tile, Y[bx * block_M, 0])",
                                              "T.copy(tile, Y[bx * block_M // 2, 0])"),
    "half_tiles.py": HALF_TILES,
    "half_tiles_wrong.py": HALF_TILES.replace("T.copy(part, Y[bx * block_M + h * sub, 0])",
                                              "T.copy(part, Y[bx * block_M + h, 0])"),
    # block_N where block_M is meant: the same at the file's sizes (both 64), a latent finding only
    "half_tiles_swapped.py": HALF_TILES.replace("bx * block_M + h * sub", "bx * block_N + h * sub"),
    "two_asserted.py": TWO_ASSERTED,
    "two_asserted_wrong.py": TWO_ASSERTED.replace("T.copy(X[bx * chunk, by * width], tile)",
                                                  "T.copy(X[bx * chunk, by], tile)"),
    "strips.py": STRIPS,
    "strips_wrong.py": STRIPS.replace("T.copy(part, Y[bx * block_M + h * strip, 0])",
                                      "T.copy(part, Y[bx * block_M + h * strip, 1])"),
}


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    pytest.importorskip("tilelang")
    return lift_files(tmp_path_factory.mktemp("sizes_refused"), FILES)


def _messages(report) -> list[str]:
    return [d.message for d in report.diagnostics]


@pytest.mark.tilelang
@pytest.mark.parametrize("name", ["wide_tiles.py", "half_tiles.py", "two_asserted.py", "strips.py"])
def test_the_right_kernel_is_verified_at_raised_sizes(reports, name):
    assert reports[name].verdict == "verified", _messages(reports[name])


@pytest.mark.tilelang
@pytest.mark.parametrize("name,line", [("wide_tiles_wrong.py", "T.copy(tile, Y[bx * block_M // 2, 0])"),
                                       ("half_tiles_wrong.py", "T.copy(part, Y[bx * block_M + h, 0])"),
                                       ("two_asserted_wrong.py", "T.copy(X[bx * chunk, by], tile)"),
                                       ("strips_wrong.py", "T.copy(part, Y[bx * block_M + h * strip, 1])")])
def test_the_wrong_mutant_is_a_violation_at_its_line(reports, name, line):
    report = reports[name]
    assert report.verdict == "violations", _messages(report)
    wanted = FILES[name].splitlines().index(next(t for t in FILES[name].splitlines() if line in t)) + 1
    assert any(d.line == wanted and d.check != "unsupported" for d in report.diagnostics), \
        [(d.check, d.line, d.message) for d in report.diagnostics]


@pytest.mark.tilelang
def test_a_tile_the_factory_needs_16_wide_is_raised_and_the_proof_says_why(reports):
    proven = " ".join(reports["wide_tiles.py"].proven)
    assert "block_M=16 (from 64)" in proven
    assert "tiles raised (block_M from 2), the smaller ones refused" in proven and "AssertionError" in proven


@pytest.mark.tilelang
def test_tiles_whose_derived_half_would_be_1_are_raised_together(reports):
    proven = " ".join(reports["half_tiles.py"].proven)
    assert "block_M=4 (from 64)" in proven and "block_N=8 (from 64)" in proven
    assert "is 1 where the real one is more" in proven


@pytest.mark.tilelang
def test_two_sizes_one_assert_names_are_raised_together(reports):
    proven = " ".join(reports["two_asserted.py"].proven)
    assert "S=128 (from 256)" in proven and "D=64 (from 96)" in proven


@pytest.mark.tilelang
def test_tiles_under_which_a_loop_runs_never_are_raised_until_it_runs(reports):
    # block_M // 16 strips is 0 at block_M = 2: Y would be left unwritten, a false coverage finding
    proven = " ".join(reports["strips.py"].proven)
    assert "block_M=16 (from 64)" in proven
    assert "the loop over h runs never (real 4 times): nothing in it is checked" in proven


def _one_loop(extent: int) -> Kernel:
    return Kernel("strips", (Buffer("X", (Var("n"),), "float32", "global"),), (), (GridAxis("bx", Const(2)),),
                  (Loop("h", Const(extent), "serial", ()),))


def test_a_loop_run_never_where_the_real_build_runs_it_is_degenerate():
    from tir_lifter.instantiate import _degenerate
    assert _degenerate(_one_loop(0), _one_loop(4)) == ["the loop over h runs never (real 4 times)"]
    assert _degenerate(_one_loop(0), _one_loop(4), loops=True) == ["the loop over h runs never (real 4 times)"]
    assert _degenerate(_one_loop(1), _one_loop(4), loops=True) == ["the loop over h runs once (real 4 times)"]
    # per-thread code is compared with its loops later (after larger tiles): not here
    assert _degenerate(_one_loop(0), _one_loop(4), unrun=False) == []
    assert _degenerate(_one_loop(1), _one_loop(4)) == [] and _degenerate(_one_loop(2), _one_loop(4)) == []


def _loops_one_after_another(count: int) -> Kernel:
    body = tuple(Loop(f"k{i}", Var("n"), "serial", ()) for i in range(3))
    return Kernel("passes", (Buffer("X", (Var("n"),), "float32", "global"),), (Buffer("acc", (Const(64),), "float32", "local.fragment"),),
                  (GridAxis("bx", Const(count)),), body)


def test_loops_one_after_another_add_up_in_the_cost_estimate():
    kernel = _loops_one_after_another(4)
    assert concrete_cost(kernel, {"n": 7}) == 4 * 64 * 3 * 7  # not 4 * 64 * 7 ** 3
    assert "4 blocks, 64 on-chip elements per block, 21 serial loop trips" in describe_cost(kernel, {"n": 7})


def test_nested_loops_multiply_in_the_cost_estimate():
    inner = Loop("j", BinOp("//", Var("n"), Const(1)), "serial", ())
    kernel = Kernel("nest", (Buffer("X", (Var("n"),), "float32", "global"),), (), (GridAxis("bx", Const(1)),),
                    (Loop("i", Var("n"), "serial", (inner,)),))
    assert concrete_cost(kernel, {"n": 5}) == 25


@pytest.mark.tilelang
def test_a_mix_up_of_tiles_equal_in_the_file_is_latent_when_equal_tiles_must_be_raised_too(reports):
    # with block_M = block_N the smallest equal tiles (2, 2) make the half 1 wide; raised to (4, 4)
    # the file's own case builds, is clean, and the distinct-tile finding is only latent
    report = reports["half_tiles_swapped.py"]
    assert report.verdict != "violations", [(d.check, d.line, d.message) for d in report.diagnostics]
    assert any(d.check == "latent" for d in report.diagnostics), _messages(report)
