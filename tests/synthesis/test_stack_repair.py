"""A Llama-shaped stack with one layer's MLP all-reduce removed: the search localises the
bug from the diagnostic, checks a slice around the edit first, then verifies the whole stack."""
from verifier.check import check_program
from verifier.stacks import StackShape, llama_stack_vir
from verifier.synthesis import Budget, synthesize
from verifier.text_format import parse_program


def test_missing_all_reduce_in_one_layer_is_found_and_fully_verified():
    program = parse_program(llama_stack_vir(StackShape(layers=8), drop_allreduce_in_layer=5))
    report = check_program(program)
    result = synthesize(program, report, budget=Budget(first_only=True))
    (fix,) = result.fixes
    (change,) = fix.changes
    # an all-reduce, written as one collective or as reduce-scatter + all-gather (same ring cost)
    assert change.action == "insert" and change.value == "l5_d"
    assert [step.kind for step in change.steps] in (["all_reduce"], ["reduce_scatter", "all_gather"]) \
        or change.kind == "all_reduce"
    assert fix.sliced and fix.report.verdict == "verified"
    assert result.checks == 1  # only the winning candidate paid for a whole-stack proof
