"""Time to a first verified fix: buggy gallery files and a 32-layer TP=8 stack.

For every buggy example (IR programs in examples/ir and examples/temporal, model files in
examples/models) it prints the seconds until the first fix whose program — for model files,
whose *patched source file*, translated again — check_program verifies, with the fix.  The
stack is ``llama_stack_vir(StackShape(layers=32), drop_allreduce_in_layer=17)``: the search
localises the missing all-reduce from the diagnostic, checks a slice around the candidate
edit, then proves the whole patched stack; both times are printed.

    python benchmarks/bench_fix.py [--layers 32] [--drop 17] [--skip-gallery] [--skip-stack]
"""
from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=32)
    parser.add_argument("--drop", type=int, default=17)
    parser.add_argument("--skip-gallery", action="store_true")
    parser.add_argument("--skip-stack", action="store_true")
    args = parser.parse_args()
    if not args.skip_gallery:
        print(f"{'file':<52} {'seconds':>8}  first verified fix (goal: < {GOAL_SECONDS:.0f} s)")
        bench_ir()
        bench_models()
    if not args.skip_stack:
        bench_stack(args.layers, args.drop)


if __name__ == "__main__":
    main()
