"""Time to a first verified fix: buggy gallery files and a 32-layer TP=8 stack.

For every buggy example (IR programs in examples/ir and examples/temporal, model files in
examples/models) it prints the seconds until the first fix whose program — for model files,
whose *patched source file*, translated again — check_program verifies, with the fix.  The
stack is ``llama_stack_vir(StackShape(layers=32), drop_allreduce_in_layer=17)``: the search
localises the missing all-reduce from the diagnostic, checks a slice around the candidate
edit, then proves the whole patched stack; both times are printed.

The traced section (``--traced``) takes the buggy files of examples/realworld/ the way ``fix``
does: the file is run and checked as ``translate`` checks it, candidate edits at the recorded
lines are run and proven again, and a verified candidate is run on real gloo ranks before it
counts.  Per file: seconds to the first verified fix (from the start of the check), whether real
ranks confirmed it, the fix; then the totals.

    python benchmarks/bench_fix.py [--layers 32] [--drop 17] [--skip-gallery] [--skip-stack]
    python benchmarks/bench_fix.py --traced [--budget 300] [--only NAME ...] --skip-gallery --skip-stack

The campaign (``--campaign``, see ``benchmarks/fix_campaign.py``) is the repair's end-to-end figure:
the buggy realworld files and the mutation campaign's communication mutants that real gloo ranks
show wrong, each repaired by ``verify-agent fix --write`` on a temporary copy, the written file
checked again and run on real gloo ranks (1 vs 2 and 4, outputs and gradients).

    python benchmarks/bench_fix.py --campaign [--mutants 60] [--library-mutants 60] [--seed 0] [--timeout 240]
"""
from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from verifier.check import check_program
from verifier.stacks import StackShape, llama_stack_vir
from verifier.synthesis import Budget, synthesize
from verify_agent.repair import source_fixes
from verifier.text_format import parse_program

ROOT = Path(__file__).resolve().parents[1]
GOAL_SECONDS = 5.0


def _buggy_ir() -> list[Path]:
    files = sorted((ROOT / "examples" / "ir").glob("*.vir")) + sorted((ROOT / "examples" / "temporal").glob("*.vir"))
    return [f for f in files if re.search(r"#\s*expected:\s*violations", f.read_text())]


def _row(name: str, seconds: float | None, what: str) -> None:
    shown = f"{seconds:8.2f}" if seconds is not None else "       -"
    flag = "" if seconds is None or seconds < GOAL_SECONDS else "  (over the goal)"
    print(f"{name:<52} {shown}  {what}{flag}", flush=True)


def bench_ir() -> None:
    for path in _buggy_ir():
        program = parse_program(path.read_text(), str(path))
        report = check_program(program, str(path))
        if report.verdict != "violations":
            _row(path.name, None, f"not a violation here ({report.verdict})")
            continue
        started = time.perf_counter()
        result = synthesize(program, report, file=str(path), budget=Budget(first_only=True))
        seconds = time.perf_counter() - started
        _row(path.name, seconds if result.fixes else None,
             result.fixes[0].description if result.fixes else "no fix: " + "; ".join(result.notes or ["none found"]))


def bench_models() -> None:
    import json

    from frontends import translate_source
    from frontends.base import SourceError

    expected = json.loads((ROOT / "examples" / "models" / "expected.json").read_text())
    for name in sorted(n for n, info in expected.items() if info["verdict"] == "violations"):
        path = ROOT / "examples" / "models" / name
        source = path.read_text()
        started = time.perf_counter()
        try:
            translation = translate_source(source, str(path))
        except SourceError as error:
            _row(name, None, f"not translated: {error}")
            continue
        if translation.program is None:
            _row(name, None, "not translated: " + "; ".join(str(u) for u in translation.unsupported[:1]))
            continue
        report = check_program(translation.program, str(path))
        if report.verdict != "violations":
            _row(name, None, f"translation gives {report.verdict}")
            continue
        fixes = source_fixes(source, str(path), translation, report, top_k=1)
        seconds = time.perf_counter() - started
        _row(name, seconds if fixes else None, fixes[0].description if fixes else "no verified source fix")


