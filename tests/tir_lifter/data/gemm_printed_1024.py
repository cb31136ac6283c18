"""PrimFunc.script() of examples/kernels/gemm.py at 1024^3 (literal sizes).

Expected: unsupported (literal sizes cannot be reduced)
"""
# flake8: noqa
# ruff: noqa
from tvm.script import tirx as T

@T.prim_func
def main(A_handle: T.handle, B_handle: T.handle, C_handle: T.handle):
    A = T.match_buffer(A_handle, (1024, 1024), "float16", strides=(1024, 1))
    B = T.match_buffer(B_handle, (1024, 1024), "float16", strides=(1024, 1))
    C = T.match_buffer(C_handle, (1024, 1024), "float16", strides=(1024, 1))
    # with T.sblock("root"):
    for bx in T.thread_binding(8, thread="blockIdx.x"):
        for by in T.thread_binding(8, thread="blockIdx.y"):
            tx: T.int32 = T.launch_thread_idx(0)
            ty: T.int32 = T.launch_thread_idx(1)
            tz: T.int32 = T.launch_thread_idx(2)
            with T.sblock("tilelang_root"):
                T.reads()
                T.writes()
                T.sblock_attr({"tl.launch_threads": [128, 1, 1]})
                A_shared = T.sblock_alloc_buffer((128, 32), "float16", scope="shared.dyn")
                B_shared = T.sblock_alloc_buffer((32, 128), "float16", scope="shared.dyn")
                C_local = T.sblock_alloc_buffer((128, 128), scope="local.fragment")
                T.fill(T.region(C_local[0, 0], 2, 128, 128), 0)
                for k in T.serial(32, annotations={"num_stages": 3}):
                    T.copy(T.region(A[by * 128, k * 32], 1, 128, 32), T.region(A_shared[0, 0], 2, 128, 32))
                    T.copy(T.region(B[k * 32, bx * 128], 1, 32, 128), T.region(B_shared[0, 0], 2, 32, 128))
                    T.gemm(T.region(A_shared[0, 0], 1, 128, 32), T.region(B_shared[0, 0], 1, 32, 128), T.region(C_local[0, 0], 3, 128, 128), T.bool(False), T.bool(False), 128, 128, 32, 0, T.bool(False), 0, 0, 0)
                T.copy(T.region(C_local[0, 0], 1, 128, 128), T.region(C[by * 128, bx * 128], 2, 128, 128))
