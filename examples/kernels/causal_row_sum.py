"""Causal row sums (the normaliser of causal attention without the exponentials): row i
adds the columns j <= i, tile by tile, with a fragment accumulator.

Expected: verified (B = A.tril().sum(1)).
"""
import tilelang
import tilelang.language as T


def ref_program(A):
    return A.tril().sum(1)


@tilelang.jit
def causal_row_sum(A, block_M, block_N):
    M, N = T.const("M, N")
    A: T.Tensor((M, N), T.float32)
    B = T.empty((M,), T.float32)
    with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
        tile = T.alloc_fragment((block_M, block_N), T.float32)
        part = T.alloc_fragment((block_M,), T.float32)
        total = T.alloc_fragment((block_M,), T.float32)
        T.clear(total)
        for ko in T.serial(T.ceildiv(N, block_N)):
            T.copy(A[bx * block_M, ko * block_N], tile)
            for i, j in T.Parallel(block_M, block_N):
                tile[i, j] = T.if_then_else(ko * block_N + j <= bx * block_M + i, tile[i, j], 0)
            T.reduce_sum(tile, part, dim=1)
            for i in T.Parallel(block_M):
                total[i] = total[i] + part[i]
        T.copy(total, B[bx * block_M])
    return B


def main():
    import torch
    a = torch.randn(64, 64, device="cuda")
    torch.testing.assert_close(causal_row_sum(a, 16, 32), ref_program(a))


if __name__ == "__main__":
    main()
