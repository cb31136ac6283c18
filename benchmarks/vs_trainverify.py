"""verify-agent beside TrainVerify on the same training plans: CPU seconds and peak memory of each.

    python benchmarks/vs_trainverify.py --trainverify PATH/Verdict [--python PATH/bin/python]
    python benchmarks/vs_trainverify.py --trainverify PATH/Verdict --plan llama3_default_dp2_pp2_tp2_nm2_gbs32_ly2_h32_hi128_sq256

TrainVerify (SOSP'25, the published verifier for parallel training plans; its tool is called
Verdict) is not on the package index: get its repository with nnScaler's ``verification``
branch, set up its environment (z3-solver, nnScaler's requirements, ``more-itertools``,
``pulp``, ``tiktoken``; it runs on a CPU) and give its ``Verdict`` directory (the one with
``main.py`` and ``gen_model/mgeners/*.pkl``) as ``--trainverify``, and its interpreter as
``--python`` when it is not this one.  nnScaler is found on ``PYTHONPATH`` as the directory above
``Verdict`` or beside it as ``nnscaler``.

For each plan both tools run, each in its own process, one after the other:

- **TrainVerify** checks the execution plan nnScaler generated for the parallel run (the pickled
  graph ``<model>_default_dp.._pp.._tp.._nm.._gbs.._ly.._h.._hi.._sq...pkl``) against the
  single-device plan of the same model (the ``dp1_pp1_tp1_nm1`` pickle), stage by stage with Z3
  on reduced shapes (``main.py --sm SINGLE --pm PARALLEL``).
- **verify-agent** proves the composed training step of the same sizes (``verifier.scale``:
  layers, hidden size, heads, sequence, dp/pp/tp and micro-batches read from the pickle's
  name; Llama-3's FFN width and vocabulary as TrainVerify's model code sets them), from block
  proofs and the pipeline schedule, gradient synchronisation and loss scaling around them.

Same plan sizes, not the same proof: TrainVerify checks nnScaler's generated distributed graph,
verify-agent proves megatron-core's layout of that model as its blocks model it.  CPU seconds are
user + system of the tool's process and every process it waited for (its pools); peak memory is
the largest resident set of any one of those processes.  The last line is the overall CPU ratio
(TrainVerify / verify-agent over the plans both verified) as ``NNx``.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# (single-device pickle, parallel pickle) stems shipped with TrainVerify's artifact.
PLANS = (
    ("llama3_default_dp1_pp1_tp1_nm1_gbs32_ly2_h32_hi128_sq256", "llama3_default_dp2_pp2_tp2_nm2_gbs32_ly2_h32_hi128_sq256"),
    ("llama3_default_dp1_pp1_tp1_nm1_gbs512_ly2_h32_hi4096_sq128", "llama3_default_dp2_pp2_tp2_nm2_gbs512_ly2_h32_hi4096_sq128"),
    ("llama3_default_dp1_pp1_tp1_nm1_gbs512_ly2_h32_hi4096_sq128", "llama3_default_dp2_pp4_tp8_nm8_gbs512_ly2_h32_hi4096_sq128"),
    ("llama3_default_dp1_pp1_tp1_nm1_gbs512_ly2_h32_hi4096_sq128", "llama3_default_dp16_pp4_tp8_nm8_gbs512_ly2_h32_hi4096_sq128"),
    ("moe_default_dp1_pp1_tp1_nm1_gbs1024_ly2_h16_hi512_sq128_a2_r16", "moe_default_dp2_pp2_tp2_nm2_gbs1024_ly2_h16_hi512_sq128_a2_r16"),
)

NAME = re.compile(r"^(?P<model>[a-z0-9]+)_[a-z]+_dp(?P<dp>\d+)_pp(?P<pp>\d+)_tp(?P<tp>\d+)_nm(?P<nm>\d+)_gbs(?P<gbs>\d+)"
                  r"_ly(?P<ly>\d+)_h(?P<h>\d+)_hi(?P<hi>\d+)_sq(?P<sq>\d+)(?:_a(?P<a>\d+)_r(?P<r>\d+))?$")

# TrainVerify's model code (gen_model/model/{llama3,moe}): vocabulary 51200, SwiGLU width
# rounded up to a multiple of 256, multi-head attention (no kv_heads given); the MoE model has
# one dense first layer of width 1024, experts of width 1024 and 2 shared experts.
VOCAB, MULTIPLE_OF, MOE_DENSE_FFN, MOE_EXPERT_FFN, MOE_SHARED, MOE_DENSE_LAYERS = 51200, 256, 1024, 1024, 2, 1

SAID = ("TrainVerify checks the nnScaler-generated distributed graph (its execution plan) against the single-device "
        "graph, stage by stage; verify-agent proves the composed training step (megatron-core's layout of the same "
        "sizes) from block proofs, the pipeline schedule, gradient synchronisation and loss scaling. Same plan sizes, "
        "not necessarily the same proof.")
NOT_GIVEN = ("error: give --trainverify PATH: TrainVerify is not installable from the package index. Get its repository "
             "(its Verdict directory, with main.py and gen_model/mgeners/*.pkl) and nnScaler's `verification` branch, "
             "set up its environment (z3-solver, nnScaler's requirements, more-itertools, pulp, tiktoken; CPU is "
             "enough), then run: python benchmarks/vs_trainverify.py --trainverify PATH/Verdict --python "
             "ITS_ENV/bin/python")


@dataclass(frozen=True)
class Sizes:
    """A plan's sizes as TrainVerify's pickle name gives them."""

    model: str
    dp: int
    pp: int
    tp: int
    microbatches: int
    layers: int
    heads: int
    hidden: int
    seq: int
    top_k: int = 0
    experts: int = 0


def parse_name(stem: str) -> Sizes:
    match = NAME.match(stem)
    if match is None:
        raise ValueError(f"not a TrainVerify plan name: {stem!r} (expected <model>_default_dpN_ppN_tpN_nmN_gbsN_lyN_hN_"
                         f"hiN_sqN[_aN_rN])")
    g = {k: int(v) for k, v in match.groupdict().items() if k != "model" and v is not None}
    return Sizes(match["model"], g["dp"], g["pp"], g["tp"], g["nm"], g["ly"], g["h"], g["hi"], g["sq"],
                 g.get("a", 0), g.get("r", 0))


def llama_ffn(hidden: int) -> int:
    """Llama-3's SwiGLU width for ``hidden`` (4h, two thirds of it, rounded up to 256)."""
    width = int(2 * (4 * hidden) / 3)
    return MULTIPLE_OF * math.ceil(width / MULTIPLE_OF)


