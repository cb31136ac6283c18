"""``benchmarks/vs_trainverify.py``: TrainVerify's plan names become the same sizes for verifier.scale.

TrainVerify itself is not installable from the package index, so these tests cover what the
benchmark does without it: reading a plan's sizes from its pickle name, the plan it builds for
our side (which verifies, and still finds a seeded fault), and what it says when not given.
"""
import subprocess
import sys
from pathlib import Path

import pytest

from verifier.scale import check_plan

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import vs_trainverify as bench  # noqa: E402


def test_llama_plan_name_gives_its_sizes_and_llama3_ffn_width():
    plan = bench.scale_plan("llama3_default_dp2_pp4_tp8_nm8_gbs512_ly2_h32_hi4096_sq128")
    m, p = plan.model, plan.parallel
    assert (m.layers, m.hidden, m.heads, m.kv_heads, m.head_dim, m.seq, m.vocab) == (2, 4096, 32, 32, 128, 128, 51200)
    assert m.ffn == 11008  # int(2 * 4 * 4096 / 3) = 10922, rounded up to a multiple of 256
    assert (p.dp, p.pp, p.tp, p.microbatches) == (2, 4, 8, 8)


def test_moe_plan_name_gives_experts_and_top_k():
    plan = bench.scale_plan("moe_default_dp2_pp2_tp2_nm2_gbs1024_ly2_h16_hi512_sq128_a2_r16")
    m = plan.model
    assert (m.experts, m.top_k, m.shared_experts, m.dense_layers, m.hidden, m.heads) == (16, 2, 2, 1, 512, 16)


def test_single_device_pickle_of_a_parallel_one_keeps_the_model_and_batch():
    assert (bench.single_of("llama3_default_dp2_pp2_tp2_nm2_gbs32_ly2_h32_hi128_sq256")
            == "llama3_default_dp1_pp1_tp1_nm1_gbs32_ly2_h32_hi128_sq256")


def test_a_name_that_is_not_a_plan_is_refused():
    with pytest.raises(ValueError, match="not a TrainVerify plan name"):
        bench.parse_name("llama3_dp2.pkl")


def test_multi_head_attention_at_tp8_of_the_llama_plan_is_verified():
    # 32 kv heads = 32 query heads on tp=8: the shape reduction used to give the two head counts
    # different extents and reported a reshape error that is not in the plan
    report = check_plan(bench.scale_plan("llama3_default_dp2_pp4_tp8_nm8_gbs512_ly2_h32_hi4096_sq128"), workers=1)
    assert report.verdict == "verified", [str(f) for f in report.findings]


def test_multi_head_attention_at_tp8_still_finds_a_dropped_reduction():
    plan = bench.scale_plan("llama3_default_dp2_pp4_tp8_nm8_gbs512_ly2_h32_hi4096_sq128")
    report = check_plan(plan, "drop-allreduce:layer=1", workers=1)
    assert report.verdict == "violations"
    assert any(f.layer == 1 and f.block == "layers.1.mlp" for f in report.findings)


def test_without_trainverify_the_script_says_how_to_get_it_and_exits_2():
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "vs_trainverify.py")], capture_output=True,
                          text=True, cwd=ROOT)
    assert done.returncode == 2
    assert "not installable from the package index" in done.stderr and "--trainverify" in done.stderr
