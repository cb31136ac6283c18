"""Two factory-style kernels (plain functions returning ``T.prim_func``, built with
``tilelang.compile``): a split-K GEMM accumulating with ``T.atomic_add`` and a ReLU.

Expected: verified (splitk_gemm: C = A @ B; relu_kernel: Y = relu(X)).
"""
import tilelang
import tilelang.language as T


def ref_splitk_gemm(A, B):
    return A @ B


def ref_relu_kernel(X):
    return X.relu()


def splitk_gemm(M, N, K, block_M, block_N, block_K, split_k):
    part = K // split_k

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), split_k, threads=128) as (bx, by, bz):
            A_tile = T.alloc_shared((block_M, block_K), "float16")
            B_tile = T.alloc_shared((block_K, block_N), "float16")
            acc = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(part, block_K), num_stages=2):
                T.copy(A[by * block_M, bz * part + ko * block_K], A_tile)
                T.copy(B[bz * part + ko * block_K, bx * block_N], B_tile)
                T.gemm(A_tile, B_tile, acc)
            for i, j in T.Parallel(block_M, block_N):
                T.atomic_add(C[by * block_M + i, bx * block_N + j], acc[i, j])

    return main


def relu_kernel(M, N, block_M, block_N):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            tile = T.alloc_fragment((block_M, block_N), "float32")
            T.copy(X[by * block_M, bx * block_N], tile)
            for i, j in T.Parallel(block_M, block_N):
                tile[i, j] = T.max(tile[i, j], 0)
            T.copy(tile, Y[by * block_M, bx * block_N])

    return main


def main():
    gemm = tilelang.compile(splitk_gemm(64, 32, 128, 32, 16, 16, 2))
    relu = tilelang.compile(relu_kernel(48, 80, 16, 32), out_idx=[1])
    return gemm, relu


if __name__ == "__main__":
    main()
