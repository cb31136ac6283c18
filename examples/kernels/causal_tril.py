"""Causal (lower-triangular) masking of a score matrix, the mask step of causal attention:
element (i, j) is kept when the key position j is at or before the query position i.

Expected: verified (B = torch.tril(A)).
"""
import tilelang
import tilelang.language as T


def ref_program(A):
    return A.tril()


@tilelang.jit
def causal_mask(A, block_M, block_N):
    M, N = T.const("M, N")
    A: T.Tensor((M, N), T.float32)
    B = T.empty((M, N), T.float32)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        scores = T.alloc_fragment((block_M, block_N), T.float32)
        T.copy(A[by * block_M, bx * block_N], scores)
        for i, j in T.Parallel(block_M, block_N):
            # causal mask: keep key j <= query i
            scores[i, j] = T.if_then_else(bx * block_N + j <= by * block_M + i, scores[i, j], 0)
        T.copy(scores, B[by * block_M, bx * block_N])
    return B


def main():
    import torch
    a = torch.randn(96, 64, device="cuda")
    torch.testing.assert_close(causal_mask(a, 32, 16), ref_program(a))


if __name__ == "__main__":
    main()
