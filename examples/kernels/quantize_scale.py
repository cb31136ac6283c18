"""Quantise: C = trunc(clamp(A * 64)) as int32, computed in float32 before the conversion.

Expected: verified.  Converting through float16 first (``T.Cast(T.int32, T.Cast(T.float16, T.clamp(...)))``)
is wrong: float16's rounding moves 200.97 to 201 before the truncation (a violation on inputs
with fractions).
"""
import tilelang
import tilelang.language as T


def ref_program(A):
    return (A * 64).clamp(-32768, 32767).to(torch.int32)


@tilelang.jit(out_idx=[1])
def quantize(M, N, block_M, block_N):
    @T.prim_func
    def main(A: T.Tensor((M, N), T.float32), C: T.Tensor((M, N), T.int32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_N), T.float32)
            C_local = T.alloc_fragment((block_M, block_N), T.int32)
            T.copy(A[by * block_M, bx * block_N], A_shared)
            for i, j in T.Parallel(block_M, block_N):
                C_local[i, j] = T.Cast(T.int32, T.clamp(A_shared[i, j] * 64.0, -32768.0, 32767.0))
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


import torch  # noqa: E402


def main(M=128, N=96):
    kernel = quantize(M, N, 32, 64)
    a = torch.randn(M, N, device="cuda")
    torch.testing.assert_close(kernel(a), ref_program(a))


if __name__ == "__main__":
    main()
