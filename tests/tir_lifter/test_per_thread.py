"""Per-thread code (``tx = T.get_thread_binding()`` in an index): each thread of the block runs the
statements with its own thread index and its own registers (``T.alloc_local``), statement by
statement; TileLang's ThreadSync pass orders two statements whose shared-memory accesses conflict
across threads, nothing orders the threads inside one statement, nor their global accesses
between two ``T.sync_threads()``.  A row sum with one thread per row is verified; a wrong thread
index is a violation at its line; two threads writing one shared element in one statement is a
race, ``unsupported``; a thread count kept at 128 beside a reduced tile is refused (the reduced
instance is not one the file runs), never a finding.  A warp shuffle (``T.tvm_warp_shuffle``,
CUDA's ``__shfl_sync``) reads the source lane's value as it is before the statement: a butterfly
row sum over the lanes is verified (at a tile large enough for the lane loop to run more than
once), the same partner lane in every round is a violation at the shuffle, a shuffle only some
lanes reach is ``unsupported``.
"""
from __future__ import annotations

import numpy as np
import pytest
from lifter_helpers import lift_files, line_of

from tir_lifter.backends import FloatBackend
from tir_lifter.errors import Unsupported
from tir_lifter.interpreter import Machine
from tir_lifter.program import (GLOBAL, SERIAL, SYNC_THREADS, THREAD_INDEX, WARP_SHUFFLE, BinOp, Buffer, Call, Const,
                                Kernel, Load, Loop, Store, TileOp, Var)

ROWS = '''
import torch
import tilelang
import tilelang.language as T


@tilelang.jit
def thread_row_sum(A, block_M, threads, dtype=T.float32):
    M, N = T.const("M, N")
    A: T.Tensor((M, N), dtype)
    C = T.empty((M,), dtype)
    with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
        tx = T.get_thread_binding()
        S = T.alloc_shared((block_M,), dtype)
        acc = T.alloc_local((1,), dtype)
        T.clear(acc)
        for j in T.serial(N):
            acc[0] += A[bx * block_M + tx, j]
        S[tx] = acc[0]
        C[bx * block_M + tx] = S[tx]
    return C


a = torch.randn(64, 16, device="cuda")
c = thread_row_sum(a, 32, 32)
torch.testing.assert_close(c, a.sum(1))
'''
READ = "            acc[0] += A[bx * block_M + tx, j]\n"


def _mutate(*pairs: tuple[str, str]) -> str:
    source = ROWS
    for before, after in pairs:
        assert before in source, before
        source = source.replace(before, after, 1)
    return source


FILES = {
    "thread_rows.py": ROWS,
    # each thread sums the next thread's row
    "thread_rows_index.py": _mutate((READ, READ.replace("+ tx, j]", "+ (tx + 1) % block_M, j]"))),
    # threads 2i and 2i + 1 both write S[i], with their own sums
    "thread_rows_race.py": _mutate(("        S[tx] = acc[0]\n", "        S[tx // 2] = acc[0]\n")),
    # 128 threads for 128 rows: right, but a reduced block_M would leave threads without a row
    "thread_rows_fixed.py": _mutate(("threads=threads", "threads=128"), ("(a, 32, 32)", "(a, 128, 128)"),
                                    ("randn(64, 16", "randn(256, 16")),
}


WARP = '''
import math
import torch
import tilelang
import tilelang.language as T


@tilelang.jit
def warp_row_sum(A, block_N, dtype=T.float32):
    M, N = T.const("M, N")
    A: T.Tensor((M, N), dtype)
    C = T.empty((M,), dtype)
    rounds = int(math.log2(block_N))
    with T.Kernel(M, threads=block_N) as bx:
        tx = T.get_thread_binding()
        v = T.alloc_local((1,), dtype)
        other = T.alloc_local((1,), dtype)
        T.clear(v)
        for k in T.serial(T.ceildiv(N, block_N)):
            if k * block_N + tx < N:
                v[0] += A[bx, k * block_N + tx]
        for i in T.serial(rounds):
            other[0] = T.tvm_warp_shuffle(0xFFFFFFFF, v[0], tx ^ (1 << i), block_N, block_N)
            v[0] += other[0]
        if tx == 0:
            C[bx] = v[0]
    return C


a = torch.randn(16, 64, device="cuda")
c = warp_row_sum(a, 8)
torch.testing.assert_close(c, a.sum(1))
'''
SHUFFLE = "            other[0] = T.tvm_warp_shuffle(0xFFFFFFFF, v[0], tx ^ (1 << i), block_N, block_N)\n"
FILES.update({
    "warp_sum.py": WARP,
    # the same partner lane in every round: at two lanes (one round) no different from the right one
    "warp_sum_lane.py": WARP.replace(SHUFFLE, SHUFFLE.replace("tx ^ (1 << i)", "tx ^ 1")),
    # only the even lanes run the shuffle
    "warp_sum_branch.py": WARP.replace(SHUFFLE, "            if tx % 2 == 0:\n    " + SHUFFLE),
})


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    pytest.importorskip("tilelang")
    folder = tmp_path_factory.mktemp("per_thread")
    return folder, lift_files(folder, FILES)


