"""Helpers for the lifter tests: paths of the example kernels and a gemm kernel template."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "kernels"
DATA = Path(__file__).resolve().parent / "data"

GEMM_TEMPLATE = '''
import tilelang.language as T


def matmul(M, N, K, block_M, block_N, block_K, dtype="float16", accum_dtype="float"):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            {clear}
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy({b_copy}, B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


func = matmul(256, 256, 256, 64, 64, 32)
'''


def gemm_source(clear: str = "T.clear(C_local)", b_copy: str = "B[k * block_K, bx * block_N]") -> str:
    return GEMM_TEMPLATE.format(clear=clear, b_copy=b_copy)


def line_of(path: str, needle: str) -> int:
    """1-based line of the first source line containing ``needle``."""
    for number, text in enumerate(Path(path).read_text().splitlines(), start=1):
        if needle in text:
            return number
    raise AssertionError(f"{needle!r} not in {path}")


def lift_files(folder: Path, files: dict[str, str]) -> dict:
    """Write each ``name: source`` into ``folder``, lift them in one batch; name -> report."""
    from tir_lifter.elaborate_run import report_from_json, run_batch

    paths = {}
    for name, source in files.items():
        (folder / name).write_text(source)
        paths[name] = str(folder / name)
    bodies = {body["file"]: body for body in run_batch(list(paths.values()), timeout=900.0)}
    reports = {}
    for name, path in paths.items():
        assert "internal_error" not in bodies[path], bodies[path]
        reports[name] = report_from_json(bodies[path])
    return reports
