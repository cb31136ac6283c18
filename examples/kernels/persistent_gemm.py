import torch
import tilelang
import tilelang.language as T
from tilelang.carver.arch import driver


@tilelang.jit(out_idx=[2])
def matmul(M, N, K, block_M=64, block_N=64, block_K=32):
    sm_num = driver.get_num_sms()
    m_tiles = T.ceildiv(M, block_M)
    n_tiles = T.ceildiv(N, block_N)
    waves = T.ceildiv(m_tiles * n_tiles, sm_num)

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float32), B: T.Tensor((K, N), T.float32), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(sm_num, threads=128) as block_id:
            A_shared = T.alloc_shared((block_M, block_K), T.float32)
            B_shared = T.alloc_shared((block_K, block_N), T.float32)
            C_local = T.alloc_fragment((block_M, block_N), T.float32)
            for w in T.serial(waves):
                tile_id = sm_num * w + block_id
                bx = tile_id // n_tiles
                by = tile_id % n_tiles
                if bx < m_tiles:
                    T.clear(C_local)
                    for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                        T.copy(A[bx * block_M, k * block_K], A_shared)
                        T.copy(B[k * block_K, by * block_N], B_shared)
                        T.gemm(A_shared, B_shared, C_local)
                    T.copy(C_local, C[bx * block_M, by * block_N])

    return main


def ref_program(a, b):
    return a @ b


kernel = matmul(1088, 512, 64)  # 17 x 8 = 136 tiles: two waves over 132 SMs, the second partial
a = torch.randn(1088, 64, device="cuda")
b = torch.randn(64, 512, device="cuda")
torch.testing.assert_close(kernel(a, b), ref_program(a, b))