def _messages(report) -> list[str]:
    return [d.message for d in report.diagnostics]


@pytest.mark.tilelang
def test_a_row_sum_with_one_thread_per_row_is_verified(reports):
    report = reports[1]["thread_rows.py"]
    assert report.verdict == "verified", _messages(report)
    assert any("kernel computes C" in line and "per-thread code" in line for line in report.proven), report.proven


@pytest.mark.tilelang
def test_a_wrong_thread_index_is_a_confirmed_violation_at_its_line(reports):
    folder, found = reports
    report = found["thread_rows_index.py"]
    assert report.verdict == "violations", _messages(report)
    wrong = [d for d in report.diagnostics if d.check == "spec" and d.counterexample and d.counterexample.confirmed]
    assert wrong, _messages(report)
    assert line_of(str(folder / "thread_rows_index.py"), "(tx + 1) % block_M") in {d.line for d in wrong}


@pytest.mark.tilelang
def test_two_threads_writing_one_shared_element_in_one_statement_are_a_race(reports):
    folder, found = reports
    report = found["thread_rows_race.py"]
    assert report.verdict == "unsupported", _messages(report)
    races = [d for d in report.diagnostics if "a race" in d.message]
    assert races and races[0].line == line_of(str(folder / "thread_rows_race.py"), "S[tx // 2]"), _messages(report)


@pytest.mark.tilelang
def test_a_thread_count_kept_beside_a_reduced_tile_is_refused(reports):
    report = reports[1]["thread_rows_fixed.py"]
    assert report.verdict == "unsupported", _messages(report)
    assert any("do not compare with block_M" in message for message in _messages(report)), _messages(report)


@pytest.mark.tilelang
def test_a_butterfly_sum_over_warp_shuffles_is_verified_with_its_lane_loop_run_more_than_once(reports):
    report = reports[1]["warp_sum.py"]
    assert report.verdict == "verified", _messages(report)
    assert any("kernel computes C" in line and "block_N=4" in line for line in report.proven), report.proven


@pytest.mark.tilelang
def test_a_shuffle_from_the_wrong_lane_is_a_confirmed_violation_at_the_shuffle(reports):
    folder, found = reports
    report = found["warp_sum_lane.py"]
    assert report.verdict == "violations", _messages(report)
    wrong = [d for d in report.diagnostics if d.check == "spec" and d.counterexample and d.counterexample.confirmed]
    assert wrong, _messages(report)
    # the value lost row elements other lanes read: they reach it only through the shuffle
    assert line_of(str(folder / "warp_sum_lane.py"), "tvm_warp_shuffle") in {d.line for d in wrong}, \
        [(d.line, d.message) for d in wrong]


@pytest.mark.tilelang
def test_a_shuffle_only_some_lanes_reach_is_unsupported(reports):
    folder, found = reports
    report = found["warp_sum_branch.py"]
    assert report.verdict == "unsupported", _messages(report)
    refused = [d for d in report.diagnostics if "warp shuffle outside" in d.message]
    assert refused and refused[0].line == line_of(str(folder / "warp_sum_branch.py"), "tvm_warp_shuffle"), \
        _messages(report)


# --- the interpreter on hand-built kernels (no TileLang needed) -----------------------------

TX = Var(THREAD_INDEX[0])


def _run(body: tuple, threads: int = 4, allocs: tuple = ()) -> dict:
    """Run ``body`` in one block of ``threads`` threads over X = [1, 2, ..., 2 * threads] and an
    output Y of ``threads`` elements."""
    params = (Buffer("X", (Const(2 * threads),), "float32", GLOBAL), Buffer("Y", (Const(threads),), "float32", GLOBAL))
    kernel = Kernel("k", params, allocs, (), body, threads=threads, thread_dims=(threads, 1, 1))
    tensors = {"X": np.array([float(v) for v in range(1, 2 * threads + 1)], dtype=object),
               "Y": np.full(threads, 0.0, dtype=object)}
    return Machine(kernel, {}, FloatBackend(), tensors).run().outputs


def _neighbour(barrier: bool) -> tuple:
    """X[tx] = 2 * X[tx]; (T.sync_threads();) Y[tx] = X[(tx + 1) % 4]."""
    first = Store("X", (TX,), BinOp("*", Const(2.0), Load("X", (TX,))), line=1)
    second = Store("Y", (TX,), Load("X", (BinOp("%", BinOp("+", TX, Const(1)), Const(4)),)), line=3)
    return (first,) + ((TileOp(SYNC_THREADS, (), (), 2),) if barrier else ()) + (second,)


