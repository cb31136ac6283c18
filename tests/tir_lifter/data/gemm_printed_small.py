"""PrimFunc.script() of examples/kernels/gemm.py built at M=5, N=4, K=6, tiles 2 (literal sizes).

Expected: verified
"""
# flake8: noqa
# ruff: noqa
from tvm.script import tirx as T

@T.prim_func
def main(A_handle: T.handle, B_handle: T.handle, C_handle: T.handle):
    A = T.match_buffer(A_handle, (5, 6), "float16", strides=(6, 1))
    B = T.match_buffer(B_handle, (6, 4), "float16", strides=(4, 1))
    C = T.match_buffer(C_handle, (5, 4), "float16", strides=(4, 1))
    # with T.sblock("root"):
    for bx in T.thread_binding(2, thread="blockIdx.x"):
        for by in T.thread_binding(3, thread="blockIdx.y"):
            tx: T.int32 = T.launch_thread_idx(0)
            ty: T.int32 = T.launch_thread_idx(1)
            tz: T.int32 = T.launch_thread_idx(2)
            with T.sblock("tilelang_root"):
                T.reads()
                T.writes()
                T.sblock_attr({"tl.launch_threads": [128, 1, 1]})
                A_shared = T.sblock_alloc_buffer((2, 2), "float16", scope="shared.dyn")
                B_shared = T.sblock_alloc_buffer((2, 2), "float16", scope="shared.dyn")
                C_local = T.sblock_alloc_buffer((2, 2), scope="local.fragment")
                T.fill(T.region(C_local[0, 0], 2, 2, 2), 0)
                for k in T.serial(3, annotations={"num_stages": 3}):
                    T.copy(T.region(A[by * 2, k * 2], 1, 2, 2), T.region(A_shared[0, 0], 2, 2, 2))
                    T.copy(T.region(B[k * 2, bx * 2], 1, 2, 2), T.region(B_shared[0, 0], 2, 2, 2))
                    T.gemm(T.region(A_shared[0, 0], 1, 2, 2), T.region(B_shared[0, 0], 1, 2, 2), T.region(C_local[0, 0], 3, 2, 2), T.bool(False), T.bool(False), 2, 2, 2, 0, T.bool(False), 0, 0, 0)
                T.copy(T.region(C_local[0, 0], 1, 2, 2), T.region(C[by * 2, bx * 2], 2, 2, 2))
