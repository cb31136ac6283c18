"""``verify-agent lift`` over a directory of TileLang kernel files: verdict and time per file.

    python benchmarks/bench_lift.py CORPUS_DIR [--jobs 2] [--limit N] [--json out.json]

Files that define kernels (``T.prim_func``, ``@tilelang.jit`` or ``T.Kernel``) are lifted
one by one, each in its own elaboration child as the CLI does; prints one line per file,
the share reaching ``verified``/``violations`` (a verdict about the code), the share
``unsupported`` (with the reason counted), internal errors, and the median seconds.
Without a directory, times the bundled tiled GEMM (the shape-reduction figure).
"""
from __future__ import annotations

import argparse
import collections
import json
import re
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tir_lifter import LiftInputError, LiftInternalError, run_lift  # noqa: E402

RUN_BUDGET, CHECK_BUDGET = 20.0, 120.0
_DEFINES = re.compile(r"T\.prim_func|@tilelang\.jit|T\.Kernel")


def kernel_files(corpus: Path) -> list[Path]:
    return sorted(p for p in corpus.rglob("*.py") if _DEFINES.search(p.read_text(encoding="utf-8", errors="replace")))


def lift_one(path: Path) -> dict:
    import resource
    start = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        report = run_lift(str(path))
        verdict, reason = report.verdict, ""
        if verdict == "unsupported":
            first = next((d for d in report.diagnostics if d.check == "unsupported"), None)
            reason = first.message if first else "nothing proven"
        elif verdict == "violations":
            first = next(d for d in report.diagnostics if d.severity == "error" and d.check != "unsupported")
            reason = f"{first.check}: {first.message}"
        proven = report.proven
    except LiftInputError as exc:
        verdict, reason, proven = "input-error", str(exc), []
    except LiftInternalError as exc:
        verdict, reason, proven = "error", str(exc), []
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime  # exact with --jobs 1
    return {"file": str(path), "verdict": verdict, "reason": reason, "seconds": time.perf_counter() - start,
            "cpu": cpu, "proven": proven}


def _as_completed(pool: ThreadPoolExecutor, work, items):
    from concurrent.futures import as_completed
    for future in as_completed([pool.submit(work, item) for item in items]):
        yield future.result()


def lift_batch(paths: list[Path]) -> list[dict]:
    from tir_lifter.elaborate_run import report_from_json, run_batch
    rows = []
    for body in run_batch([str(p) for p in paths], timeout=300.0 * len(paths), run_budget=RUN_BUDGET,
                          check_budget=CHECK_BUDGET):
        if "internal_error" in body:
            rows.append({"file": body["file"], "verdict": "error", "reason": body["internal_error"],
                         "seconds": body.get("seconds", 0.0), "proven": []})
            continue
        report = report_from_json(body)
        first = next((d for d in report.diagnostics if d.severity == "error"), None)
        reason = f"{first.check}: {first.message}" if first and first.check != "unsupported" else \
            (first.message if first else "")
        rows.append({"file": body["file"], "verdict": report.verdict, "reason": reason,
                     "seconds": report.seconds, "cpu": report.extra.get("cpu_seconds"), "proven": report.proven})
    return rows


def _category(reason: str) -> str:
    text = re.sub(r"^[\w.]+: ", "", reason)
    text = re.sub(r"\d+", "N", text)
    return text[:90]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", nargs="?", type=Path)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--batch", type=int, default=0,
                        help="files per child process (imports paid once per child); 0: one child per file as "
                             "the CLI does")
    parser.add_argument("--run-budget", type=float, default=RUN_BUDGET, help="CPU s for running a file (batch)")
    parser.add_argument("--check-budget", type=float, default=CHECK_BUDGET, help="CPU s for checking a file (batch)")
    args = parser.parse_args()
    globals().update(RUN_BUDGET=args.run_budget, CHECK_BUDGET=args.check_budget)
    if args.corpus is None:
        gemm = ROOT / "examples" / "kernels" / "gemm.py"
        row = lift_one(gemm)
        print(f"lift+check tiled gemm 1024^3: {row['seconds']:.2f} s ({row['verdict']})")
        return
    files = kernel_files(args.corpus)[: args.limit or None]
    rows = []
    work = lift_one if not args.batch else lift_batch
    items = files if not args.batch else [files[i:i + args.batch] for i in range(0, len(files), args.batch)]
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = pool.map(work, items) if not args.batch else _as_completed(pool, work, items)
        for row in (r for result in results for r in (result if args.batch else [result])):
            rows.append(row)
            rel = Path(row["file"]).relative_to(args.corpus)
            print(f"{row['verdict']:12s} {row['seconds']:6.1f}s  {rel}  {row['reason'][:150]}", flush=True)
    counts = collections.Counter(r["verdict"] for r in rows)
    total = len(rows) or 1
    decided = counts["verified"] + counts["violations"]
    print(f"\n{len(rows)} files define kernels: " + ", ".join(f"{k} {v}" for k, v in counts.most_common()))
    print(f"verdict about the code (verified or violations): {decided}/{len(rows)} = {100 * decided / total:.0f} %")
    print(f"a verdict of the tool (anything but input-error/error): "
          f"{len(rows) - counts['input-error'] - counts['error']}/{len(rows)}")
    print(f"median {statistics.median(r['seconds'] for r in rows):.1f} s wall per file, "
          f"max {max(r['seconds'] for r in rows):.1f} s")
    cpu = [r["cpu"] for r in rows if r.get("cpu") is not None]
    if cpu:
        print(f"median {statistics.median(cpu):.1f} CPU s per file ({len(cpu)} files; run + elaborate + check, "
              f"imports excluded in --batch mode), max {max(cpu):.1f}")
    reasons = collections.Counter(_category(r["reason"]) for r in rows if r["verdict"] in ("unsupported", "error"))
    print("\nmost common reasons (unsupported / error):")
    for reason, count in reasons.most_common(15):
        print(f"  {count:3d}  {reason}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
