"""Element-wise C = A + B over shared tiles, with the input and output dtypes given by the caller.

Expected: verified (the output dtype is the reference's; no conversion changes a value).
"""
import tilelang
import tilelang.language as T


def ref_program(A, B):
    return A + B


@tilelang.jit(out_idx=[2])
def elementwise_add(M, N, block_M, block_N, in_dtype, out_dtype):
    @T.prim_func
    def main(A: T.Tensor((M, N), in_dtype), B: T.Tensor((M, N), in_dtype), C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_N), in_dtype)
            B_shared = T.alloc_shared((block_M, block_N), in_dtype)
            C_local = T.alloc_fragment((block_M, block_N), out_dtype)
            T.copy(A[by * block_M, bx * block_N], A_shared)
            T.copy(B[by * block_M, bx * block_N], B_shared)
            for i, j in T.Parallel(block_M, block_N):
                C_local[i, j] = A_shared[i, j] + B_shared[i, j]
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


def main(M=128, N=96):
    import torch
    kernel = elementwise_add(M, N, 32, 32, T.float32, T.float32)
    a = torch.randn(M, N, device="cuda")
    b = torch.randn(M, N, device="cuda")
    torch.testing.assert_close(kernel(a, b), ref_program(a, b))


if __name__ == "__main__":
    main()