def bench_stack(layers: int, drop: int) -> None:
    program = parse_program(llama_stack_vir(StackShape(layers=layers), drop_allreduce_in_layer=drop))
    started = time.perf_counter()
    report = check_program(program)
    found = report.seconds
    events: dict[str, float] = {}

    def progress(message: str) -> None:
        if message.strip().startswith("slice of") and "slice" not in events:
            events["slice"] = time.perf_counter() - started
        if message.strip().startswith("verified fix"):
            events["full"] = time.perf_counter() - started

    result = synthesize(program, report, budget=Budget(first_only=True), progress=progress)
    total = time.perf_counter() - started
    name = f"llama stack, {layers} layers TP=8, layer {drop} without MLP all-reduce ({len(program.ops)} ops)"
    print(f"\n{name}")
    print(f"  check of the buggy stack (violation found):       {found:6.2f} s")
    if "slice" in events:
        print(f"  candidate verified on a slice around the edit:    {events['slice']:6.2f} s")
    if result.fixes:
        fix = result.fixes[0]
        print(f"  fix verified on the whole stack (check_program):  {events.get('full', total):6.2f} s  "
              f"[{fix.description}; whole-stack proof {fix.report.seconds:.2f} s]")
    else:
        print(f"  no fix found in {total:.2f} s: {'; '.join(result.notes)}")


def bench_traced(budget: float, only: list[str]) -> None:
    import json
    import statistics

    from verify_agent.repair.commands import UsageError, check_text, is_traced
    from verify_agent.repair.traced_fixes import TracedSettings, traced_fixes

    folder = ROOT / "examples" / "realworld"
    expected = json.loads((folder / "expected.json").read_text())
    names = sorted(n for n, info in expected.items() if info["verdict"] == "violations"
                   and (not only or any(o in n for o in only)))
    print(f"\n{'realworld file (traced)':<52} {'seconds':>8}  first verified fix")
    bugs, verified, confirmed, times = 0, 0, 0, []
    for name in names:
        path = folder / name
        source = path.read_text()
        try:
            result = check_text(path, source)
        except UsageError as error:
            _row(name, None, f"not checked: {error}")
            continue
        report = result.report
        if report.verdict != "violations":
            _row(name, None, f"the check gives {report.verdict}")
            continue
        bugs += 1
        if not is_traced(report):
            _row(name, None, "not traced (static reading): not in this section")
            continue
        fixes = traced_fixes(source, str(path), report, TracedSettings(budget_seconds=budget), top_k=1)
        if not fixes:
            _row(name, None, f"no verified fix within {budget:.0f} s")
            continue
        fix = fixes[0]
        seconds = report.seconds + fix.seconds   # the file's check, then the search until this fix
        verified += 1
        confirmed += "confirmed on" in fix.description
        times.append(seconds)
        _row(name, seconds, fix.description)
    median = f"{statistics.median(times):.1f} s" if times else "-"
    print(f"\nbuggy files: {len(names)}; violations found: {bugs}; fixes that verify: {verified}; "
          f"confirmed on real gloo ranks: {confirmed}; median time to the first fix: {median}")


def main() -> None:
    if "--campaign" in sys.argv[1:]:   # its own options (benchmarks/fix_campaign.py)
        from fix_campaign import main as campaign

        raise SystemExit(campaign([a for a in sys.argv[1:] if a != "--campaign"]))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=32)
    parser.add_argument("--drop", type=int, default=17)
    parser.add_argument("--skip-gallery", action="store_true")
    parser.add_argument("--skip-stack", action="store_true")
    parser.add_argument("--traced", action="store_true", help="also the traced repair of examples/realworld/")
    parser.add_argument("--budget", type=float, default=300.0, help="seconds of candidate checks per file")
    parser.add_argument("--only", nargs="*", default=[], help="realworld files whose name contains one of these")
    parser.add_argument("--campaign", action="store_true",
                        help="only the fix campaign over buggy realworld files and communication mutants "
                             "(its options: --campaign --help)")
    args = parser.parse_args()
    if not args.skip_gallery:
        print(f"{'file':<52} {'seconds':>8}  first verified fix (goal: < {GOAL_SECONDS:.0f} s)")
        bench_ir()
        bench_models()
    if not args.skip_stack:
        bench_stack(args.layers, args.drop)
    if args.traced:
        bench_traced(args.budget, args.only)


if __name__ == "__main__":
    main()
