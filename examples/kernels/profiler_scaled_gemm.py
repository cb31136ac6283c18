"""A scaled GEMM in the style of the autotuned examples: a factory with ``out_idx``,
``T.use_swizzle``, and the reference handed to ``profiler.assert_allclose`` through
``functools.partial`` (its extra arguments are bound there, not passed by the profiler).

Expected: verified (C = alpha * A @ B.T).
"""
import functools

import tilelang
import tilelang.language as T


def ref_program(A, B, alpha=1.0, transpose_b=False):
    if transpose_b:
        B = B.T
    return alpha * (A @ B)


@tilelang.jit(out_idx=[-1])
def scaled_matmul(M, N, K, block_M, block_N, block_K, alpha, dtype=T.float16, accum_dtype=T.float32):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_N, block_K), dtype)
            acc = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.use_swizzle(panel_size=4)
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, ko * block_K], A_s)
                T.copy(B[bx * block_N, ko * block_K], B_s)
                T.gemm(A_s, B_s, acc, transpose_B=True)
            for i, j in T.Parallel(block_M, block_N):
                acc[i, j] = acc[i, j] * alpha
            T.copy(acc, C[by * block_M, bx * block_N])

    return main


def main():
    kernel = scaled_matmul(96, 64, 80, 32, 32, 16, 0.5)
    profiler = kernel.get_profiler()
    profiler.assert_allclose(functools.partial(ref_program, alpha=0.5, transpose_b=True), rtol=1e-2, atol=1e-2)


if __name__ == "__main__":
    main()
