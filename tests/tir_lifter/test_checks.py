"""Single-device checks on small kernels written for the purpose."""
from __future__ import annotations

import re

from tir_lifter import run_lift

from lifter_helpers import gemm_source, line_of


def test_swapped_block_index_is_a_spec_violation_with_a_confirmed_counterexample(write_kernel):
    path = write_kernel(gemm_source(b_copy="B[k * block_K, by * block_N]"))
    report = run_lift(path, frontend="text")
    assert report.verdict == "violations"
    [diag] = [d for d in report.diagnostics if d.check == "spec"]
    assert diag.counterexample.confirmed
    assert "kernel" in diag.counterexample.per_rank and "C" in diag.counterexample.reference
    # the statement that reads the wrong B tile, not the store the wrong value reaches
    assert diag.line == line_of(path, "T.copy(B[") and f"line {diag.line} is where it goes wrong" in diag.message


def test_missing_clear_of_the_accumulator_is_an_uninitialized_read_named_where_the_clear_belongs(write_kernel):
    path = write_kernel(gemm_source(clear="pass"))
    report = run_lift(path, frontend="text")
    [diag] = [d for d in report.diagnostics if d.check == "uninitialized-read"]
    # the statement that is missing: its place, after the line before the K loop (here the `pass`)
    assert diag.line == line_of(path, "pass")
    assert f"(line {line_of(path, 'T.gemm(')})" in diag.message
    loop = line_of(path, 'T.Pipelined')
    assert f"belongs before the loop at line {loop}" in diag.message
    start, end = map(int, re.search(r"between lines (\d+) and (\d+)", diag.message).groups())
    assert start <= line_of(path, "T.alloc_fragment") < diag.line < end == loop, diag.message
    assert report.verdict == "violations"


def test_a_deleted_clear_belongs_after_the_allocation_before_the_loop(write_kernel):
    path = write_kernel(gemm_source(clear=""))
    [diag] = [d for d in run_lift(path, frontend="text").diagnostics if d.check == "uninitialized-read"]
    assert diag.line == line_of(path, "C_local = T.alloc_fragment")


def test_a_read_an_earlier_write_missed_keeps_the_reading_line(write_kernel):
    # the clear writes all rows but the last: not a missing initialization, a write that falls short
    partial = "for i, j in T.Parallel(block_M - 1, block_N):\n                C_local[i, j] = 0"
    path = write_kernel(gemm_source(clear=partial))
    report = run_lift(path, frontend="text")
    [diag] = [d for d in report.diagnostics if d.check == "uninitialized-read"]
    assert diag.line == line_of(path, "T.gemm(") and "belongs" not in diag.message
    assert report.verdict == "violations"


def test_wrong_user_spec_is_refuted(write_kernel):
    report = run_lift(write_kernel(gemm_source()), spec="C = A @ B.T", frontend="text")
    assert report.verdict == "violations"
    assert any(d.check == "spec" and "A @ B.T" in d.message for d in report.diagnostics)


def test_transposed_gemm_spec_is_inferred(write_kernel):
    source = gemm_source().replace("T.gemm(A_shared, B_shared, C_local)", "T.gemm(A_shared, B_shared, C_local, transpose_B=True)")
    source = source.replace("B: T.Tensor((K, N), dtype)", "B: T.Tensor((N, K), dtype)")
    source = source.replace("B_shared = T.alloc_shared((block_K, block_N), dtype)", "B_shared = T.alloc_shared((block_N, block_K), dtype)")
    source = source.replace("T.copy(B[k * block_K, bx * block_N], B_shared)", "T.copy(B[bx * block_N, k * block_K], B_shared)")
    report = run_lift(write_kernel(source), frontend="text")
    assert report.extra["spec"] == "C = A @ B.T"
    assert report.verdict == "verified"


UNGUARDED = '''
import tilelang.language as T


def add(M, N, block_M, block_N):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M)) as (bx, by):
            for i, j in T.Parallel(block_M, block_N):
                C[by * block_M + i, bx * block_N + j] = A[by * block_M + i, bx * block_N + j] + B[by * block_M + i, bx * block_N + j]
    return main
{call}
'''


