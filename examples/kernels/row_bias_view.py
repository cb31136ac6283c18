"""Rows plus a bias the file keeps as a (1, N) tensor and hands to the kernel squeezed
(``bias_row.squeeze(0)``); its reference takes the (1, N) tensor.  The reference is re-run on
the kernel's bias unsqueezed back.

Expected: verified (Y = X + bias_row).
"""
import tilelang
import tilelang.language as T
import torch


def ref_add_bias(X, bias_row):
    return X + bias_row


@tilelang.jit(out_idx=[2])
def add_bias(M, N, block_M, block_N, dtype="float32"):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), b: T.Tensor((N,), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            for i, j in T.Parallel(block_M, block_N):
                Y[by * block_M + i, bx * block_N + j] = X[by * block_M + i, bx * block_N + j] + b[bx * block_N + j]

    return main


def main():
    kernel = add_bias(64, 96, 16, 32)
    x = torch.randn(64, 96, device="cuda")
    bias_row = torch.randn(1, 96, device="cuda")
    y = kernel(x, bias_row.squeeze(0))
    torch.testing.assert_close(y, ref_add_bias(x, bias_row), rtol=1e-5, atol=1e-5)


if __name__ == "__main__":
    main()
