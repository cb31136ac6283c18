"""Row maximum in the factory style (``@tilelang.jit(out_idx=...)`` returning a ``T.prim_func``),
one block of rows per program, columns reduced tile by tile.

Expected: verified (B = A.amax(1)).
"""
import tilelang
import tilelang.language as T


def ref_program(A):
    return A.amax(1)


@tilelang.jit(out_idx=[1])
def row_max(M, N, block_M, block_N, dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M,), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            tile = T.alloc_shared((block_M, block_N), dtype)
            part = T.alloc_fragment((block_M,), dtype)
            best = T.alloc_fragment((block_M,), dtype)
            T.fill(best, -T.infinity(dtype))
            for ko in T.serial(T.ceildiv(N, block_N)):
                T.copy(A[bx * block_M, ko * block_N], tile)
                T.reduce_max(tile, part, dim=1)
                for i in T.Parallel(block_M):
                    best[i] = T.max(best[i], part[i])
            T.copy(best, B[bx * block_M])

    return main


def main():
    kernel = row_max(64, 96, 16, 32)
    import torch
    a = torch.randn(64, 96, device="cuda")
    torch.testing.assert_close(kernel(a), ref_program(a))


if __name__ == "__main__":
    main()
