"""Seconds to translate and verify every gallery file (in one process, after imports).

    python benchmarks/bench_translate.py [FILES...]

Prints one line per file (verdict, expected verdict, seconds) and the slowest file.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from verify_agent.pipeline import TranslateOptions, translate_and_verify

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    gallery = ROOT / "examples" / "models"
    expected = json.loads((gallery / "expected.json").read_text())
    files = [Path(f) for f in sys.argv[1:]] or sorted(gallery / name for name in expected)
    timings = []
    for path in files:
        started = time.perf_counter()
        result = translate_and_verify(path.read_text(), str(path.relative_to(ROOT)), TranslateOptions(llm="off"))
        seconds = time.perf_counter() - started
        verdict = result.report.verdict if result.report else f"error: {result.usage_error}"
        want = expected.get(path.name, {}).get("verdict", "?")
        timings.append((seconds, path.name))
        print(f"{seconds:7.2f}s  {verdict:<11} (expected {want:<10}) {path.name}", flush=True)
    slowest = max(timings)
    print(f"slowest: {slowest[1]} {slowest[0]:.2f}s; total {sum(t for t, _ in timings):.1f}s for {len(timings)} files")


if __name__ == "__main__":
    main()