def scale_plan(stem: str):
    """The ``verifier.scale`` plan of the sizes in a TrainVerify pickle's name."""
    from verifier.scale.plans import Model, Parallel, Plan

    s = parse_name(stem)
    if s.model not in ("llama3", "moe"):
        raise ValueError(f"{stem}: model {s.model!r} has no verify-agent counterpart here (llama3, moe)")
    common = dict(layers=s.layers, hidden=s.hidden, heads=s.heads, kv_heads=s.heads, head_dim=s.hidden // s.heads,
                  vocab=VOCAB, seq=s.seq)
    if s.model == "moe":
        model = Model(stem, ffn=MOE_DENSE_FFN, experts=s.experts, top_k=s.top_k, shared_experts=MOE_SHARED,
                      moe_ffn=MOE_EXPERT_FFN, dense_layers=MOE_DENSE_LAYERS, **common)
    else:
        model = Model(stem, ffn=llama_ffn(s.hidden), **common)
    return Plan(stem, model, Parallel(dp=s.dp, tp=s.tp, pp=s.pp, microbatches=s.microbatches))


@dataclass
class Run:
    verdict: str
    cpu: float          # user + system CPU s, the process and the descendants it waited for
    peak_mib: float     # largest resident set of one of those processes
    note: str = ""


def measured(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[Run, str]:
    """Run ``command`` to the end; its CPU time and peak memory from the kernel's accounting."""
    with subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True) as child:
        out = child.stdout.read()
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
    return Run("", usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024), out


def run_trainverify(verdict_dir: Path, python: str, single: str, parallel: str, procs: int) -> Run:
    mgeners = verdict_dir / "gen_model" / "mgeners"
    env = dict(os.environ)
    paths = [str(verdict_dir.parent), str(verdict_dir)]
    if (verdict_dir.parent / "nnscaler").is_dir() and (verdict_dir.parent / "nnscaler" / "nnscaler").is_dir():
        paths.insert(0, str(verdict_dir.parent / "nnscaler"))
    env["PYTHONPATH"] = os.pathsep.join(paths + [p for p in [env.get("PYTHONPATH")] if p])
    (verdict_dir / "data" / "logs").mkdir(parents=True, exist_ok=True)
    command = [python, "main.py", "--sm", str(mgeners / f"{single}.pkl"), "--pm", str(mgeners / f"{parallel}.pkl"),
               "--seed", "0", "--time", "--max_ser_proc", str(procs), "--max_vrf_proc", str(procs),
               "--loglevel", "INFO", "--no_cache_nodes", "--no_cache_stages"]
    run, out = measured(command, verdict_dir, env)
    # main.py exits 0 either way; its last lines are a Stats(success=..., error=[...]) dump
    if "Stats(success=True" in out:
        run.verdict = "verified"
    elif "Stats(success=False" in out:
        run.verdict = "failed"
        errors = re.search(r"error=\[(.*?)\]\)", out, re.S)
        run.note = (errors.group(1).strip() if errors else "").replace("\n", " ")[:160]
    else:
        run.verdict = "error"
        run.note = (out.strip().splitlines() or ["no output"])[-1][:160]
    return run


