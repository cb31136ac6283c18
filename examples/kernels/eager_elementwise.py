"""Element-wise scaled sum, eager style with a per-element ``T.Parallel`` loop and a boundary guard.

Expected: verified (C = A + B * 2).
"""
import tilelang
import tilelang.language as T


def ref_program(A, B):
    return A + B * 2


@tilelang.jit
def scaled_add(A, B, block_M, block_N, dtype=T.float32):
    M, N = T.const("M, N")
    A: T.Tensor((M, N), dtype)
    B: T.Tensor((M, N), dtype)
    C = T.empty((M, N), dtype)

    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        for i, j in T.Parallel(block_M, block_N):
            row = by * block_M + i
            col = bx * block_N + j
            if row < M and col < N:
                C[row, col] = A[row, col] + B[row, col] * 2
    return C


def main(M=100, N=72):
    import torch
    a = torch.randn(M, N, device="cuda")
    b = torch.randn(M, N, device="cuda")
    torch.testing.assert_close(scaled_add(a, b, 16, 32), ref_program(a, b))


if __name__ == "__main__":
    main()
