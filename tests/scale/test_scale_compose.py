"""The compositional check agrees with one direct check of the materialised step."""
import pytest

from verifier.check import check_program
from verifier.scale import check_plan
from verifier.scale.faults import parse_fault
from verifier.scale.materialise import materialise
from verifier.scale.reduce import at_sizes, reduced_sizes

from .support import small


def direct(program):
    """One ordinary check of the whole materialised program (on sizes reduced for the whole of it)."""
    return check_program(at_sizes(program, reduced_sizes(program))).verdict


def plan():
    return small("llama3-70b", layers=2, pp=1, microbatches=1, schedule="1f1b", chunks=1)


def test_materialised_step_verifies_like_its_blocks():
    assert check_plan(plan(), workers=1).verdict == "verified"
    assert direct(materialise(plan())) == "verified"


@pytest.mark.parametrize("dp,expected", [(1, "violations"), (0, "verified")])
def test_fault_on_one_group_agrees_with_the_materialised_step_of_each_group(dp, expected):
    fault = parse_fault("drop-allreduce:layer=1,dp=1", plan())
    assert direct(materialise(plan(), fault, {"dp": dp})) == expected


def test_fault_on_one_group_is_reported_for_that_group_only():
    findings = [f for f in check_plan(plan(), "drop-allreduce:layer=1,dp=1", workers=1).findings
                if f.severity == "error"]
    assert [(f.block, f.ranks.split(" (")[0]) for f in findings] == [("layers.1.mlp", "dp=1, tp=0..1")]
