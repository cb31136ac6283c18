"""Split-K GEMM, eager style: each of ``split_k`` blocks along z adds its partial product
into C with ``T.atomic_add`` (C starts zeroed, as the caller's ``torch.zeros``).

Expected: verified (C = A @ B).
"""
import tilelang
import tilelang.language as T


def ref_program(A, B):
    return A @ B


@tilelang.jit
def splitk_matmul(A, B, C, block_M, block_N, block_K, split_k, dtype=T.float16, accum_dtype=T.float32):
    M, N, K = T.const("M, N, K")
    A: T.Tensor((M, K), dtype)
    B: T.Tensor((K, N), dtype)
    C: T.Tensor((M, N), accum_dtype)
    part = K // split_k

    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), split_k, threads=128) as (bx, by, bz):
        A_tile = T.alloc_shared((block_M, block_K), dtype)
        B_tile = T.alloc_shared((block_K, block_N), dtype)
        acc = T.alloc_fragment((block_M, block_N), accum_dtype)
        T.clear(acc)
        for ko in T.Pipelined(T.ceildiv(part, block_K), num_stages=2):
            T.copy(A[by * block_M, bz * part + ko * block_K], A_tile)
            T.copy(B[bz * part + ko * block_K, bx * block_N], B_tile)
            T.gemm(A_tile, B_tile, acc)
        for i, j in T.Parallel(block_M, block_N):
            T.atomic_add(C[by * block_M + i, bx * block_N + j], acc[i, j])


def main(M=64, N=64, K=128):
    import torch
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.zeros(M, N, device="cuda", dtype=torch.float32)
    splitk_matmul(a, b, c, 32, 32, 16, 4)
    torch.testing.assert_close(c, ref_program(a, b).float(), rtol=1e-2, atol=1e-2)


if __name__ == "__main__":
    main()
