"""The tool on the installed files of real libraries, against gloo ground truth.

    python benchmarks/realcode.py [--entries SUBSTR] [--jobs 2] [--json out.json] [--mutants]

Every entry of benchmarks/realcode_entries.py names a module of an installed library (megatron-core,
fairscale, litgpt, yunchang, deepspeed, torchtitan, transformers, accelerate) and one of its
functions or classes, as the library ships it.  For each entry:

* **ground truth** (benchmarks/realcode_groundtruth.py): the script's own recipe builds the entry on
  1 gloo rank and on 2 and 4 (CPU processes over 127.0.0.1) and compares outputs and gradients
  (cached by a hash of the recipe, the library file and the runner);
* **the tool**: ``verify-agent translate MODULE --entry NAME --format json`` with the arguments a
  user would give (input shapes, ``--arg`` literals, ``--expect`` layouts of rank blocks).

It prints the matrix (ground truth agree/differ x the tool's verdict), every unsupported verdict and
input error with its line and reason, and every wrong definite verdict.  A verdict is meaningful when
it is right and definite: ``verified`` where the ranks agree with one device, ``violations`` where
they differ.  ``--mutants`` runs the mutated twins of benchmarks/realcode_mutants.py instead: the
library's package copied to a temporary directory with one line changed (never the installed files).
Progress goes to stderr.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import hashlib
import inspect
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import realcode_entries as entries  # noqa: E402
import realcode_groundtruth as gt  # noqa: E402

VERDICTS = ("verified", "violations", "unsupported", "input-error", "error")
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "verify-agent" / "realcode"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------- ground truth

def _module_file(module: str, extra_path: str | None = None) -> Path | None:
    import importlib.util

    if extra_path:
        candidate = Path(extra_path, *module.split(".")).with_suffix(".py")
        if candidate.exists():
            return candidate
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    return Path(spec.origin) if spec and spec.origin else None


def truth_hash(entry: entries.Entry, extra_path: str | None = None) -> str:
    h = hashlib.sha256()
    h.update(entry.key.encode())
    h.update(repr((entry.inputs, entry.out, entry.parallel)).encode())
    for part in _recipe_parts(entry.build):
        h.update(part.encode())
    h.update(Path(gt.__file__).read_bytes())
    if entry.library == "hf-tp":
        h.update((ROOT / "benchmarks" / "hf_tp_harness.py").read_bytes())
    f = _module_file(entry.module, extra_path)
    if f is not None and f.exists():
        h.update(f.read_bytes())
    import torch

    h.update(torch.__version__.encode())
    return h.hexdigest()[:20]


def _recipe_parts(fn, depth: int = 0) -> list[str]:
    """The source of a recipe and of what its closure holds (bound names, helper functions), so that
    editing one recipe invalidates only its own cached ground truth."""
    parts = []
    try:
        parts.append(inspect.getsource(fn))
    except (OSError, TypeError):
        parts.append(repr(fn))
    for cell in getattr(fn, "__closure__", None) or ():
        value = cell.cell_contents
        if callable(value) and depth < 3:
            parts += _recipe_parts(value, depth + 1)
        else:   # no object addresses: the hash must be the same in every process
            parts.append(re.sub(r" at 0x[0-9a-fA-F]+", "", repr(value)))
    code = getattr(fn, "__code__", None)
    module = inspect.getmodule(fn)
    for name in (code.co_names if code else ()):   # module-level helpers the recipe calls
        helper = getattr(module, name, None)
        if inspect.isfunction(helper) and helper.__module__ == getattr(module, "__name__", None) and depth < 3:
            parts += _recipe_parts(helper, depth + 1)
    return parts


def ground_truths(selected: list[entries.Entry], timeout: float, extra_path: str | None = None,
                  hash_salt: str = "") -> dict[str, gt.Truth]:
    CACHE.mkdir(parents=True, exist_ok=True)
    result, todo = {}, []
    for e in selected:
        path = CACHE / f"{truth_hash(e, extra_path)}{hash_salt}.json"
        if path.exists():
            d = json.loads(path.read_text())
            result[e.key] = gt.Truth(d["status"], d["worlds"], d.get("error"))
        else:
            todo.append(e)
    if todo:
        log(f"ground truth: {len(todo)} entries on 1, 2 and 4 gloo ranks ({len(selected) - len(todo)} cached)")
        with tempfile.TemporaryDirectory(prefix="realcode_gt_") as tmp:
            out = Path(tmp)
            keys = [e.key for e in todo]
            t0 = time.monotonic()
            gt.run_world(keys, 1, out, timeout, extra_path)
            log(f"  1 rank: {time.monotonic() - t0:.0f}s")
            with cf.ThreadPoolExecutor(2) as pool:
                list(pool.map(lambda w: gt.run_world(keys, w, out, timeout, extra_path), (2, 4)))
            log(f"  2 and 4 ranks: {time.monotonic() - t0:.0f}s")
            for e in todo:
                truth = gt.truth_of(e.key, out)
                result[e.key] = truth
                (CACHE / f"{truth_hash(e, extra_path)}{hash_salt}.json").write_text(json.dumps(truth.to_json()))
    return result


# ---------------------------------------------------------------------------------------- the tool

def run_tool(entry: entries.Entry, timeout: float, target: str | None = None, extra: tuple[str, ...] = ()) -> dict:
    cmd = [sys.executable, "-m", "verify_agent", "translate", target or entry.module, *entry.tool_args(), *extra,
           "--format", "json", "--timeout", str(timeout)]
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=timeout + 120)
    except subprocess.TimeoutExpired:   # the tool outlived its own --timeout (a loaded machine): no verdict
        return {"verdict": "timeout", "exit": None, "seconds": time.monotonic() - t0, "reasons": [
            (None, f"no answer within {timeout + 120:.0f} s")], "violations": [], "command": cmd}
    seconds = time.monotonic() - t0
    try:
        doc = json.loads(proc.stdout)
    except ValueError:
        return {"verdict": "error", "exit": proc.returncode, "seconds": seconds, "reasons": [
            (None, "no JSON document: " + (proc.stderr.strip().splitlines() or ["(no stderr)"])[-1][:300])],
            "violations": [], "command": cmd}
    diags = doc.get("diagnostics", [])
    reasons = [(d.get("line"), d.get("message", "")) for d in diags
               if d.get("severity") in ("error", "warning") and d.get("check") not in ("assumption",)]
    if doc.get("not_traced"):
        nt = doc["not_traced"]
        reasons.append((nt.get("line"), "not traced: " + str(nt.get("reason"))))
    violations = [(d.get("line"), d.get("message", "")) for d in diags if d.get("severity") == "error"]
    # where each error is: its line, and its file when another than the checked one (a module of the
    # user's package the op ran in)
    located = [(d.get("line"), d.get("file")) for d in diags if d.get("severity") == "error"]
    return {"verdict": doc.get("verdict", "error"), "exit": proc.returncode, "seconds": seconds,
            "reasons": reasons, "violations": violations, "located": located, "file": doc.get("file"),
            "command": cmd}


# ---------------------------------------------------------------------------------------- report

def meaningful(truth: str, verdict: str) -> bool:
    return (truth == "agree" and verdict == "verified") or (truth == "differ" and verdict == "violations")


def cause_of(row: dict) -> str:
    """A short class for a non-meaningful verdict (for the ranked list of causes)."""
    if row["truth"] == "not-runnable":
        return "ground truth recipe does not run"
    verdict = row["tool"]["verdict"]
    if row["truth"] == "differ" and verdict == "verified":
        return "FALSE VERIFIED"
    if row["truth"] == "agree" and verdict == "violations":
        return "false alarm"
    text = " ".join(m for _, m in row["tool"]["reasons"])[:400].lower()
    for needle, label in (("no such option", "tool option missing (--expect)"),
                          ("constructor needs", "constructor arguments not inferred"),
                          ("needs arguments", "constructor arguments not inferred"),
                          ("missing", "entry arguments not inferred"),
                          ("no rule", "unmodelled op"), ("has no rule", "unmodelled op"),
                          ("is a gather missing", "output is a rank block (reshard)"),
                          ("not a tensor", "non-tensor entry argument / output"),
                          ("cuda", "CUDA-only path"),
                          ("timed out", "timeout"), ("inconclusive", "timeout"),
                          ("disagrees with torch", "verifier model disagrees with torch"),
                          ("layout", "parameter layout not confirmed"),
                          ("does not produce", "gradient not produced on ranks")):
        if needle in text:
            return label
    return f"{verdict}: " + (text[:80] or "no reason given")


def report(rows: list[dict]) -> str:
    lines = []
    counts = Counter((r["truth"], r["tool"]["verdict"]) for r in rows)
    libs = sorted({r["library"] for r in rows})
    lines.append(f"{len(rows)} entries from {len(libs)} libraries ({', '.join(libs)})")
    lines.append("")
    lines.append("| ground truth \\ tool | " + " | ".join(VERDICTS) + " | total |")
    lines.append("|---|" + "---|" * (len(VERDICTS) + 1))
    for truth in ("agree", "differ", "not-runnable"):
        n = [counts.get((truth, v), 0) for v in VERDICTS]
        lines.append(f"| {truth} | " + " | ".join(str(x) for x in n) + f" | {sum(n)} |")
    good = sum(meaningful(r["truth"], r["tool"]["verdict"]) for r in rows)
    judged = [r for r in rows if r["truth"] != "not-runnable"]
    false_verified = sum(r["truth"] == "differ" and r["tool"]["verdict"] == "verified" for r in rows)
    false_alarm = sum(r["truth"] == "agree" and r["tool"]["verdict"] == "violations" for r in rows)
    lines.append("")
    lines.append(f"meaningful verdicts: {good}/{len(judged)} with ground truth "
                 f"({100.0 * good / max(1, len(judged)):.0f} %); false verified: {false_verified}; "
                 f"false alarms: {false_alarm}")
    lines.append("")
    lines.append("per library (meaningful / with ground truth):")
    for lib in libs:
        mine = [r for r in judged if r["library"] == lib]
        lines.append(f"  {lib}: {sum(meaningful(r['truth'], r['tool']['verdict']) for r in mine)}/{len(mine)}")
    causes = Counter(cause_of(r) for r in rows if not meaningful(r["truth"], r["tool"]["verdict"]))
    lines.append("")
    lines.append("causes of non-meaningful verdicts, ranked:")
    for cause, n in causes.most_common():
        lines.append(f"  {n:3d}  {cause}")
    lines.append("")
    wrong = [r for r in judged if r["tool"]["verdict"] in ("verified", "violations")
             and not meaningful(r["truth"], r["tool"]["verdict"])]
    lines.append(f"wrong definite verdicts: {len(wrong)}")
    for r in wrong:
        lines.append(f"  {r['key']}: tool {r['tool']['verdict']}, ground truth {r['truth']} "
                     f"({r.get('truth_details') or 'every output and gradient agrees'})")
    lines.append("")
    lines.append("unsupported, inconclusive and input errors, with line and reason:")
    for r in rows:
        if r["tool"]["verdict"] in ("unsupported", "input-error", "error"):
            line, msg = (r["tool"]["reasons"] or [(None, "no reason given")])[0]
            lines.append(f"  {r['key']}: {r['tool']['verdict']} at line {line}: {msg[:240]}")
    lines.append("")
    lines.append("per entry:")
    for r in rows:
        t = r["tool"]
        mark = "ok " if meaningful(r["truth"], t["verdict"]) else "-- "
        lines.append(f"{mark}{r['key']}: truth {r['truth']}, tool {t['verdict']} ({t['seconds']:.0f}s)")
        if not meaningful(r["truth"], t["verdict"]):
            for line, msg in t["reasons"][:3]:
                lines.append(f"      line {line}: {msg[:300]}")
            if r["truth"] == "not-runnable" and r.get("truth_error"):
                lines.append("      ground truth: " + r["truth_error"].strip().splitlines()[-1][:300])
            elif r["truth"] == "differ" and r.get("truth_details"):
                lines.append("      ground truth: " + r["truth_details"][:300])
    return "\n".join(lines)


def _truth_summary(truth: gt.Truth) -> str:
    parts = []
    for w, v in truth.worlds.items():
        if v.get("error"):
            parts.append(f"{w} ranks: {v['error'].strip().splitlines()[-1][:200]}")
        else:
            bad = [d["name"] for d in v.get("details", []) if not d["same"]]
            if bad:
                parts.append(f"{w} ranks differ in {', '.join(bad[:4])}")
    return "; ".join(parts)


def evaluate(selected: list[entries.Entry], jobs: int, timeout: float, gt_timeout: float) -> list[dict]:
    truths = ground_truths(selected, gt_timeout)
    rows: list[dict] = []

    def one(e):
        res = run_tool(e, timeout)
        log(f"  {e.key}: truth {truths[e.key].status}, tool {res['verdict']} ({res['seconds']:.0f}s)")
        return e, res

    log(f"tool: {len(selected)} entries, {jobs} at a time")
    with cf.ThreadPoolExecutor(jobs) as pool:
        done = dict((e.key, res) for e, res in pool.map(one, selected))
    for e in selected:
        t = truths[e.key]
        rows.append({"key": e.key, "library": e.library, "module": e.module, "entry": e.entry,
                     "truth": t.status, "truth_error": t.error, "truth_details": _truth_summary(t),
                     "tool": done[e.key]})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", action="append", help="only entries whose key contains this (repeatable)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", type=Path, help="write every row here")
    ap.add_argument("--timeout", type=float, default=240.0, help="the tool's --timeout per entry")
    ap.add_argument("--gt-timeout", type=float, default=60.0, help="ground truth CPU seconds per entry")
    ap.add_argument("--truth-only", action="store_true", help="print the ground truth and stop")
    ap.add_argument("--mutants", action="store_true", help="run the mutated twins instead")
    ap.add_argument("--reuse", type=Path, help="a previous --json: its rows stand for entries not selected now")
    args = ap.parse_args(argv)
    if args.mutants:
        import realcode_mutants

        return realcode_mutants.main(args)
    selected = [e for e in entries.ENTRIES if not args.entries or any(s in e.key for s in args.entries)]
    if args.truth_only:
        truths = ground_truths(selected, args.gt_timeout)
        for e in selected:
            t = truths[e.key]
            print(f"{t.status:13s} {e.key}  {t.error.strip().splitlines()[-1][:200] if t.error else _truth_summary(t)}")
        return 0
    rows = evaluate(selected, args.jobs, args.timeout, args.gt_timeout)
    if args.reuse:
        mine = {r["key"] for r in rows}
        old = {r["key"]: r for r in json.loads(args.reuse.read_text())}
        rows = [next(r for r in rows if r["key"] == e.key) if e.key in mine else old[e.key]
                for e in entries.ENTRIES if e.key in mine or e.key in old]
    print(report(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
