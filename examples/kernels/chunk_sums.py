"""Per-chunk row sums in the eager style, compiled with every size given by name
(``.compile(M=..., N=..., chunk_size=...)``, as the linear-attention examples do); the chunk
length is a ``T.const`` size that is also a tile.

Expected: verified (S = X summed over each chunk).
"""
import tilelang
import tilelang.language as T


def ref_program(X):
    return X.sum(dim=-1)


@tilelang.jit
def chunk_sums(X, block_M, dtype=T.float32):
    M, C, chunk_size = T.const("M, C, chunk_size")
    X: T.Tensor((M, C, chunk_size), dtype)
    S = T.empty((M, C), dtype)

    with T.Kernel(C, T.ceildiv(M, block_M), threads=128) as (bc, bm):
        tile = T.alloc_fragment((block_M, chunk_size), dtype)
        total = T.alloc_fragment((block_M,), dtype)
        T.copy(X[bm * block_M:(bm + 1) * block_M, bc, :], tile)
        T.reduce_sum(tile, total, dim=1, clear=True)
        for i in T.Parallel(block_M):
            S[bm * block_M + i, bc] = total[i]
    return S


def main():
    kernel = chunk_sums.compile(M=96, C=4, chunk_size=16, block_M=32)
    kernel.get_profiler().assert_allclose(ref_program, rtol=1e-2, atol=1e-2)


if __name__ == "__main__":
    main()
