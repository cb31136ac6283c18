"""Seeded faults in the code a `verify-agent plan` proves: each mutant changes one line of megatron-core
itself (its sequence-parallel mappings, its tensor-parallel linear layers: a collective dropped, a
reduction's op or dim changed, a backward identity ...) and `plan` runs on the plan example
(`examples/plans/megatron_gpt_tp_sp_pp2_dp2.py`, megatron-core's GPTModel with TP+SP) against the
mutated copy.  Ground truth: the same file on real gloo ranks (1 vs 2, outputs and gradients) with
the mutated copy first on the import path.  A fault is *found at its line* when `plan` says
violations and a layer error names the mutated file and a line the mutation wrote (its changed lines in the
mutated file, from the first to the last: a moved statement spans both places; a deletion, the lines on
either side of the gap; where no op is left there, as realcode's mutated twins count it, up to 3 lines above;
and the whole simple statement those lines are part of, e.g. a `return (...)` over several lines).

    python benchmarks/plan_faults.py [--limit 20] [--seed 0] [--timeout 600] [--json out.json]

The installed package is never edited (a tree of links with the one mutated file copied).
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import difflib
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))

from mutants.library import library_mutants, write_library_mutant  # noqa: E402

PLAN = ROOT / "examples" / "plans" / "megatron_gpt_tp_sp_pp2_dp2.py"
FILES = ("megatron/core/tensor_parallel/mappings.py", "megatron/core/tensor_parallel/layers.py")


def _mutants(limit: int, seed: int) -> list:
    seen, found = set(), []
    for m in library_mutants():
        key = (m.file, m.line, m.operator, m.description)
        if m.file in FILES and key not in seen:
            seen.add(key)
            found.append(dataclasses.replace(m, driver=PLAN))
    random.Random(seed).shuffle(found)
    return found[:limit]


def _ground_truth(driver: Path, lib: Path) -> str:
    """'differ' / 'agree' / 'error: ...' (one rank cannot run it) from real gloo ranks, run in a fresh
    process with the copy first."""
    code = ("import sys; sys.path.insert(0, %r); sys.path.insert(0, %r)\n"
            "from groundtruth import realworld_runner as rw\n"
            "if __name__ == '__main__':\n"
            "    r = rw.run_file(%r, 2, timeout=300.0)\n"
            "    print('RESULT', r.status, (r.error or '').replace(chr(10), ' ')[:300])\n"
            % (str(ROOT / "tests"), str(lib), str(driver)))
    script = lib / "_ground_truth.py"
    script.write_text(code)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=lib, timeout=900)
    line = next((l for l in run.stdout.splitlines() if l.startswith("RESULT ")), "RESULT error no result")
    status = line.split()[1]
    # the ranks raising or hanging where one rank runs is a difference as much as other numbers are
    return {"match": "agree", "mismatch": "differ", "error": "differ", "deadlock/timeout": "differ"}.get(
        status, f"error: {line[7:]}")


def _tool(driver: Path, lib: Path, timeout: float) -> tuple[int, dict, float]:
    started = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "verify_agent", "plan", str(driver), "--format", "json",
                          "--timeout", str(timeout)], capture_output=True, text=True, cwd=lib,
                         timeout=timeout + 120)
    try:
        document = json.loads(run.stdout)
    except ValueError:
        document = {"verdict": "error", "layers": None}
    return run.returncode, document, time.monotonic() - started


def mutated_lines(original: str, mutated: str) -> range:
    """The lines of the mutated file the mutation wrote, first to last (a deletion: the two lines
    around the gap)."""
    written, after = set(), mutated.splitlines()
    matcher = difflib.SequenceMatcher(None, original.splitlines(), after, autojunk=False)
    for tag, _, _, start, stop in matcher.get_opcodes():
        if tag in ("replace", "insert"):
            written.update(range(start + 1, stop + 1))
        if tag == "insert" and after[stop:2 * stop - start] == after[start:stop]:
            written.update(range(stop + 1, 2 * stop - start + 1))   # a duplicate: either copy is the new one
        elif tag == "delete":
            written.update((start, start + 1))
    if not written:
        return range(0)
    start, stop = min(written), max(written) + 1
    try:   # the statement the mutation wrote into (a return of several lines names its first)
        statements = [node for node in ast.walk(ast.parse(mutated)) if isinstance(node, ast.stmt)
                      and not isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.If, ast.For, ast.While,
                                                ast.With, ast.Try))
                      and node.lineno <= start and stop - 1 <= node.end_lineno]
    except SyntaxError:
        statements = []
    if statements:
        inner = min(statements, key=lambda node: node.end_lineno - node.lineno)
        start, stop = min(start, inner.lineno), max(stop, inner.end_lineno + 1)
    if not any("(" in after[n - 1] for n in range(start, stop) if 0 < n <= len(after)):
        start = max(1, start - 3)   # no op left where the mutation wrote (a collective dropped): as
        # realcode's mutated twins count it, the line after which the missing op belongs, up to 3 above
    return range(start, stop)


def _at_line(document: dict, file: str, lines: range) -> bool:
    layers = document.get("layers") or {}
    return any(d.get("line") in lines and str(d.get("file") or "").endswith(file)
               for d in layers.get("diagnostics", []) if d.get("severity") == "error")


def _named(document: dict) -> str | None:
    """The first layer error's file:line, as the tool named it."""
    layers = document.get("layers") or {}
    first = next((d for d in layers.get("diagnostics", []) if d.get("severity") == "error"), None)
    return None if first is None else f"{first.get('file') or 'the plan file'}:{first.get('line')}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    mutants = _mutants(args.limit, args.seed)
    rows = []
    with tempfile.TemporaryDirectory(prefix="plan_faults_") as folder:
        for index, m in enumerate(mutants, 1):
            driver, lib = write_library_mutant(Path(folder), m)
            truth = _ground_truth(driver, lib)
            code, document, seconds = _tool(driver, lib, args.timeout)
            lines = mutated_lines(m.original, m.source)
            row = {"file": m.file, "line": m.line, "lines": [lines.start, lines.stop - 1],
                   "operator": m.operator, "change": m.description,
                   "truth": truth, "verdict": document.get("verdict"), "exit": code,
                   "at_line": _at_line(document, m.file, lines), "named": _named(document),
                   "seconds": round(seconds, 1),
                   "cpu_seconds": (document.get("stats") or {}).get("cpu_seconds")}
            rows.append(row)
            where = " at its line" if row["at_line"] else f" named at {row['named']}" if row["named"] else ""
            print(f"[{index}/{len(mutants)}] {m.file}:{m.line} {m.operator}: truth {truth}, plan {row['verdict']}"
                  f"{where} ({row['cpu_seconds']} CPU s)", flush=True)
    differ = [r for r in rows if r["truth"] == "differ"]
    agree = [r for r in rows if r["truth"] == "agree"]
    print(f"\nmutants {len(rows)}: numbers differ on gloo {len(differ)}, agree {len(agree)}, "
          f"ground truth failed {len(rows) - len(differ) - len(agree)}")
    print(f"differ -> violations {sum(r['verdict'] == 'violations' for r in differ)}, "
          f"at the mutated line {sum(r['at_line'] for r in differ)}, "
          f"verified {sum(r['verdict'] == 'verified' for r in differ)} (false verified), "
          f"other {sum(r['verdict'] not in ('violations', 'verified') for r in differ)}")
    print(f"agree -> verified {sum(r['verdict'] == 'verified' for r in agree)}, "
          f"violations {sum(r['verdict'] == 'violations' for r in agree)} (false alarms), "
          f"other {sum(r['verdict'] not in ('violations', 'verified') for r in agree)}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
