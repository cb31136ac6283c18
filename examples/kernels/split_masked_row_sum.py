"""Masked row sums in two launches of one PrimFunc, as the split-KV decoding examples do: the
first ``T.Kernel`` writes per-split partial sums to ``T.alloc_global`` scratch, the second adds
them up.  The column mask is a ``uint8`` tensor the kernel only compares with 0; the file also
calls a dense reference with the kernel's inputs but compares the kernel with the masked one.

Expected: verified (Out = X with masked columns zeroed, summed over each row; the mask fixed to
one sampled value).
"""
import tilelang
import tilelang.language as T
import torch


def ref_program(X, Mask):
    return X.masked_fill(Mask == 0, 0).sum(dim=-1)


def ref_dense(X, Mask):
    return X.sum(dim=-1)


@tilelang.jit(out_idx=[2])
def split_masked_row_sum(M, N, num_split, block_M, dtype="float32"):
    part = N // num_split

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Mask: T.Tensor((N,), "uint8"), Out: T.Tensor((M,), dtype)):
        partial = T.alloc_global((M, num_split), dtype)
        with T.Kernel(T.ceildiv(M, block_M), num_split, threads=128) as (bm, bs):
            tile = T.alloc_fragment((block_M, part), dtype)
            keep = T.alloc_fragment((part,), "uint8")
            total = T.alloc_fragment((block_M,), dtype)
            T.copy(X[bm * block_M, bs * part], tile)
            T.copy(Mask[bs * part], keep)
            for i, j in T.Parallel(block_M, part):
                tile[i, j] = T.if_then_else(keep[j] != 0, tile[i, j], 0)
            T.reduce_sum(tile, total, dim=1, clear=True)
            for i in T.Parallel(block_M):
                partial[bm * block_M + i, bs] = total[i]

        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bm:
            acc = T.alloc_fragment((block_M,), dtype)
            T.clear(acc)
            for s in T.serial(num_split):
                for i in T.Parallel(block_M):
                    acc[i] += partial[bm * block_M + i, s]
            for i in T.Parallel(block_M):
                Out[bm * block_M + i] = acc[i]

    return main


def main():
    kernel = split_masked_row_sum(64, 64, 4, 16)
    x = torch.randn(64, 64, device="cuda")
    mask = torch.randint(0, 2, (64,), device="cuda", dtype=torch.uint8)
    out = kernel(x, mask)
    dense = ref_dense(x, mask)
    print("kept share of the dense sums:", out.sum() / dense.sum())
    torch.testing.assert_close(out, ref_program(x, mask), rtol=1e-4, atol=1e-4)


if __name__ == "__main__":
    main()
