"""Verify full training plans (Llama-3 8B/70B/405B, DeepSeek 16B/236B/671B) and time it.

    python benchmarks/scale.py --plan llama3-405b --json
    python benchmarks/scale.py --plan deepseek-v3-671b --bug drop-allreduce:layer=40 --json
    python benchmarks/scale.py --plan all                  # the table, one fresh process per plan
    python benchmarks/scale.py --plan llama3-405b --show layers.97.mlp   # a block's IR

``--json`` prints one object per plan: ``{"plan", "ops", "ranks", "seconds", "peak_mib",
"verdict", "findings"}`` (``--details`` adds what was proven and statistics).  ``ops``
counts the ops of the whole unrolled training step (every microbatch, every layer,
backward, pipeline sends and receives, gradient accumulation and synchronisation)
without building it; ``ranks`` is the product of the mesh sizes; ``peak_mib`` is the
peak resident memory of this process plus each pool worker's own peak (an upper bound of
the process tree's peak).  Faults (``--bug``): ``drop-allreduce:layer=N[,dp=K]``,
``swap-send:stage=S``, ``double-divide:grad=layers.N.BLOCK.PARAM``.  Exit code 0 when
verified, 1 with violations, 3 when unsupported, 2 on a usage error.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys

from verifier.report import EXIT_CODES, EXIT_USAGE
from verifier.scale import PLANS, check_plan
from verifier.scale.faults import FaultError
from verifier.scale.plans import TrainingProgram
from verifier.text_format import print_program

KEYS = ("plan", "ops", "ranks", "seconds", "peak_mib", "verdict")


def run_one(name: str, bug: str | None, workers: int, as_json: bool, details: bool) -> int:
    try:
        report = check_plan(PLANS[name], bug, workers=workers)
    except FaultError as problem:
        print(f"error: --bug {bug}: {problem}", file=sys.stderr)
        return EXIT_USAGE
    body = report.to_json()
    if as_json:
        out = {key: body[key] for key in KEYS} | {"findings": body["findings"]}
        if details:
            out |= {"proven": body["proven"], "stats": body["stats"]}
        print(json.dumps(out))
    else:
        print(f"{name}: {report.verdict} in {report.seconds:.1f} s, peak {report.peak_mib:.0f} MiB, "
              f"{report.ops} ops on {report.ranks} ranks ({report.stats['proofs']} proofs for "
              f"{report.stats['instances']} block instances)")
        for finding in report.findings:
            print("  " + str(finding))
        if details:
            for claim in report.proven:
                print("  proven: " + claim)
    return EXIT_CODES[report.verdict]


def table(names: list[str], bug: str | None, workers: int) -> int:
    """Each plan in a fresh process, so each peak memory is that plan's own."""
    print(f"{'plan':<18} {'ops':>9} {'ranks':>6} {'seconds':>8} {'peak MiB':>9}  {'verdict':<11} published")
    worst = 0
    for name in names:
        command = [sys.executable, __file__, "--plan", name, "--json", "--workers", str(workers)]
        if bug:
            command += ["--bug", bug]
        done = subprocess.run(command, capture_output=True, text=True)
        if not done.stdout.strip():
            print(f"{name:<18} failed: {done.stderr.strip().splitlines()[-1] if done.stderr else done.returncode}")
            worst = max(worst, EXIT_USAGE)
            continue
        row = json.loads(done.stdout)
        print(f"{row['plan']:<18} {row['ops']:>9} {row['ranks']:>6} {row['seconds']:>8.2f} {row['peak_mib']:>9.0f}  "
              f"{row['verdict']:<11} {PLANS[name].published}", flush=True)
        worst = max(worst, done.returncode)
    return worst


def show(name: str, block: str) -> int:
    for segment in TrainingProgram(PLANS[name]).segments():
        if segment.name == block:
            print(print_program(segment.program), end="")
            return 0
    print(f"error: no block {block!r} in {name} (e.g. embedding, layers.0.attention, layers.0.mlp, head, "
          f"layers.0.mlp.wd grad sync)", file=sys.stderr)
    return EXIT_USAGE


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", required=True, help=f"one of {', '.join(PLANS)}, or all")
    parser.add_argument("--bug", help="seed one fault, e.g. drop-allreduce:layer=97")
    parser.add_argument("--json", action="store_true", help="one JSON object per plan")
    parser.add_argument("--details", action="store_true", help="also what was proven, and statistics")
    parser.add_argument("--workers", type=int, default=2, help="proof processes (default 2)")
    parser.add_argument("--show", metavar="BLOCK", help="print the IR of one block instead of checking")
    args = parser.parse_args()
    if args.plan != "all" and args.plan not in PLANS:
        parser.error(f"unknown plan {args.plan!r}; expected one of {', '.join(PLANS)} or all")
    if args.show:
        return show(args.plan, args.show)
    if args.plan == "all":
        return table(list(PLANS), args.bug, args.workers)
    return run_one(args.plan, args.bug, args.workers, args.json, args.details)


if __name__ == "__main__":
    sys.exit(main())
