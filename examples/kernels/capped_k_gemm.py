"""GEMM whose K loop is capped by a constant the real K never reaches (``T.min(..., 64)``):
the reduced sizes keep the count below the cap, as it is at the real sizes.

Expected: verified (C = A @ B: 16 K tiles, under the cap of 64).
"""
import tilelang
import tilelang.language as T


def ref_program(A, B):
    return A @ B


@tilelang.jit(out_idx=[2])
def matmul(M, N, K, block_M, block_N, block_K, dtype="float16", accum_dtype="float"):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_tile = T.alloc_shared((block_M, block_K), dtype)
            B_tile = T.alloc_shared((block_K, block_N), dtype)
            acc = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(acc)
            for ko in T.Pipelined(T.min(T.ceildiv(K, block_K), 64), num_stages=2):
                T.copy(A[by * block_M, ko * block_K], A_tile)
                T.copy(B[ko * block_K, bx * block_N], B_tile)
                T.gemm(A_tile, B_tile, acc)
            T.copy(acc, C[by * block_M, bx * block_N])

    return main


def main():
    kernel = matmul(128, 128, 512, 64, 64, 32)
    kernel.get_profiler().assert_allclose(ref_program, rtol=1e-2, atol=1e-2)


if __name__ == "__main__":
    main()
