"""A GEMM in the style of the autotuned examples: ``@tilelang.autotune`` over a list of tile
configurations on a factory with ``out_idx``.  Called once without its tunable arguments
(TileLang tunes: every configuration is a kernel to check) and once with them given
(TileLang compiles just that one, as the call asks).

Expected: verified (C = A @ B) for every configuration and for the call's own tiles.
"""
import tilelang
import tilelang.language as T

CONFIGS = [{"block_M": 32, "block_N": 32, "block_K": 16}, {"block_M": 64, "block_N": 32, "block_K": 32}]


def ref_program(A, B):
    return A @ B


@tilelang.autotune(configs=CONFIGS)
@tilelang.jit(out_idx=[-1])
def matmul(M, N, K, block_M=64, block_N=64, block_K=32, dtype=T.float16, accum_dtype=T.float32):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_K, block_N), dtype)
            acc = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(acc)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, ko * block_K], A_s)
                T.copy(B[ko * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * block_M, bx * block_N])

    return main


def main():
    tuned = matmul(128, 96, 64)
    tuned.get_profiler().assert_allclose(ref_program, rtol=1e-2, atol=1e-2)
    chosen = matmul(128, 96, 64, 64, 32, 16)
    chosen.get_profiler().assert_allclose(ref_program, rtol=1e-2, atol=1e-2)


if __name__ == "__main__":
    main()
