"""Row reduction B = A.sum(1): blocks of block_M rows, the row tiled by block_N and
accumulated with reduce_sum(clear=False).

Expected: verified
"""
import tilelang.language as T


def row_sum(M, N, block_M, block_N, dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M,), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            A_shared = T.alloc_shared((block_M, block_N), dtype)
            acc = T.alloc_fragment((block_M,), dtype)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(N, block_N), num_stages=2):
                T.copy(A[bx * block_M, k * block_N], A_shared)
                T.reduce_sum(A_shared, acc, dim=1, clear=False)
            T.copy(acc, B[bx * block_M])

    return main


func = row_sum(1000, 1000, 64, 128)
