"""Rows shifted by their maximum (the first step of a stable softmax), checked the way many
examples check: no reference function, the expected value computed inline from the
inputs and compared with ``torch.testing.assert_close``.

Expected: verified (Y equals the value main compares it with).
"""
import tilelang
import tilelang.language as T


@tilelang.jit
def row_shift(X, block_M, dtype=T.float32):
    M, N = T.const("M, N")
    X: T.Tensor((M, N), dtype)
    Y = T.empty((M, N), dtype)

    with T.Kernel(T.ceildiv(M, block_M), threads=128) as bm:
        tile = T.alloc_fragment((block_M, N), dtype)
        row_max = T.alloc_fragment((block_M,), dtype)
        T.copy(X[bm * block_M, 0], tile)
        T.reduce_max(tile, row_max, dim=1, clear=True)
        for i, j in T.Parallel(block_M, N):
            tile[i, j] = tile[i, j] - row_max[i]
        T.copy(tile, Y[bm * block_M, 0])
    return Y


def main(M=96, N=48):
    import torch
    x = torch.randn(M, N, device="cuda")
    y = row_shift(x, 32)
    expected = x - x.max(dim=1, keepdim=True).values
    torch.testing.assert_close(y, expected)


if __name__ == "__main__":
    main()
