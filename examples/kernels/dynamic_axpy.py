"""An element-wise kernel over run-time sizes (``T.dynamic``): one compiled kernel serves
every ``m`` and ``n``, so it is checked for both tiling cases (a partial last tile and exact
multiples), not only the sizes of the call below.

Expected: verified (C = A + 2 * B).
"""
import torch

import tilelang
import tilelang.language as T


def ref_axpy(A, B):
    return A + 2 * B


@tilelang.jit
def axpy_dynamic(A, B, block_M, block_N):
    M = T.dynamic("m")
    N = T.dynamic("n")
    A: T.Tensor((M, N), T.float32)
    B: T.Tensor((M, N), T.float32)
    C = T.empty((M, N), T.float32)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        for i, j in T.Parallel(block_M, block_N):
            row = by * block_M + i
            col = bx * block_N + j
            if row < M and col < N:
                C[row, col] = A[row, col] + 2 * B[row, col]
    return C


def main():
    a = torch.randn(128, 64, device="cuda")
    b = torch.randn(128, 64, device="cuda")
    torch.testing.assert_close(axpy_dynamic(a, b, 32, 16), ref_axpy(a, b))


if __name__ == "__main__":
    main()
