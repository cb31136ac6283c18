"""Row-normalised squares with the problem sizes as module-level constants that the kernel
reads by name (``M = 96`` at the top of the file, as some examples write them), and the
expected value computed in the script's top-level code.

Expected: verified (M and N reduced like arguments; Y equals the value the file compares).
"""
import tilelang
import tilelang.language as T
import torch

M = 96
N = 40


@tilelang.jit
def normalised_squares(X, block_M=16, dtype=T.float32):
    X: T.Tensor([M, N], dtype)
    Y = T.empty([M, N], dtype)

    with T.Kernel(T.ceildiv(M, block_M), threads=128) as bm:
        tile = T.alloc_fragment([block_M, N], dtype)
        total = T.alloc_fragment([block_M], dtype)
        T.copy(X[bm * block_M, 0], tile)
        for i, j in T.Parallel(block_M, N):
            tile[i, j] = tile[i, j] * tile[i, j]
        T.reduce_sum(tile, total, dim=1, clear=True)
        for i, j in T.Parallel(block_M, N):
            tile[i, j] = tile[i, j] / total[i]
        T.copy(tile, Y[bm * block_M, 0])
    return Y


x = torch.randn(M, N, device="cuda")
y = normalised_squares(x)
torch.testing.assert_close(y, x * x / (x * x).sum(dim=1, keepdim=True))
