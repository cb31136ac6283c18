"""What one repair candidate costs: CPU seconds to trace and check it, cold children against a warm server.

    python benchmarks/fix_candidate_cost.py FILE [FILE ...] [--candidates 6] [--mode cold|warm|both]

For each buggy file: the file is checked as ``fix`` checks it, its candidate pool is built as
``traced_fixes`` builds it, and the first ``--candidates`` candidates are each traced and checked
(``check_candidate``: one device, 2 simulated ranks with the proof, 4 screened) — with a fresh
sandboxed child per run (cold) and with the fork server that ``translate DIR`` uses (warm).  CPU
seconds are this process's, its reaped children's and the live server's (the server's grandchildren
included), so the figure does not depend on the machine's load; wall seconds are printed beside.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import resource
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from verify_agent.repair.traced_fixes import (TracedSettings, check_candidate, overlay_root,  # noqa: E402
                                              pool_for, warm_for)


def _cpu(server) -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    live = server.cpu_seconds_used() if server is not None else 0.0
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime + live


def measure(path: Path, count: int, warm: bool) -> list[tuple[float, float, str, str]]:
    from verify_agent.repair.commands import check_text

    source = path.read_text()
    rows = []
    context = warm_for(str(path), source) if warm else contextlib.nullcontext(None)
    with context as server:
        report = check_text(path, source).report
        pool = pool_for(source, str(path), report)
        for candidate in pool[:count]:
            cpu, wall = _cpu(server), time.perf_counter()
            checked, copy = check_candidate(candidate.patched, str(path), TracedSettings(), 120.0)
            shutil.rmtree(overlay_root(copy), ignore_errors=True)
            verdict = checked.report.verdict if checked.report is not None else "does not run"
            rows.append((_cpu(server) - cpu, time.perf_counter() - wall, verdict, candidate.description))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--candidates", type=int, default=6)
    parser.add_argument("--mode", choices=("cold", "warm", "both"), default="both")
    args = parser.parse_args()
    modes = ("cold", "warm") if args.mode == "both" else (args.mode,)
    print(f"load average {os.getloadavg()[0]:.1f}")
    summary = {}
    for mode in modes:
        cpus = []
        for path in args.files:
            for cpu, wall, verdict, description in measure(path, args.candidates, mode == "warm"):
                cpus.append(cpu)
                print(f"{mode:<5} {path.name:<44} {cpu:6.1f} CPU s {wall:6.1f} s  {verdict:<12} {description[:70]}",
                      flush=True)
        summary[mode] = cpus
    for mode, cpus in summary.items():
        if cpus:
            print(f"{mode}: {len(cpus)} candidates, median {statistics.median(cpus):.1f} CPU s, "
                  f"mean {statistics.mean(cpus):.1f} CPU s per candidate")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
