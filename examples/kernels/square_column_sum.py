"""Column sums of a square matrix, factory style: the grid divides M by block_N and the loop
divides M by block_M, equal in the call below. TileLang's build at the real tiles folds the
two divisions into one, so the reduced build is paired with it with the two tiles reduced alike.

Expected: verified (B = A.T.sum(1)).
"""
import tilelang
import tilelang.language as T


def ref_program(A):
    return A.T.sum(1)


@tilelang.jit(out_idx=[1])
def col_sum(M, block_M=32, block_N=32):
    @T.prim_func
    def kernel(A: T.Tensor((M, M), T.float32), B: T.Tensor((M,), T.float32)):
        with T.Kernel(T.ceildiv(M, block_N), threads=128) as bx:
            tile = T.alloc_fragment((block_M, block_N), T.float32)
            part = T.alloc_fragment((block_N,), T.float32)
            total = T.alloc_fragment((block_N,), T.float32)
            T.clear(total)
            for ko in T.serial(T.ceildiv(M, block_M)):
                T.copy(A[ko * block_M, bx * block_N], tile)
                T.reduce_sum(tile, part, dim=0)
                for j in T.Parallel(block_N):
                    total[j] = total[j] + part[j]
            T.copy(total, B[bx * block_N])
    return kernel


def main():
    import torch
    a = torch.randn(96, 96, device="cuda")
    torch.testing.assert_close(col_sum(96)(a), ref_program(a))


if __name__ == "__main__":
    main()
