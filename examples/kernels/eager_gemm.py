"""GEMM in TileLang's eager ``@tilelang.jit`` style: sizes from ``T.const``, output from ``T.empty``.

Expected: verified (C = A @ B, the reference below).
"""
import tilelang
import tilelang.language as T


def ref_program(A, B):
    return A @ B


@tilelang.jit
def tiled_matmul(A, B, block_M, block_N, block_K, dtype=T.float16, accum_dtype=T.float32):
    M, N, K = T.const("M, N, K")
    A: T.Tensor((M, K), dtype)
    B: T.Tensor((K, N), dtype)
    C = T.empty((M, N), dtype)

    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        A_tile = T.alloc_shared((block_M, block_K), dtype)
        B_tile = T.alloc_shared((block_K, block_N), dtype)
        acc = T.alloc_fragment((block_M, block_N), accum_dtype)
        T.clear(acc)
        for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
            T.copy(A[by * block_M, ko * block_K], A_tile)
            T.copy(B[ko * block_K, bx * block_N], B_tile)
            T.gemm(A_tile, B_tile, acc)
        T.copy(acc, C[by * block_M, bx * block_N])
    return C


def main(M=96, N=64, K=80):
    kernel = tiled_matmul.compile(M=M, N=N, K=K, block_M=32, block_N=32, block_K=16)
    import torch
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    torch.testing.assert_close(kernel(a, b), ref_program(a, b), rtol=1e-2, atol=1e-2)


if __name__ == "__main__":
    main()
