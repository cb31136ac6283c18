"""CPU seconds per file of ``verify-agent translate DIR`` (warm: one fork server per directory),
against the same files run one by one (cold: every file's children import torch again).

    python benchmarks/translate_dir.py                 # 30 gallery files copied into a temporary directory
    python benchmarks/translate_dir.py --dir DIR       # your own directory
    python benchmarks/translate_dir.py --cold 10       # compare with the first 10 files run alone (0: none)

Per file: the tool's own CPU and its children's (``translate DIR`` measures each file itself: this
process's and ended children's ``getrusage``, plus the living fork server's ``/proc`` accounting; the
``stats.cpu_seconds`` of each file's document).  The command's whole CPU (its start included) is
measured here with ``RUSAGE_CHILDREN``.  Cold runs are ``translate FILE --llm off``, one process
each, measured the same way.  The goal printed last: at most 1.5 CPU s per file after the first.
The verdicts of both ways are compared file by file.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOAL_CPU_S = 1.5
GALLERY = ROOT / "examples" / "models"


def gallery_files(count: int) -> list[Path]:
    """``count`` distinct gallery files: every DTensor and Megatron example, then explicit torch.distributed ones."""
    files = sorted(GALLERY.glob("*.py"))
    libraries = [f for f in files if f.name.startswith(("dtensor_", "megatron_"))]
    plain = [f for f in files if f not in libraries]
    return (libraries + plain)[:count]


def children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def run(args: list[str], timeout: float) -> tuple[subprocess.CompletedProcess, float, float]:
    before, started = children_cpu(), time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "verify_agent", *args], capture_output=True, text=True,
                          cwd=str(ROOT), timeout=timeout)
    return done, children_cpu() - before, time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, help="a directory to check (default: 30 gallery files copied)")
    parser.add_argument("--files", type=int, default=30, help="gallery files to copy (default 30)")
    parser.add_argument("--cold", type=int, default=30, help="files also run one by one (default 30; 0: none)")
    parser.add_argument("--timeout", type=float, default=300.0, help="--timeout per file")
    options = parser.parse_args()
    scratch = None
    if options.dir is None:
        scratch = Path(tempfile.mkdtemp(prefix="translate-dir-"))
        for path in gallery_files(options.files):
            shutil.copy(path, scratch / path.name)
        directory = scratch
    else:
        directory = options.dir.resolve()
    try:
        print(f"load before: {os.getloadavg()[0]:.1f} (1 min), {os.cpu_count()} cores")
        done, total_cpu, wall = run(["translate", str(directory), "--format", "json", "--timeout",
                                     str(options.timeout)], timeout=options.timeout * 40 + 600)
        document = json.loads(done.stdout)
        files = document["files"]
        print(f"translate DIR: {len(files)} files (exit {done.returncode}), {len(document['skipped'])} skipped; "
              f"{total_cpu:.1f} CPU s for the whole command, {wall:.0f} s wall")
        per_file = [f["stats"]["cpu_seconds"] for f in files]
        for body, cpu in zip(files, per_file):
            started = "  (a warm server started)" if body["stats"].get("server_start") else ""
            print(f"  {cpu:6.2f} CPU s ({body['stats'].get('tool_cpu_seconds', 0.0):5.2f} in the tool's process)  "
                  f"{body['verdict']:<12} {Path(body['file']).name}{started}")
        if not per_file:
            return 1
        # the first file of each group of files importing the same installed libraries starts that group's server
        first = [cpu for body, cpu in zip(files, per_file) if body["stats"].get("server_start")]
        rest = [cpu for body, cpu in zip(files, per_file) if not body["stats"].get("server_start")] or per_file
        print(f"first files (one per warm server, {len(first)}): " + ", ".join(f"{cpu:.2f}" for cpu in first)
              + " CPU s (the server's start included)")
        print(f"after the first ({len(rest)} files): median {statistics.median(rest):.2f}, "
              f"mean {statistics.mean(rest):.2f}, max {max(rest):.2f} CPU s")
        print(f"whole command per file (its start and the first file included): {total_cpu / len(files):.2f} CPU s")
        cold = []
        mismatches = []
        for body in files[:max(0, options.cold)]:
            one, cpu, _ = run(["translate", body["file"], "--format", "json", "--llm", "off", "--timeout",
                               str(options.timeout)], timeout=options.timeout + 120)
            try:
                alone = json.loads(one.stdout)
                verdict = alone["verdict"]
            except (ValueError, KeyError):
                alone, verdict = {}, f"unreadable (exit {one.returncode})"
            cold.append(cpu)
            if verdict != body["verdict"]:
                why = next((d["message"] for d in alone.get("diagnostics", []) if d.get("severity") == "error"), "")
                mismatches.append(f"{Path(body['file']).name}: warm {body['verdict']}, alone {verdict} "
                                  f"({' '.join(why.split())[:200]})")
        if cold:
            warm_same = per_file[:len(cold)]
            print(f"cold, one by one ({len(cold)} files): median {statistics.median(cold):.2f}, "
                  f"max {max(cold):.2f} CPU s per file (warm on the same files: median "
                  f"{statistics.median(warm_same):.2f}); verdicts differing: {len(mismatches)}")
            for line in mismatches:
                print(f"  {line}")
        print(f"load after: {os.getloadavg()[0]:.1f} (1 min)")
        median = statistics.median(rest)
        print(f"goal: <= {GOAL_CPU_S} CPU s per file after the first: median {median:.2f}, max {max(rest):.2f} "
              f"-> {'met' if median <= GOAL_CPU_S else 'not met'} (median), "
              f"{'met' if max(rest) <= GOAL_CPU_S else 'not met'} (every file)")
        return 0
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
