"""Two kernels in one file, each with its own reference (``ref_<kernel>``).

Expected: verified (add_kernel: C = A + B; copy_transpose: B = A.T).
"""
import tilelang
import tilelang.language as T


def ref_add_kernel(A, B):
    return A + B


def ref_copy_transpose(A):
    return A.T


@tilelang.jit
def add_kernel(A, B, block_M, block_N):
    M, N = T.const("M, N")
    A: T.Tensor((M, N), T.float32)
    B: T.Tensor((M, N), T.float32)
    C = T.empty((M, N), T.float32)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        a = T.alloc_fragment((block_M, block_N), T.float32)
        b = T.alloc_fragment((block_M, block_N), T.float32)
        T.copy(A[by * block_M, bx * block_N], a)
        T.copy(B[by * block_M, bx * block_N], b)
        for i, j in T.Parallel(block_M, block_N):
            a[i, j] = a[i, j] + b[i, j]
        T.copy(a, C[by * block_M, bx * block_N])
    return C


@tilelang.jit
def copy_transpose(A, block_M, block_N):
    M, N = T.const("M, N")
    A: T.Tensor((M, N), T.float32)
    B = T.empty((N, M), T.float32)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        for i, j in T.Parallel(block_M, block_N):
            if by * block_M + i < M and bx * block_N + j < N:
                B[bx * block_N + j, by * block_M + i] = A[by * block_M + i, bx * block_N + j]
    return B


def main():
    import torch
    a = torch.randn(64, 96, device="cuda")
    b = torch.randn(64, 96, device="cuda")
    torch.testing.assert_close(add_kernel(a, b, 16, 32), ref_add_kernel(a, b))
    torch.testing.assert_close(copy_transpose(a, 16, 32), ref_copy_transpose(a))


if __name__ == "__main__":
    main()
