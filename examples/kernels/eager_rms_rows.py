"""Row-wise RMS normalisation in the eager style (``T.const`` sizes, ``T.empty`` output); the
reference takes the row length and ``eps`` as extra arguments from the call site.

Expected: verified (B = A * rsqrt(mean(A * A, -1) + eps)).
"""
import torch

import tilelang
import tilelang.language as T


def ref_rms_rows(x, n_cols, eps):
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) / n_cols + eps)


@tilelang.jit
def rms_rows(A, blk_m, eps):
    M, N = T.const("M, N")
    A: T.Tensor((M, N), T.float32)
    B = T.empty((M, N), T.float32)
    with T.Kernel(T.ceildiv(M, blk_m), threads=128) as bx:
        row = T.alloc_fragment((blk_m, N), T.float32)
        sq = T.alloc_fragment((blk_m, N), T.float32)
        total = T.alloc_fragment((blk_m,), T.float32)
        T.copy(A[bx * blk_m, 0], row)
        for i, j in T.Parallel(blk_m, N):
            sq[i, j] = row[i, j] * row[i, j]
        T.reduce_sum(sq, total, dim=1)
        for i in T.Parallel(blk_m):
            total[i] = T.rsqrt(total[i] / N + eps)
        for i, j in T.Parallel(blk_m, N):
            row[i, j] *= total[i]
        T.copy(row, B[bx * blk_m, 0])
    return B


def main():
    m, n, eps = 48, 40, 1e-6
    x = torch.randn(m, n, device="cuda")
    y = rms_rows(x, 16, eps)
    torch.testing.assert_close(y, ref_rms_rows(x, n, eps), rtol=1e-4, atol=1e-4)


if __name__ == "__main__":
    main()
