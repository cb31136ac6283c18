"""Two signed 4-bit values packed in each uint8 of B (low nibble first), unpacked with shifts, a
mask and a reinterpret to int8, then scaled per row: C[i, j] = int4(B, i, j) * S[i].

Expected: verified for the sampled bytes of B (every element drawn from 0..255, other values not
proven) and every S.
"""
import tilelang
import tilelang.language as T
from tvm import tirx


def ref_program(B, S):
    import torch
    rows, half = B.shape
    nibbles = torch.stack((B & 15, B >> 4), dim=-1).reshape(rows, 2 * half).to(torch.int8)
    signed = (nibbles << 4) >> 4  # int8 wraps: the nibble's top bit becomes the sign
    return signed.to(torch.float32) * S[:, None]


@tilelang.jit(out_idx=[2])
def int4_unpack_scale(N, K, block_N, block_K):
    @T.prim_func
    def main(B: T.Tensor((N, K // 2), "uint8"), S: T.Tensor((N,), "float32"), C: T.Tensor((N, K), "float32")):
        with T.Kernel(T.ceildiv(K, block_K), T.ceildiv(N, block_N), threads=128) as (bx, by):
            B_shared = T.alloc_shared((block_N, block_K // 2), "uint8")
            S_shared = T.alloc_shared((block_N,), "float32")
            C_local = T.alloc_fragment((block_N, block_K), "float32")
            T.copy(B[by * block_N, bx * block_K // 2], B_shared)
            T.copy(S[by * block_N], S_shared)
            for i, j in T.Parallel(block_N, block_K):
                C_local[i, j] = T.Cast("float32", tirx.reinterpret(
                    "int8", ((B_shared[i, j // 2] >> (T.Cast("uint8", j % 2) * tirx.const(4, "uint8")))
                             & tirx.const(15, "uint8")) << tirx.const(4, "uint8"))
                    >> tirx.const(4, "int8")) * S_shared[i]
            T.copy(C_local, C[by * block_N, bx * block_K])

    return main


def main(N=64, K=128):
    import torch
    kernel = int4_unpack_scale(N, K, 32, 64)
    b = torch.randint(0, 256, (N, K // 2), dtype=torch.uint8, device="cuda")
    s = torch.randn(N, device="cuda")
    torch.testing.assert_close(kernel(b, s), ref_program(b, s))


if __name__ == "__main__":
    main()
