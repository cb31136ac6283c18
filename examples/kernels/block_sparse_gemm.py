"""A block-sparse GEMM: a boolean mask says which (row block, column block, K block) products
are taken; the kernel branches on it.  Factory style with ``out_idx``; the reference skips
the same blocks.

A mask is data the kernel branches on, not a symbolic input: it is checked with one sampled
mask (some blocks on, some off), and the report says so.

Expected: verified (C = ref_program(A, B, Mask, ...) for the sampled mask).
"""
import tilelang
import tilelang.language as T


def ref_program(A, B, Mask, block_M, block_N, block_K):
    import torch
    M, K = A.shape
    N = B.shape[1]
    C = torch.zeros(M, N)
    for i in range(M // block_M):
        for j in range(N // block_N):
            for k in range(K // block_K):
                if Mask[i, j, k]:
                    rows, cols = slice(i * block_M, (i + 1) * block_M), slice(j * block_N, (j + 1) * block_N)
                    C[rows, cols] += A[rows, k * block_K:(k + 1) * block_K] @ B[k * block_K:(k + 1) * block_K, cols]
    return C


@tilelang.jit(out_idx=[-1])
def masked_matmul(M, N, K, block_M, block_N, block_K, dtype=T.float16, accum_dtype=T.float32):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
             Mask: T.Tensor((M // block_M, N // block_N, K // block_K), "bool"), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_K, block_N), dtype)
            acc = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(acc)
            for ko in T.Pipelined(K // block_K, num_stages=2):
                if Mask[by, bx, ko]:
                    T.copy(A[by * block_M, ko * block_K], A_s)
                    T.copy(B[ko * block_K, bx * block_N], B_s)
                    T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * block_M, bx * block_N])

    return main


def main(M=128, N=64, K=96, block_M=32, block_N=32, block_K=16):
    import torch
    kernel = masked_matmul(M, N, K, block_M, block_N, block_K)
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    mask = torch.rand(M // block_M, N // block_N, K // block_K, device="cuda") > 0.5
    c = kernel(a, b, mask)
    torch.testing.assert_close(c, ref_program(a, b, mask, block_M, block_N, block_K), rtol=1e-2, atol=1e-2)


if __name__ == "__main__":
    main()