def test_a_global_element_another_thread_wrote_before_the_barrier_is_read_after_it():
    assert list(_run(_neighbour(barrier=True))["Y"]) == [4.0, 6.0, 8.0, 2.0]


def test_a_global_element_another_thread_writes_without_a_barrier_is_a_race():
    with pytest.raises(Unsupported, match="a race") as raised:
        _run(_neighbour(barrier=False))
    assert raised.value.line == 3


def test_threads_writing_one_element_with_one_value_leave_that_value():
    body = (Store("Y", (Const(0),), Load("X", (Const(0),)), line=1),)
    assert _run(body)["Y"][0] == 1.0


def test_atomic_adds_of_the_threads_to_one_element_commute():
    body = (Store("Y", (Const(0),), Load("X", (TX,)), True, line=1),)
    assert _run(body)["Y"][0] == 1.0 + 2.0 + 3.0 + 4.0


def test_a_loop_whose_trip_count_differs_between_threads_runs_whole_in_each_thread():
    # thread t adds X[0..t] into Y[t]; no two threads touch one Y element
    body = (Loop("j", BinOp("+", TX, Const(1)), SERIAL,
                 (Store("Y", (TX,), BinOp("+", Load("Y", (TX,)), Load("X", (Var("j"),))), line=2),), line=1),)
    assert list(_run(body)["Y"]) == [1.0, 3.0, 6.0, 10.0]


def _shuffle(value, lane, width: int = 4) -> Call:
    return Call(WARP_SHUFFLE, (Const(0xFFFFFFFF), value, lane, Const(width), Const(width)))


def test_a_shuffle_reads_the_source_lane_as_it_was_before_the_statement():
    # R[0] = X[tx]; R[0] = shuffle(R[0], lane tx ^ 1): every lane takes its partner's old value
    register = (Buffer("R", (Const(1),), "float32", "local"),)
    body = (Store("R", (Const(0),), Load("X", (TX,)), line=1),
            Store("R", (Const(0),), _shuffle(Load("R", (Const(0),)), BinOp("^", TX, Const(1))), line=2),
            Store("Y", (TX,), Load("R", (Const(0),)), line=3))
    assert list(_run(body, allocs=register)["Y"]) == [2.0, 1.0, 4.0, 3.0]


def test_a_shuffle_lane_is_taken_modulo_the_width_within_its_group_of_lanes():
    # width 2: lanes 0-1 and 2-3 are two groups; lane 3 names lane 1 of its own group
    body = (Store("Y", (TX,), _shuffle(Load("X", (TX,)), Const(3), width=2), line=1),)
    assert list(_run(body)["Y"]) == [2.0, 2.0, 4.0, 4.0]


def test_a_shuffle_over_a_width_that_is_no_power_of_two_is_refused():
    body = (Store("Y", (TX,), _shuffle(Load("X", (TX,)), Const(0), width=3), line=1),)
    with pytest.raises(Unsupported, match="not a power of two"):
        _run(body)


def test_bit_operations_on_indices_are_exact():
    # Y[tx] = X[((1 << tx) & 3 | tx >> 1) ^ 1]
    index = BinOp("^", BinOp("|", BinOp("&", BinOp("<<", Const(1), TX), Const(3)), BinOp(">>", TX, Const(1))),
                  Const(1))
    body = (Store("Y", (TX,), Load("X", (index,)), line=1),)
    assert list(_run(body)["Y"]) == [1.0 + (((1 << t) & 3 | t >> 1) ^ 1) for t in range(4)]


def test_a_bit_operation_on_tensor_values_is_refused():
    body = (Store("Y", (TX,), BinOp("<<", Load("X", (TX,)), Const(1)), line=1),)
    with pytest.raises(Unsupported, match="operator << on tensor values"):
        _run(body)


SOURCE_ONLY = '''
import tilelang.language as T


def copy_by_thread(M, threads):
    @T.prim_func
    def main(A: T.Tensor((M,), "float32"), C: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=THREADS) as bx:
            tx = T.get_thread_binding()
            C[tx] = A[tx]
    return main


func = copy_by_thread(8, 8)
'''


def test_the_source_reader_refuses_per_thread_code_in_a_block_of_threads_it_cannot_count():
    from tir_lifter.text_frontend import lift_source
    known = lift_source(SOURCE_ONLY.replace("THREADS", "8"), "copy_by_thread.py")
    assert known.kernels[0].thread_dims == (8,) and not known.unsupported
    unknown = lift_source(SOURCE_ONLY.replace("THREADS", "(8, 2)"), "copy_by_thread.py")
    assert any("thread count the source reader cannot tell" in reason for _, reason in unknown.unsupported), \
        unknown.unsupported
