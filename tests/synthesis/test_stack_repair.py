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
    assert change.action == "insert" and change.kind == "all_reduce" and change.value == "l5_d"
    assert fix.sliced and fix.report.verdict == "verified"
    assert result.checks == 1  # only the winning candidate paid for a whole-stack proof
