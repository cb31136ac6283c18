"""Rows scaled by a per-row factor, each row walked in tiles of ``gcd(N, blk_n)``: a tile size
the factory computes from a problem size, as the DeepSeek mHC kernels do.  At the reduced
sizes that gcd must not come out 1 (an offset ``t`` written for ``t * blk`` would not show).

Expected: verified (Y = X * s[:, None]).
"""
import math

import tilelang
import tilelang.language as T


def ref_program(X, s):
    return X * s[:, None]


@tilelang.jit(out_idx=[2])
def scale_rows(M, N, blk_n=256, dtype="float32"):
    blk = math.gcd(N, blk_n)

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), s: T.Tensor((M,), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(M, threads=128) as row:
            tile = T.alloc_fragment((blk,), dtype)
            for t in T.serial(N // blk):
                T.copy(X[row, t * blk], tile)
                for j in T.Parallel(blk):
                    tile[j] = tile[j] * s[row]
                T.copy(tile, Y[row, t * blk])

    return main


def main():
    kernel = scale_rows(64, 640, 256)  # tiles of gcd(640, 256) = 128
    kernel.get_profiler().assert_allclose(ref_program, rtol=1e-5, atol=1e-5)


if __name__ == "__main__":
    main()
