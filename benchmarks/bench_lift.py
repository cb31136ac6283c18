"""Seconds to lift and check a tiled GEMM: 1024^3 (goal < 2 s), then larger sizes to show
that the cost does not grow with tensor sizes (shape reduction).

    python benchmarks/bench_lift.py
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tir_lifter import run_lift  # noqa: E402

GEMM = ROOT / "examples" / "kernels" / "gemm.py"


def time_lift(path: str, repeats: int = 3) -> tuple[float, str]:
    best, verdict = float("inf"), ""
    for _ in range(repeats):
        start = time.perf_counter()
        report = run_lift(path, frontend="text")
        best = min(best, time.perf_counter() - start)
        verdict = report.verdict
    return best, verdict


def main() -> None:
    seconds, verdict = time_lift(str(GEMM))
    print(f"lift+check tiled gemm 1024^3: {seconds:.3f} s ({verdict}; goal < 2 s)")
    source = GEMM.read_text()
    with tempfile.TemporaryDirectory() as tmp:
        for size in (4096, 16384, 65536):
            path = Path(tmp) / f"gemm_{size}.py"
            path.write_text(source.replace("matmul(1024, 1024, 1024,", f"matmul({size}, {size}, {size},"))
            seconds, verdict = time_lift(str(path))
            print(f"lift+check tiled gemm {size}^3: {seconds:.3f} s ({verdict})")


if __name__ == "__main__":
    main()
