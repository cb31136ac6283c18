"""Seconds to translate and verify every gallery file (in one process, after imports).

    python benchmarks/bench_translate.py [FILES...]
    python benchmarks/bench_translate.py --traced [FILES...]   # the tracing frontend (runs the code)

Prints one line per file (verdict, expected verdict, seconds) and the slowest file.  With
``--traced`` the time is split into running the file (child process: one device + 2 simulated
ranks, torch import included) and checking the recording; the default files are both galleries.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from verify_agent.pipeline import TranslateOptions, translate_and_verify

ROOT = Path(__file__).resolve().parents[1]


def _expected_verdict(path: Path) -> str:
    table = path.parent / "expected.json"
    if table.exists():
        entry = json.loads(table.read_text()).get(path.name, {})
        return entry.get("verdict", "?") if isinstance(entry, dict) else str(entry)
    doc = path.read_text().split('"""')
    last = doc[1].strip().splitlines()[-1].strip().lower() if len(doc) > 2 else "?"
    return last.replace("expected:", "").strip()


def traced(files: list[Path]) -> None:
    from frontends.traced import TraceFailure, TraceOptions, trace_file
    from verifier.traced_check import check_traced

    if not files:
        files = sorted((ROOT / "examples" / "models").glob("*.py")) + sorted((ROOT / "examples" / "realworld").glob("*.py"))
    rows = []
    for path in files:
        started = time.perf_counter()
        outcome = trace_file(path, TraceOptions(world=2), shown_as=path.name)
        ran = time.perf_counter() - started
        if isinstance(outcome, TraceFailure):
            verdict, checked = "violations" if outcome.kind == "violation" else outcome.kind, 0.0
        else:
            started = time.perf_counter()
            verdict = check_traced(outcome, timeout_s=120).verdict
            checked = time.perf_counter() - started
        want = _expected_verdict(path)
        rows.append((ran + checked, path.name, verdict == want))
        print(f"{ran:7.2f}s run {checked:7.2f}s check  {verdict:<11} (expected {want:<10}) {path.name}", flush=True)
    slowest = max(rows)
    print(f"slowest: {slowest[1]} {slowest[0]:.2f}s; total {sum(r[0] for r in rows):.1f}s for {len(rows)} files; "
          f"{sum(r[2] for r in rows)}/{len(rows)} verdicts as expected")


def main() -> None:
    if sys.argv[1:2] == ["--traced"]:
        traced([Path(f).resolve() for f in sys.argv[2:]])
        return
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
