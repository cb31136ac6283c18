"""Forms the upstream TileLang examples use that the lifter reads: eager kernels whose argument
sizes TileLang needs as Python ints beside several ``T.const`` sizes, factories asserting a size
is a multiple of a tile of their own (the reduction raises the size until TileLang accepts it,
and a loop the real build runs several times must not run once), IKET trace events and the
block's ``T.sync_threads()`` (no effect on values), and what stays unsupported: another extern
call, a named barrier of some threads, another shape of an on-chip buffer.

Every right kernel is verified, its one-line mutant a confirmed violation; all files go through
one elaboration child.
"""
from __future__ import annotations

import pytest
from lifter_helpers import lift_files

pytestmark = pytest.mark.tilelang

CONST_ROWS = '''
import torch
import tilelang
import tilelang.language as T


@tilelang.jit
def row_scale(X, dim, block_M=32):
    B, M = T.const("B, M")
    block_D = min(128, tilelang.math.next_power_of_2(dim))  # Python arithmetic: dim is a Python int
    X: T.Tensor((B, M, dim), T.float32)
    Y = T.empty((B, M, dim), T.float32)
    with T.Kernel(T.ceildiv(M, block_M), B, threads=128) as (bx, bz):
        tile = T.alloc_fragment((block_M, block_D), T.float32)
        T.copy(X[bz, bx * block_M, 0], tile)
        for i, j in T.Parallel(block_M, block_D):
            tile[i, j] = tile[i, j] * 2.0
        T.copy(tile, Y[bz, bx * block_M, 0])
    return Y


x = torch.randn(2, 256, 64, device="cuda")
torch.testing.assert_close(row_scale(x, 64), x * 2.0)
'''

CHUNK_SUM = '''
import torch
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=-1)
def chunk_sum(S, D, dtype=T.float32):
    chunk = 64  # the factory's own tile: S must be a multiple of it
    assert S % chunk == 0
    NT = S // chunk

    @T.prim_func
    def main(X: T.Tensor((S, D), dtype), Y: T.Tensor((D,), dtype)):
        with T.Kernel(1, threads=128) as bx:
            acc = T.alloc_fragment((D,), dtype)
            tile = T.alloc_fragment((chunk, D), dtype)
            part = T.alloc_fragment((D,), dtype)
            T.clear(acc)
            for t in T.serial(NT):
                T.copy(X[t * chunk, 0], tile)
                T.reduce_sum(tile, part, dim=0)
                for j in T.Parallel(D):
                    acc[j] += part[j]
            T.copy(acc, Y)

    return main


x = torch.randn(512, 4, device="cuda")
torch.testing.assert_close(chunk_sum(512, 4)(x), x.sum(0))
'''

TRACED_ADD = '''
import torch
import tilelang
import tilelang.language as T
from tilelang.tools.cuda import iket


def add_traced(n, threads=128, dtype=T.float32):
    @T.prim_func
    def main(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype), C: T.Tensor((n,), dtype)):
        with T.Kernel(T.ceildiv(n, threads), threads=threads) as bx, iket.range("kernel_total"):
            for i in T.Parallel(threads):
                idx = bx * threads + i
                if idx < n:
                    iket.mark("store", payload=iket.payload(idx, dtype="int32"))
                    C[idx] = A[idx] + B[idx]

    return main


kernel = tilelang.compile(add_traced(1024), out_idx=-1)
a = torch.randn(1024, device="cuda")
b = torch.randn(1024, device="cuda")
torch.testing.assert_close(kernel(a, b), a + b)
'''

SYNCED_SHIFT = '''
import torch
import tilelang
import tilelang.language as T


def shift_rows(M, N, block_M=32, dtype=T.float32):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            tile = T.alloc_shared((block_M, N), dtype)
            for i, j in T.Parallel(block_M, N):
                tile[i, j] = A[bx * block_M + i, j] * 2.0
            T.sync_threads()
            for i, j in T.Parallel(block_M, N):
                C[bx * block_M + i, j] = tile[i, j] + 1.0

    return main


kernel = tilelang.compile(shift_rows(256, 8), out_idx=-1)
a = torch.randn(256, 8, device="cuda")
torch.testing.assert_close(kernel(a), a * 2.0 + 1.0)
'''

RESHAPED = '''
import torch
import tilelang
import tilelang.language as T


def flat_copy(M, N, block_M=32, dtype=T.float32):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            tile = T.alloc_fragment((block_M * N,), dtype)
            rows = T.reshape(tile, (block_M, N))
            T.copy(A[bx * block_M, 0], rows)
            T.copy(rows, C[bx * block_M, 0])

    return main


kernel = tilelang.compile(flat_copy(256, 8), out_idx=-1)
a = torch.randn(256, 8, device="cuda")
torch.testing.assert_close(kernel(a), a)
'''

