"""Seeded faults are found and localised to their block, layer, pipeline stage and ranks."""
import pytest

from verifier.scale import check_plan
from verifier.scale.faults import FaultError, parse_fault

from .support import small


def errors(report):
    return [f for f in report.findings if f.severity == "error"]


def test_dropped_mlp_reduction_on_one_tensor_parallel_group_is_found_in_its_layer_and_group():
    plan = small("llama3-405b")  # 6 layers on 3 stages: layer 4 is on stage 2
    report = check_plan(plan, "drop-allreduce:layer=4", workers=1)
    assert report.verdict == "violations"
    (finding,) = errors(report)
    assert (finding.block, finding.layer, finding.stage) == ("layers.4.mlp", 4, 2)
    assert "dp=1" in finding.ranks and "tp=0..1" in finding.ranks and "global 10-11" in finding.ranks
    assert finding.phase == "forward"
    assert "reduce_scatter -> l4_mlp_rs does not run here" in finding.message


def test_dropped_reduction_on_another_group_names_that_group():
    report = check_plan(small("llama3-405b"), "drop-allreduce:layer=1,dp=0", workers=1)
    (finding,) = errors(report)
    assert (finding.layer, finding.stage) == (1, 0) and "dp=0," in finding.ranks


def test_dropped_shared_expert_reduction_in_a_moe_layer_is_found():
    report = check_plan(small("deepseek-v3-671b"), "drop-allreduce:layer=4", workers=1)
    (finding,) = errors(report)
    assert finding.block == "layers.4.moe_router" and finding.layer == 4
    assert "dp=1" in finding.ranks and "ep=0" in finding.ranks


def test_swapped_pipeline_send_is_found_on_its_stage():
    report = check_plan(small("llama3-405b"), "swap-send:stage=1", workers=1)
    assert report.verdict == "violations"
    wrong = [f for f in errors(report) if "wrong neighbour" in f.message]
    assert wrong and wrong[0].stage == 1 and wrong[0].block == "pipeline schedule"


def test_gradient_averaged_twice_is_found_in_its_layer_and_parameter():
    report = check_plan(small("llama3-405b"), "double-divide:grad=layers.3.attention.wk", workers=1)
    (finding,) = errors(report)
    assert finding.block == "layers.3.attention.wk grad sync"
    assert (finding.layer, finding.stage, finding.check) == (3, 1, "equivalence")
    assert "averaged_again" in finding.op


def test_expert_gradient_averaged_twice_is_found():
    report = check_plan(small("deepseek-moe-16b"), "double-divide:grad=layers.2.moe_experts.w2", workers=1)
    (finding,) = errors(report)
    assert finding.block == "layers.2.moe_experts.w2 grad sync" and finding.layer == 2


@pytest.mark.parametrize("spec,message", [
    ("drop-allreduce:layer=99", "outside"), ("swap-send:stage=9", "outside"), ("explode:layer=1", "unknown fault"),
    ("double-divide:grad=layers.1.mlp.nope", "no gradient named"), ("drop-allreduce", "layer=N")])
def test_fault_specs_that_do_not_fit_the_plan_are_usage_errors(spec, message):
    with pytest.raises(FaultError, match=message):
        check_plan(small("llama3-405b"), spec, workers=1)


def test_swap_send_needs_a_pipeline():
    with pytest.raises(FaultError, match="no pipeline"):
        parse_fault("swap-send:stage=0", small("llama3-8b"))
