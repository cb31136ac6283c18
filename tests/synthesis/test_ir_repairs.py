"""On every buggy IR example whose bug is a communication bug, the synthesizer finds a fix
that check_program verifies; the fixes are the ones a person would write, cheapest first."""
from __future__ import annotations

import re

import pytest

from verifier.check import check_program
from verifier.synthesis import Budget, synthesize
from verifier.text_format import parse_program

from .support import IR_EXAMPLES, TEMPORAL_EXAMPLES

# file -> (edit kinds of the cheapest fix, collective kinds involved)
COMMUNICATION_BUGS = {
    "double_allreduce.vir": ["remove"],
    "gather_wrong_dim.vir": ["change"],
    "gelu_on_partial_sum.vir": ["insert", "remove"],
    "layernorm_sharded_hidden.vir": ["insert", "remove"],
    "megatron_mlp_missing_allreduce.vir": ["insert"],
    "row_parallel_reduce_scatter_max.vir": ["change"],
    "scaling_divide_after_sum.vir": ["change"],  # all_reduce(avg) then / world: the op must be sum
    "sequence_parallel_wrong_dim.vir": ["change"],
}
NOT_COMMUNICATION = {
    "bias_before_allreduce.vir": "the bias is added before the reduction: local arithmetic, not a collective",
    "vocab_parallel_embedding_unmasked.vir": "foreign ids are not masked: local arithmetic, not a collective",
}


def _expected(path) -> str | None:
    match = re.search(r"#\s*expected:\s*(\w+)", path.read_text())
    return match.group(1) if match else None


def _load(path):
    return parse_program(path.read_text(), str(path))


def test_every_buggy_ir_example_is_classified():
    buggy = {p.name for p in IR_EXAMPLES.glob("*.vir") if _expected(p) == "violations"}
    unclassified = buggy - set(COMMUNICATION_BUGS) - set(NOT_COMMUNICATION)
    assert not unclassified, f"classify these examples in COMMUNICATION_BUGS or NOT_COMMUNICATION: {unclassified}"
    assert (set(COMMUNICATION_BUGS) | set(NOT_COMMUNICATION)) <= buggy


@pytest.mark.parametrize("name", sorted(COMMUNICATION_BUGS))
def test_communication_bug_gets_a_verified_fix(name):
    program = _load(IR_EXAMPLES / name)
    report = check_program(program, name)
    assert report.verdict == "violations"
    result = synthesize(program, report, file=name, budget=Budget(top_k=1))
    assert result.fixes, result.notes
    best = result.fixes[0]
    assert [change.action for change in best.changes] == COMMUNICATION_BUGS[name]
    assert best.report.verdict == "verified"
    assert check_program(best.program, name).verdict == "verified"


def test_missing_all_reduce_is_repaired_with_an_all_reduce_not_gather_and_sum():
    program = _load(IR_EXAMPLES / "megatron_mlp_missing_allreduce.vir")
    result = synthesize(program, check_program(program), budget=Budget(top_k=3))
    kinds = [tuple(step.kind for step in fix.changes[0].steps) for fix in result.fixes]
    assert kinds[0] == ("all_reduce",)
    assert ("reshape", "all_gather", "sum") in kinds  # the alternative was verified too, and ranked below
    costs = [fix.comm_cost for fix in result.fixes]
    assert costs == sorted(costs) and costs[0] < costs[kinds.index(("reshape", "all_gather", "sum"))]


def test_reduce_op_mismatch_is_repaired_by_changing_the_op():
    program = _load(IR_EXAMPLES / "row_parallel_reduce_scatter_max.vir")
    (fix,) = synthesize(program, check_program(program), budget=Budget(top_k=1)).fixes
    assert fix.changes[0].old_attr_dict["op"] == "max" and fix.changes[0].attr_dict["op"] == "sum"


def test_gather_on_the_wrong_dim_is_repaired_by_changing_the_dim():
    program = _load(IR_EXAMPLES / "gather_wrong_dim.vir")
    (fix,) = synthesize(program, check_program(program), budget=Budget(top_k=1)).fixes
    assert fix.changes[0].kind == "all_gather" and fix.changes[0].attr_dict["dim"] == 1


def test_all_reduce_of_a_replicated_value_is_removed():
    program = _load(IR_EXAMPLES / "double_allreduce.vir")
    fix = synthesize(program, check_program(program), budget=Budget(top_k=1)).fixes[0]
    assert fix.changes[0].action == "remove" and fix.changes[0].line == 12


def test_read_before_wait_is_repaired_by_moving_the_wait():
    program = _load(TEMPORAL_EXAMPLES / "async_read_before_wait.vir")
    fix = synthesize(program, check_program(program), budget=Budget(top_k=1)).fixes[0]
    assert fix.changes[0].action == "move_wait" and fix.changes[0].target_line == 14
    assert check_program(fix.program).verdict == "verified"


def test_a_bug_no_collective_edit_repairs_gets_no_fix():
    program = _load(IR_EXAMPLES / "vocab_parallel_embedding_unmasked.vir")
    result = synthesize(program, check_program(program), budget=Budget(top_k=1))
    assert result.fixes == []


def test_a_verified_program_has_nothing_to_repair():
    program = _load(IR_EXAMPLES / "megatron_mlp_ok.vir")
    result = synthesize(program, check_program(program))
    assert result.fixes == [] and result.notes
