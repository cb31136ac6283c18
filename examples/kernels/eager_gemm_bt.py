"""GEMM against a transposed weight (``C = A @ B.T``, B stored as N x K), eager style.

Expected: verified.
"""
import tilelang
import tilelang.language as T


def ref_program(A, B):
    return A @ B.T


@tilelang.jit
def matmul_bt(A, B, block_M, block_N, block_K):
    M, N, K = T.const("M, N, K")
    A: T.Tensor((M, K), T.float16)
    B: T.Tensor((N, K), T.float16)
    C = T.empty((M, N), T.float32)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        A_tile = T.alloc_shared((block_M, block_K), T.float16)
        B_tile = T.alloc_shared((block_N, block_K), T.float16)
        acc = T.alloc_fragment((block_M, block_N), T.float32)
        T.clear(acc)
        for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
            T.copy(A[by * block_M, ko * block_K], A_tile)
            T.copy(B[bx * block_N, ko * block_K], B_tile)
            T.gemm(A_tile, B_tile, acc, transpose_B=True)
        T.copy(acc, C[by * block_M, bx * block_N])
    return C


def main():
    import torch
    a = torch.randn(64, 48, device="cuda", dtype=torch.float16)
    b = torch.randn(96, 48, device="cuda", dtype=torch.float16)
    torch.testing.assert_close(matmul_bt(a, b, 32, 32, 16), ref_program(a, b).float())


if __name__ == "__main__":
    main()
