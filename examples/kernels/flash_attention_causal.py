"""Causal flash attention, forward, factory style: online softmax over key tiles (running
maximum, exp2 rescaling with log2(e) folded into the scale), one block per query tile and head.

Expected: verified (O = softmax(Q K^T / sqrt(D) + causal mask) V).
"""
import math

import tilelang
import tilelang.language as T

LOG2_E = 1.44269504


def ref_program(Q, K, V):
    import torch
    scores = Q.float() @ K.float().transpose(-1, -2) / math.sqrt(Q.shape[-1])
    seq = Q.shape[-2]
    future = torch.ones(seq, seq, dtype=torch.bool, device=Q.device).triu(1)
    scores = scores.masked_fill(future, float("-inf"))
    return torch.softmax(scores, dim=-1) @ V.float()


@tilelang.jit(out_idx=[3])
def flash_attention(heads, seq, dim, block_M=64, block_N=32):
    scale = LOG2_E / math.sqrt(dim)
    shape = [heads, seq, dim]

    @T.prim_func
    def attention(Q: T.Tensor(shape, T.float16), K: T.Tensor(shape, T.float16), V: T.Tensor(shape, T.float16),
                  O: T.Tensor(shape, T.float32)):
        with T.Kernel(T.ceildiv(seq, block_M), heads, threads=128) as (bq, h):
            q = T.alloc_shared([block_M, dim], T.float16)
            k = T.alloc_shared([block_N, dim], T.float16)
            v = T.alloc_shared([block_N, dim], T.float16)
            s = T.alloc_fragment([block_M, block_N], T.float32)
            p = T.alloc_fragment([block_M, block_N], T.float16)
            acc = T.alloc_fragment([block_M, dim], T.float32)
            row_max = T.alloc_fragment([block_M], T.float32)
            old_max = T.alloc_fragment([block_M], T.float32)
            rescale = T.alloc_fragment([block_M], T.float32)
            tile_sum = T.alloc_fragment([block_M], T.float32)
            denominator = T.alloc_fragment([block_M], T.float32)
            T.copy(Q[h, bq * block_M:(bq + 1) * block_M, :], q)
            T.clear(acc)
            T.clear(denominator)
            T.fill(row_max, -T.infinity(T.float32))
            last = T.min(T.ceildiv(seq, block_N), T.ceildiv((bq + 1) * block_M, block_N))
            for kt in T.Pipelined(last, num_stages=1):
                T.copy(K[h, kt * block_N:(kt + 1) * block_N, :], k)
                for i, j in T.Parallel(block_M, block_N):
                    s[i, j] = T.if_then_else(bq * block_M + i >= kt * block_N + j, 0, -T.infinity(T.float32))
                T.gemm(q, k, s, transpose_B=True)
                T.copy(row_max, old_max)
                T.reduce_max(s, row_max, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    rescale[i] = T.exp2(old_max[i] * scale - row_max[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    s[i, j] = T.exp2(s[i, j] * scale - row_max[i] * scale)
                T.reduce_sum(s, tile_sum, dim=1)
                for i in T.Parallel(block_M):
                    denominator[i] = denominator[i] * rescale[i] + tile_sum[i]
                for i, j in T.Parallel(block_M, dim):
                    acc[i, j] *= rescale[i]
                T.copy(s, p)
                T.copy(V[h, kt * block_N:(kt + 1) * block_N, :], v)
                T.gemm(p, v, acc)
            for i, j in T.Parallel(block_M, dim):
                acc[i, j] /= denominator[i]
            T.copy(acc, O[h, bq * block_M:(bq + 1) * block_M, :])

    return attention


def main():
    import torch
    heads, seq, dim = 2, 128, 32
    q, k, v = (torch.randn(heads, seq, dim, device="cuda", dtype=torch.float16) for _ in range(3))
    kernel = flash_attention(heads, seq, dim)
    torch.testing.assert_close(kernel(q, k, v), ref_program(q, k, v), rtol=1e-2, atol=1e-2)


if __name__ == "__main__":
    main()