def test_an_unguarded_global_access_with_a_remainder_is_guarded_by_tilelang_as_its_lowering_does(write_kernel):
    # TileLang's lowering (LegalizeSafeMemoryAccess) wraps every global access it cannot prove
    # in bounds: the store past the edge is skipped, the load reads 0, the sums stay right
    report = run_lift(write_kernel(UNGUARDED.format(call="func = add(1000, 1000, 64, 64)")), frontend="text")
    assert report.verdict == "verified", [d.message for d in report.diagnostics]
    notes = [d for d in report.diagnostics if d.check == "auto-guarded"]
    assert notes and all(d.severity == "note" for d in notes)
    assert any("writes C" in d.message for d in notes)


def test_with_the_bounds_guard_turned_off_an_access_past_the_edge_is_out_of_bounds(write_kernel):
    call = 'PASS_CONFIGS = {"tl.disable_safe_memory_legalize": True}\nfunc = add(1000, 1000, 64, 64)'
    report = run_lift(write_kernel(UNGUARDED.format(call=call)), frontend="text")
    assert report.verdict == "violations"
    assert any(d.check == "out-of-bounds" and d.severity == "error" for d in report.diagnostics)


def test_an_out_of_bounds_access_to_an_on_chip_buffer_is_a_violation(write_kernel):
    source = UNGUARDED.replace(
        "            for i, j in T.Parallel(block_M, block_N):\n",
        "            tile = T.alloc_fragment((block_M, block_N), \"float32\")\n"
        "            for i, j in T.Parallel(block_M, block_N):\n"
        "                tile[i, j + 1] = A[by * block_M + i, bx * block_N + j]\n"
        "            for i, j in T.Parallel(block_M, block_N):\n")
    report = run_lift(write_kernel(source.format(call="func = add(1024, 1024, 64, 64)")), frontend="text")
    assert report.verdict == "violations"
    assert any(d.check == "out-of-bounds" and d.severity == "error" and "tile" in d.message
               for d in report.diagnostics)


def test_guarded_access_with_unbound_sizes_is_verified_with_a_partial_tile(write_kernel):
    guarded = UNGUARDED.replace("                C[by", "                if by * block_M + i < M and bx * block_N + j < N:\n                    C[by")
    report = run_lift(write_kernel(guarded.format(call="")), frontend="text")
    assert report.verdict == "verified"
    assert report.extra["reduced_sizes"]["M"] % 2 == 1  # a partial boundary tile (block_M is 2)


def test_two_operand_extrema_written_either_way_are_one_term_and_other_terms_are_not():
    import z3

    from tir_lifter.checks import TermForms, _same_term
    a, b, c, d = z3.Reals("a b c d")
    s = a * b + c * d
    memo = TermForms()
    # the kernel's T.max(acc, 0) and the reference's relu (operands in the other order, 0 as an int)
    assert _same_term(z3.If(s >= 0, s, 0), z3.If(z3.ToReal(z3.IntVal(0)) >= s, 0, s), memo)
    assert _same_term(z3.If(s > a, s, a), z3.If(a < s, s, a), memo)
    assert _same_term(z3.If(s <= a, s, a), z3.If(a >= s, s, a), memo)  # min either way
    assert not _same_term(z3.If(s >= 0, s, 0), z3.If(s >= 0, 0, s), memo)  # max is not min
    assert not _same_term(z3.If(s >= 0, s, 0), z3.If(s >= 1, s, 0), memo)
    assert not _same_term(s, a * b + c * c, memo)


COLUMN_TILES = '''
import tilelang.language as T


def double(M, N, block_M, block_N):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            tile = T.alloc_fragment((block_M, block_N), "float32")
            for nt in T.serial({trips}):
                T.copy(X[bx * block_M, nt * block_N], tile)
                for i, j in T.Parallel(block_M, block_N):
                    tile[i, j] = tile[i, j] * 2.0
                T.copy(tile, Y[bx * block_M, nt * block_N])

    return main


func = double(256, 256, 64, 64)
'''


def test_unwritten_columns_of_a_short_tile_loop_name_the_loop_not_the_grid(write_kernel):
    path = write_kernel(COLUMN_TILES.format(trips="T.ceildiv(N, block_N) - 1"))
    report = run_lift(path, frontend="text")
    [diag] = [d for d in report.diagnostics if d.check == "coverage"]
    assert diag.line == line_of(path, "for nt in T.serial(")
    assert "the loop over nt" in diag.message and "stops before writing them" in diag.message
    assert "T.ceildiv)" not in diag.message and diag.counterexample.confirmed


def test_the_whole_tile_loop_writes_every_column(write_kernel):
    report = run_lift(write_kernel(COLUMN_TILES.format(trips="T.ceildiv(N, block_N)")), frontend="text")
    assert not [d for d in report.diagnostics if d.check == "coverage"]