# the kernel writes Y and the row sums S; the reference returns Y only, which the file compares
SCALE_AND_SUM = '''
import torch
import tilelang
import tilelang.language as T


def scale_and_sum(M, N, block_M=32, dtype=T.float32):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype), S: T.Tensor((M,), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            tile = T.alloc_fragment((block_M, N), dtype)
            total = T.alloc_fragment((block_M,), dtype)
            T.copy(X[bx * block_M, 0], tile)
            T.reduce_sum(tile, total, dim=1)
            for i, j in T.Parallel(block_M, N):
                tile[i, j] = tile[i, j] * 2.0
            T.copy(tile, Y[bx * block_M, 0])
            T.copy(total, S[bx * block_M])

    return main


def ref_program(x):
    return x * 2.0


kernel = tilelang.compile(scale_and_sum(256, 8), out_idx=[1, 2])
x = torch.randn(256, 8, device="cuda")
y, s = kernel(x)
torch.testing.assert_close(y, ref_program(x))
'''


def _mutate(source: str, before: str, after: str) -> str:
    assert before in source, before
    return source.replace(before, after, 1)


FILES = {
    "const_rows.py": CONST_ROWS,
    "const_rows_wrong.py": _mutate(CONST_ROWS, "tile[i, j] * 2.0", "tile[i, j] * 3.0"),
    "chunk_sum.py": CHUNK_SUM,
    # every chunk reads the first one: right at S = 64 (one chunk), wrong at the file's 512
    "chunk_sum_first_only.py": _mutate(CHUNK_SUM, "T.copy(X[t * chunk, 0], tile)", "T.copy(X[0, 0], tile)"),
    "traced_add.py": TRACED_ADD,
    "traced_sub.py": _mutate(TRACED_ADD, "C[idx] = A[idx] + B[idx]", "C[idx] = A[idx] - B[idx]"),
    "unknown_extern.py": _mutate(TRACED_ADD, 'iket.mark("store", payload=iket.payload(idx, dtype="int32"))',
                                 'T.evaluate(T.call_extern("handle", "my_side_effect", idx))'),
    "synced_shift.py": SYNCED_SHIFT,
    "synced_shift_wrong.py": _mutate(SYNCED_SHIFT, "tile[i, j] + 1.0", "tile[i, j] - 1.0"),
    "named_barrier.py": _mutate(SYNCED_SHIFT, "T.sync_threads()", "T.sync_threads(1, 64)"),
    "reshaped.py": RESHAPED,
    "scale_and_sum.py": SCALE_AND_SUM,
    "scale_and_sum_wrong.py": _mutate(SCALE_AND_SUM, "tile[i, j] * 2.0", "tile[i, j] * 2.0 + total[i]"),
}


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    pytest.importorskip("tilelang")
    return lift_files(tmp_path_factory.mktemp("upstream_forms"), FILES)


def _messages(report) -> list[str]:
    return [d.message for d in report.diagnostics]


@pytest.mark.parametrize("name", ["const_rows.py", "chunk_sum.py", "traced_add.py", "synced_shift.py",
                                  "scale_and_sum.py", "reshaped.py"])
def test_the_right_kernel_is_verified(reports, name):
    assert reports[name].verdict == "verified", _messages(reports[name])


@pytest.mark.parametrize("name", ["const_rows_wrong.py", "chunk_sum_first_only.py", "traced_sub.py",
                                  "synced_shift_wrong.py", "scale_and_sum_wrong.py"])
def test_its_mutant_is_a_confirmed_violation(reports, name):
    report = reports[name]
    assert report.verdict == "violations", _messages(report)
    assert any(d.check == "spec" and d.counterexample and d.counterexample.confirmed for d in report.diagnostics)


def test_an_argument_size_python_needs_as_an_int_is_fixed_while_the_declared_sizes_stay_symbolic(reports):
    proven = " ".join(reports["const_rows.py"].proven)
    assert "B=2, M=6 (from 256)" in proven and "dim=4 (from 64)" in proven


def test_a_size_the_factory_asserts_a_multiple_of_its_own_tile_is_raised_until_its_loop_runs_twice(reports):
    # 64 is the smallest size the factory accepts, but its chunk loop would run once there
    # (the real one 8 times): the mutant reading only the first chunk would then be verified
    proven = " ".join(reports["chunk_sum.py"].proven)
    assert "S=128 (from 512)" in proven
    assert reports["chunk_sum_first_only.py"].verdict == "violations"


@pytest.mark.parametrize("name,reason", [
    ("unknown_extern.py", "tirx.call_extern:my_side_effect is not modelled"),
    ("named_barrier.py", "tirx.tvm_storage_sync:named barrier is not modelled"),
])
def test_what_may_change_values_stays_unsupported(reports, name, reason):
    report = reports[name]
    assert report.verdict == "unsupported", _messages(report)
    assert any(reason in message for message in _messages(report)), _messages(report)


def test_a_reference_returning_fewer_values_is_compared_with_the_output_the_file_compares_it_with(reports):
    proven = " ".join(reports["scale_and_sum.py"].proven)
    assert "kernel computes Y = ref_program(X)" in proven
    assert "S not compared (the reference returns no value for it; the file compares its result with Y)" in proven
