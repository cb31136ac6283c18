"""A strided, padded 2-D convolution as an implicit GEMM, in the style of the convolution
examples: NHWC image, HWCF filters, ``T.im2col`` gathers each block's patch rows, and the
filters and the output are read and written through flat 2-D views of their memory
(``T.Tensor(shape, dtype, X.data)``).  Eager ``@tilelang.jit`` under ``@tilelang.autotune``,
called with its tiles given (TileLang builds it as called and launches it at once).

Expected: verified (out = conv2d of the image with the filters, the reference below).
"""
import tilelang
import tilelang.language as T

CONFIGS = [{"block_M": 32, "block_N": 32, "block_K": 32}, {"block_M": 64, "block_N": 32, "block_K": 16}]


def conv_reference(stride, pad):
    def run(image, filters):
        import torch
        nchw = image.permute(0, 3, 1, 2)
        fchw = filters.permute(3, 2, 0, 1)
        return torch.nn.functional.conv2d(nchw, fchw, stride=stride, padding=pad).permute(0, 2, 3, 1)

    return run


@tilelang.autotune(configs=CONFIGS)
@tilelang.jit
def conv2d(image, filters, stride, pad, block_M, block_N, block_K, dtype=T.float16, accum_dtype=T.float32):
    batch, height, width, channels, features, taps = T.const("batch, height, width, channels, features, taps")
    out_h = (height + 2 * pad - taps) // stride + 1
    out_w = (width + 2 * pad - taps) // stride + 1
    image: T.Tensor((batch, height, width, channels), dtype)
    filters: T.Tensor((taps, taps, channels, features), dtype)
    out = T.empty((batch, out_h, out_w, features), dtype)

    with T.Kernel(T.ceildiv(features, block_N), T.ceildiv(batch * out_h * out_w, block_M), threads=128) as (bf, bp):
        patch = T.alloc_shared((block_M, block_K), dtype)
        weight = T.alloc_shared((block_K, block_N), dtype)
        acc = T.alloc_fragment((block_M, block_N), accum_dtype)
        filters_2d = T.Tensor((taps * taps * channels, features), dtype, filters.data)
        out_2d = T.Tensor((batch * out_h * out_w, features), dtype, out.data)
        T.clear(acc)
        for kt in T.Pipelined(T.ceildiv(taps * taps * channels, block_K), num_stages=2):
            T.im2col(image, patch, bp, kt, taps, stride, 1, pad)
            T.copy(filters_2d[kt * block_K, bf * block_N], weight)
            T.gemm(patch, weight, acc)
        T.copy(acc, out_2d[bp * block_M, bf * block_N])
    return out


def main(batch=2, height=12, width=10, channels=8, features=24, taps=3, stride=2, pad=1):
    import torch
    image = torch.randn(batch, height, width, channels, device="cuda", dtype=torch.float16)
    filters = torch.randn(taps, taps, channels, features, device="cuda", dtype=torch.float16)
    out = conv2d(image, filters, stride, pad, block_M=64, block_N=32, block_K=16)
    expected = conv_reference(stride, pad)(image, filters)
    torch.testing.assert_close(out, expected, rtol=1e-2, atol=1e-2)


if __name__ == "__main__":
    main()
