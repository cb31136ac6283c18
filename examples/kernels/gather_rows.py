"""A row gather through an integer index tensor the file draws with ``torch.randint(0, M, (N,))``:
``Y[n, :] = X[Idx[n], :] * D ** -0.5``, the reference ``x[idx.long()] * scale`` with the scale the
file computes from the real ``D``.

An index tensor is not a symbolic input (the element it selects must be known): it is checked
with one sample drawn as the file draws it, at the reduced sizes (``randint(0, <X's reduced
rows>)``), the same for the reference, and the report says so.

Expected: verified (Y = ref_program(X, Idx, scale) for the sampled Idx).
"""
import math
import torch
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[2])
def gather_rows(M, N, D, block_N=32):
    scale = (1.0 / D) ** 0.5

    @T.prim_func
    def main(X: T.Tensor((M, D), T.float32), Idx: T.Tensor((N,), T.int32), Y: T.Tensor((N, D), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), threads=128) as bx:
            for i, d in T.Parallel(block_N, D):
                Y[bx * block_N + i, d] = X[Idx[bx * block_N + i], d] * scale

    return main


def ref_program(x, idx, scale):
    return x[idx.long()] * scale


M, N, D = 256, 128, 64
kernel = gather_rows(M, N, D)
x = torch.randn(M, D, device="cuda")
idx = torch.randint(0, M, (N,), dtype=torch.int32, device="cuda")
torch.testing.assert_close(kernel(x, idx), ref_program(x, idx, 1.0 / math.sqrt(D)))