def run_ours(stem: str, workers: int) -> Run:
    command = [sys.executable, str(Path(__file__).resolve()), "--ours-child", stem, "--workers", str(workers)]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    run, out = measured(command, ROOT, env)
    try:
        body = json.loads(out.strip().splitlines()[-1])
        run.verdict = body["verdict"]
        run.note = "; ".join(body["findings"])[:160]
    except (IndexError, ValueError, KeyError):
        run.verdict = "error"
        run.note = (out.strip().splitlines() or ["no output"])[-1][:160]
    return run


def ours_child(stem: str, workers: int) -> int:
    from verifier.scale import check_plan

    report = check_plan(scale_plan(stem), workers=workers)
    print(json.dumps({"verdict": report.verdict, "ops": report.ops, "findings": [str(f) for f in report.findings]}))
    return 0


def compare(verdict_dir: Path, python: str, plans: list[tuple[str, str]], procs: int) -> int:
    mgeners = verdict_dir / "gen_model" / "mgeners"
    print(SAID)
    print(f"{'plan (TrainVerify pickle)':<62} {'TrainVerify':>22} {'verify-agent':>22} {'CPU ratio':>9}")
    print(f"{'':<62} {'verdict  CPU s    MiB':>22} {'verdict  CPU s    MiB':>22}")
    total_theirs = total_ours = 0.0
    both = 0
    for single, parallel in plans:
        absent = [n for n in (single, parallel) if not (mgeners / f"{n}.pkl").is_file()]
        if absent:
            print(f"{parallel:<62} absent from {mgeners}: {', '.join(absent)}.pkl")
            continue
        theirs = run_trainverify(verdict_dir, python, single, parallel, procs)
        ours = run_ours(parallel, procs)
        ratio = f"{theirs.cpu / ours.cpu:.0f}x" if ours.cpu > 0 else "-"
        print(f"{parallel:<62} {theirs.verdict:>8} {theirs.cpu:6.1f} {theirs.peak_mib:6.0f} "
              f"{ours.verdict:>8} {ours.cpu:6.1f} {ours.peak_mib:6.0f} {ratio:>9}", flush=True)
        for tool, run in (("TrainVerify", theirs), ("verify-agent", ours)):
            if run.note:
                print(f"    {tool}: {run.note}")
        if theirs.verdict == "verified" and ours.verdict == "verified":
            total_theirs += theirs.cpu
            total_ours += ours.cpu
            both += 1
    if not both:
        print("no plan was verified by both tools: no ratio")
        return 1
    print(f"overall CPU ratio (TrainVerify {total_theirs:.1f} CPU s / verify-agent {total_ours:.1f} CPU s, "
          f"{both} plan(s) both verified): {total_theirs / total_ours:.0f}x")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trainverify", metavar="DIR", help="TrainVerify's Verdict directory (main.py, gen_model/mgeners)")
    parser.add_argument("--python", default=sys.executable, help="the interpreter of TrainVerify's environment")
    parser.add_argument("--plan", action="append", metavar="STEM",
                        help="a parallel pickle's name (without .pkl); its single-device pickle is the dp1_pp1_tp1_nm1 "
                             "one of the same model; repeatable; default: the five plans of the table")
    parser.add_argument("--procs", type=int, default=2, help="processes for each tool's pool (default 2)")
    parser.add_argument("--ours-child", metavar="STEM", help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, default=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ours_child:
        return ours_child(args.ours_child, args.workers)
    if not args.trainverify:
        print(NOT_GIVEN, file=sys.stderr)
        return 2
    verdict_dir = Path(args.trainverify).resolve()
    if not (verdict_dir / "main.py").is_file() and (verdict_dir / "Verdict" / "main.py").is_file():
        verdict_dir = verdict_dir / "Verdict"
    if not (verdict_dir / "main.py").is_file():
        print(f"error: --trainverify {args.trainverify}: no main.py there (give TrainVerify's Verdict directory)",
              file=sys.stderr)
        return 2
    plans = list(PLANS)
    if args.plan:
        try:
            plans = [(single_of(stem), stem) for stem in args.plan]
        except ValueError as problem:
            print(f"error: --plan: {problem}", file=sys.stderr)
            return 2
    return compare(verdict_dir, args.python, plans, args.procs)


def single_of(stem: str) -> str:
    """The single-device pickle of the same model and global batch: dp, pp, tp and micro-batches 1."""
    parse_name(stem)
    return re.sub(r"_dp\d+_pp\d+_tp\d+_nm\d+_", "_dp1_pp1_tp1_nm1_", stem)


if __name__ == "__main__":
    sys.exit(main())
