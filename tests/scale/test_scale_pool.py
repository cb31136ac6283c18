"""The process pool gives the inline results, and the benchmark prints the contract keys."""
import json
import subprocess
import sys
from pathlib import Path

from verifier.scale import check_plan

from .support import small

ROOT = Path(__file__).resolve().parents[2]


def test_pool_of_two_workers_agrees_with_inline_and_reports_memory():
    inline = check_plan(small("deepseek-moe-16b"), "drop-allreduce:layer=2", workers=1)
    pooled = check_plan(small("deepseek-moe-16b"), "drop-allreduce:layer=2", workers=2)
    assert pooled.verdict == inline.verdict == "violations"
    assert pooled.stats["proofs"] == inline.stats["proofs"]
    assert [(f.block, f.ranks) for f in pooled.findings] == [(f.block, f.ranks) for f in inline.findings]
    assert pooled.peak_mib > inline.peak_mib / 2 > 0


def test_benchmark_prints_plan_ops_ranks_seconds_peak_and_verdict_as_json():
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "scale.py"), "--plan", "llama3-8b", "--json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    row = json.loads(done.stdout)
    assert done.returncode == 0, done.stderr
    assert list(row)[:6] == ["plan", "ops", "ranks", "seconds", "peak_mib", "verdict"]
    assert (row["plan"], row["ranks"], row["verdict"]) == ("llama3-8b", 512, "verified")


def test_benchmark_reports_a_bad_fault_spec_as_a_usage_error():
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "scale.py"), "--plan", "llama3-8b",
                           "--bug", "swap-send:stage=0"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 2 and "no pipeline" in done.stderr
