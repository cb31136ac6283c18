"""A band of a score matrix kept by a mask written with bit operations, as sparse-attention
kernels write theirs: ``(j <= i) & (i - j < band)`` joins two conditions, and ``(j >> 1) & 1``
keeps every other pair of key positions (a block-strided pattern).

Expected: verified (B = A where the band and the pattern hold, else 0).
"""
import tilelang
import tilelang.language as T


def ref_program(A, band):
    import torch
    rows = torch.arange(A.shape[0], device=A.device)[:, None]
    cols = torch.arange(A.shape[1], device=A.device)[None, :]
    keep = (cols <= rows) & (rows - cols < band) & (((cols >> 1) & 1) == 0)
    return A * keep


@tilelang.jit
def banded_mask(A, band, block_M, block_N):
    M, N = T.const("M, N")
    A: T.Tensor((M, N), T.float32)
    B = T.empty((M, N), T.float32)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        scores = T.alloc_fragment((block_M, block_N), T.float32)
        T.copy(A[by * block_M, bx * block_N], scores)
        for i, j in T.Parallel(block_M, block_N):
            row = by * block_M + i
            col = bx * block_N + j
            keep = (col <= row) & (row - col < band) & (((col >> 1) & 1) == 0)
            scores[i, j] = T.if_then_else(keep, scores[i, j], 0)
        T.copy(scores, B[by * block_M, bx * block_N])
    return B


def main():
    import torch
    a = torch.randn(96, 64, device="cuda")
    torch.testing.assert_close(banded_mask(a, 24, 32, 16), ref_program(a, 24))


if __name__ == "__main__":
    main()
