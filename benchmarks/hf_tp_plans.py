"""Every transformers architecture that ships a tensor-parallel plan (``base_model_tp_plan``), tiny,
with that plan applied on the ranks the way transformers applies it, checked by the tool.

    python benchmarks/hf_tp_plans.py [--only llama,qwen3] [--limit N] [--jobs 2] [--json out.json] [--truth-only]

Per architecture (benchmarks/hf_tp_harness.py builds it): a config with 1 layer, hidden 16, 4 heads
and 4 key/value heads (divisible by 2 and 4), 4 experts where there are experts; float64; on N ranks
every parameter cut by ``shard_and_distribute_module`` and the plan's hooks added by
``distribute_model`` (what ``from_pretrained(..., tp_plan="auto")`` does), on one rank nothing cut.

* ground truth (benchmarks/realcode_groundtruth.py): logits and every gradient (a seeded cotangent on
  the logits) on 1 gloo rank against 2 and 4, parameter gradients re-assembled from the rank pieces;
* the tool: ``verify-agent translate <modeling module> --entry <Model class> --harness H --format json``
  where H is a harness file returning the same model and token ids.

Prints one row per architecture (ground truth, the tool's verdict, its first reason) and the counts.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import hf_tp_harness as hf  # noqa: E402
import realcode  # noqa: E402
import realcode_entries as entries  # noqa: E402

HARNESS = '''import sys
sys.path.insert(0, {bench!r})
import hf_tp_harness


def harness(module, world):
    model, inputs = hf_tp_harness.build({model_type!r}, {config!r}, world)
    return model, inputs
'''


FLOAT32_ATOL = 1e-5  # the ground truth's float32 tolerance (its absolute part)


def judged(truth) -> tuple[str, str]:
    """(status, note): the ground truth's status, with a difference no larger than float32 rounding
    taken as agreement.  The models run in float64, but some compute parts in float32 themselves
    (Gemma3's RMSNorm upcasts with ``x.float()``, which casts float64 down), so one device and the
    ranks round differently there, by about 1e-8, past the float64 tolerance; a missing reduction or a
    wrong shard is off by the values themselves."""
    if truth.status != "differ" or any(v.get("error") for v in truth.worlds.values()):
        return truth.status, ""
    off = [d["max_abs_diff"] for v in truth.worlds.values() for d in v.get("details", []) if not d["same"]]
    if off and all(isinstance(x, float) and x <= FLOAT32_ATOL for x in off):
        return "agree", f"within float32 rounding (max {max(off):.1e})"
    return truth.status, ""


def rows_for(selected: list[tuple[str, str]]) -> list[entries.Entry]:
    return [entries.hf_entry(model_type, config) for model_type, config in selected]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated model types")
    ap.add_argument("--limit", type=int)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--truth-only", action="store_true", help="the ground truth only (printed), not the tool")
    ap.add_argument("--gt-timeout", type=float, default=120.0, help="ground truth CPU seconds per architecture")
    args = ap.parse_args(argv)
    archs = hf.plan_architectures()
    if args.only:
        wanted = set(args.only.split(","))
        archs = [a for a in archs if a[0] in wanted]
    if args.limit:
        archs = archs[: args.limit]
    for model_type, _ in [a for a in archs if hf.model_class(*a) is None]:
        realcode.log(f"  {model_type}: skipped: transformers exports no model class for it")
    archs = [a for a in archs if hf.model_class(*a) is not None]
    realcode.log(f"{len(archs)} architectures with base_model_tp_plan")
    selected = rows_for(archs)
    truths = realcode.ground_truths(selected, args.gt_timeout)
    if args.truth_only:
        for (model_type, _), e in zip(archs, selected):
            status, note = judged(truths[e.key])
            detail = note or realcode._truth_summary(truths[e.key]) or (truths[e.key].error or "")[-200:]
            print(f"{model_type}: {status} {detail}".rstrip())
        return 0
    rows = []
    with tempfile.TemporaryDirectory(prefix="hf_tp_") as tmp:
        def one(pair):
            (model_type, config), e = pair
            cls = hf.model_class(model_type, config)
            harness = Path(tmp, f"harness_{model_type}.py")
            harness.write_text(HARNESS.format(bench=str(ROOT / "benchmarks"), model_type=model_type, config=config))
            res = realcode.run_tool(e, args.timeout, target=cls.__module__,
                                    extra=("--entry", cls.__name__, "--harness", str(harness)))
            first = next((f"line {ln}: {m[:160]}" for ln, m in res["reasons"]), "")
            realcode.log(f"  {model_type}: truth {' '.join(judged(truths[e.key]))}, tool {res['verdict']} "
                         f"({res['seconds']:.0f}s) {first}".rstrip())
            return model_type, config, e, res

        with cf.ThreadPoolExecutor(args.jobs) as pool:
            for model_type, config, e, res in pool.map(one, zip(archs, selected)):
                t = truths[e.key]
                status, note = judged(t)
                rows.append({"model_type": model_type, "config": config, "truth": status, "truth_note": note,
                             "truth_error": t.error, "truth_details": realcode._truth_summary(t), "tool": res})
    print("| architecture | ground truth | tool | first reason |")
    print("|---|---|---|---|")
    for r in rows:
        reason = "" if realcode.meaningful(r["truth"], r["tool"]["verdict"]) else \
            next((f"line {ln}: {m[:110]}" for ln, m in r["tool"]["reasons"]), "")
        truth = r["truth"] if r["truth"] != "not-runnable" else \
            "not runnable: " + (r["truth_error"] or "").strip().splitlines()[-1][:60]
        truth += f" ({r['truth_note']})" if r["truth_note"] else \
            f" ({r['truth_details']})" if r["truth"] == "differ" and r["truth_details"] else ""
        print(f"| {r['model_type']} | {truth} | {r['tool']['verdict']} | {reason.replace('|', '/')} |")
    counts = Counter((r["truth"], r["tool"]["verdict"]) for r in rows)
    good = sum(realcode.meaningful(r["truth"], r["tool"]["verdict"]) for r in rows)
    definite = [r for r in rows if r["tool"]["verdict"] in ("verified", "violations")]
    wrong = [r for r in definite if not realcode.meaningful(r["truth"], r["tool"]["verdict"])]
    print()
    print(f"{len(rows)} architectures; meaningful verdicts (right verified or violations): {good}; "
          f"definite verdicts: {len(definite)}, of which against ground truth wrong: {len(wrong)}")
    print("(ground truth, tool) counts: " + ", ".join(f"{k[0]}/{k[1]}: {n}" for k, n in sorted(counts.items())))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
