"""Plans: the six benchmark layouts are the published ones, and small versions of each verify."""
import pytest

from verifier.scale import PLANS, check_plan
from verifier.scale.plans import TrainingProgram

from .support import SMALL, small


@pytest.mark.parametrize("name", list(SMALL))
def test_small_version_of_each_plan_is_verified(name):
    report = check_plan(small(name), workers=1)
    assert report.verdict == "verified", [str(f) for f in report.findings] + report.unsupported
    assert any(claim.startswith("blocks:") for claim in report.proven)
    assert any(claim.startswith("gradient sync:") for claim in report.proven)
    assert any(claim.startswith("pipeline:") for claim in report.proven)


@pytest.mark.parametrize("name,ranks,layers,stages", [
    ("llama3-8b", 512, 32, 1), ("llama3-70b", 512, 80, 8), ("llama3-405b", 8192, 126, 16),
    ("deepseek-moe-16b", 128, 28, 2), ("deepseek-v2-236b", 512, 60, 4), ("deepseek-v3-671b", 2048, 61, 8)])
def test_full_plans_have_the_published_layouts(name, ranks, layers, stages):
    plan = PLANS[name]
    assert plan.ranks == ranks
    assert plan.virtual_stages == stages
    assert sum(len(r) for r in plan.stage_layers()) == layers == plan.model.layers


def test_llama3_405b_first_and_last_stage_hold_one_layer_less():
    sizes = [len(r) for r in PLANS["llama3-405b"].stage_layers()]
    assert sizes == [7] + [8] * 14 + [7]


def test_deepseek_v3_has_three_dense_layers_then_moe_layers_with_expert_parallel_all_to_all():
    program = TrainingProgram(PLANS["deepseek-v3-671b"])
    kinds = {}
    for segment in program.segments():
        if segment.layer is not None and segment.kind != "grad-sync":
            kinds.setdefault(segment.layer, []).append(segment.kind)
        if segment.layer == 4:
            break
    assert kinds[2] == ["attention", "mlp"]
    assert kinds[3] == ["attention", "moe-router", "moe-experts"]
    experts = next(s for s in TrainingProgram(PLANS["deepseek-v3-671b"]).segments() if s.kind == "moe-experts")
    assert [op.attrs["mesh_dim"] for op in experts.program.ops if op.kind == "all_to_all"] == ["ep", "ep"]
    assert experts.program.mesh.names == ("ep", "tp") and experts.program.dims["E"] == 256


def test_blocks_keep_real_sizes_as_bound_symbols():
    segment = next(TrainingProgram(PLANS["llama3-405b"]).segments())
    assert segment.name == "embedding" and segment.program.dims == {"S": 8192, "H": 16384, "V": 128256}


def test_verified_report_counts_ops_of_the_whole_unrolled_step():
    plan = small("llama3-405b")
    report = check_plan(plan, workers=1)
    more = check_plan(small("llama3-405b", microbatches=6), workers=1)
    # forward and backward run once per microbatch; doubling microbatches roughly doubles the ops
    assert 1.8 < more.ops / report.ops < 2.1
    assert report.ranks == plan.ranks == 2 * 2 * 3


def test_a_block_taking_the_residual_stream_with_another_placement_breaks_the_contract(monkeypatch):
    from dataclasses import replace

    from verifier.placements import R
    from verifier.scale import blocks

    original = blocks.attention

    def replicated_input(plan, layer):
        block = original(plan, layer)
        x = replace(block.program.inputs[0], placements=(R,))
        return replace(block, program=replace(block.program, inputs=(x,) + block.program.inputs[1:]))

    monkeypatch.setattr(blocks, "attention", replicated_input)
    report = check_plan(small("llama3-405b", layers=2, pp=2), workers=1)
    contract = [f for f in report.findings if f.check == "contract"]
    assert [(f.block, f.stage) for f in contract] == [("layers.0.attention", 0), ("layers.1.attention", 1)]
    assert "across the pipeline stage boundary" in contract[1].message


def test_a_class_that_crashes_makes_the_plan_unsupported_never_verified(monkeypatch):
    from verifier.scale import solve

    def crash(job, started):
        raise RuntimeError("boom")

    monkeypatch.setattr(solve, "_run", crash)
    report = check_plan(small("llama3-8b"), workers=1)
    assert report.verdict == "unsupported"
    assert any("internal error" in f.message and "boom" in f.message for f in report.findings)
