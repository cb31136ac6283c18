"""Row softmax in two passes, factory style: pass 1 keeps a running maximum and a rescaled
sum over column tiles and ends with the row's log-sum-exp (base 2); pass 2 writes
exp2(x * log2(e) - lse) tile by tile.

Expected: verified (Y = softmax(X, dim=1)).
"""
import tilelang
import tilelang.language as T

LOG2_E = 1.44269504


def ref_program(X):
    import torch
    return torch.softmax(X.float(), dim=1)


@tilelang.jit(out_idx=[1])
def row_softmax(M, N, block_M=4, block_N=256):
    @T.prim_func
    def softmax(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            tile = T.alloc_fragment((block_M, block_N), T.float32)
            weights = T.alloc_fragment((block_M, block_N), T.float32)
            tile_max = T.alloc_fragment((block_M,), T.float32)
            row_max = T.alloc_fragment((block_M,), T.float32)
            new_max = T.alloc_fragment((block_M,), T.float32)
            tile_sum = T.alloc_fragment((block_M,), T.float32)
            row_sum = T.alloc_fragment((block_M,), T.float32)
            lse = T.alloc_fragment((block_M,), T.float32)
            T.fill(row_max, -T.infinity(T.float32))
            T.clear(row_sum)
            for nt in T.serial(T.ceildiv(N, block_N)):
                T.copy(X[bx * block_M, nt * block_N], tile)
                T.reduce_max(tile, tile_max, dim=1)
                for i in T.Parallel(block_M):
                    new_max[i] = T.max(row_max[i], tile_max[i])
                for i, j in T.Parallel(block_M, block_N):
                    weights[i, j] = T.exp2(tile[i, j] * LOG2_E - new_max[i] * LOG2_E)
                T.reduce_sum(weights, tile_sum, dim=1)
                for i in T.Parallel(block_M):
                    row_sum[i] = row_sum[i] * T.exp2(row_max[i] * LOG2_E - new_max[i] * LOG2_E) + tile_sum[i]
                    row_max[i] = new_max[i]
            for i in T.Parallel(block_M):
                lse[i] = row_max[i] * LOG2_E + T.log2(row_sum[i])
            for nt in T.serial(T.ceildiv(N, block_N)):
                T.copy(X[bx * block_M, nt * block_N], tile)
                for i, j in T.Parallel(block_M, block_N):
                    tile[i, j] = T.exp2(tile[i, j] * LOG2_E - lse[i])
                T.copy(tile, Y[bx * block_M, nt * block_N])

    return softmax


def main():
    import torch
    x = torch.randn(64, 1024, device="cuda")
    torch.testing.assert_close(row_softmax(64, 1024)(x), ref_program(x), rtol=1e-4, atol=1e-4)


if __name__ == "__main__":
    main()
