"""Element-wise C = A + B, one block per block_M x block_N tile, bounds left to divisibility.

Expected: verified
"""
import tilelang.language as T


def elementwise_add(M, N, block_M, block_N, dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            for i, j in T.Parallel(block_M, block_N):
                C[by * block_M + i, bx * block_N + j] = A[by * block_M + i, bx * block_N + j] + \
                    B[by * block_M + i, bx * block_N + j]

    return main


func = elementwise_add(1024, 1024, 32, 32)
