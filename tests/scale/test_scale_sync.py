"""Data-parallel gradient synchronisation, checked on the stand-in at the real data-parallel size."""
from dataclasses import replace

from verifier.check import check_program
from verifier.scale import blocks
from verifier.scale.faults import NO_FAULT
from verifier.scale.reduce import at_sizes, reduced_sizes

from .support import small


def verdict(program):
    return check_program(at_sizes(program, reduced_sizes(program)), temporal=False).verdict


def param(plan, expert=False):
    return blocks.Param("layers.0.x.w", "w", expert, 4096, 8 if expert else 0)


def without(program, name):
    """The program with the backward op producing ``name`` removed (its result aliases its first argument)."""
    ops = [op for op in program.backward_ops if op.results != (name,)]
    source = next(op for op in program.backward_ops if op.results == (name,)).args[0]
    gradients = tuple(replace(g, value=source if g.value == name else g.value) for g in program.gradients)
    return replace(program, backward_ops=tuple(ops), gradients=gradients)


def test_zero_reduce_scatter_of_averaged_gradients_is_verified_at_the_real_data_parallel_size():
    plan = small("llama3-405b", dp=8, zero=True)
    program = blocks.grad_sync(plan, param(plan), NO_FAULT)
    assert program.mesh.size("dp") == 8 and [op.kind for op in program.backward_ops] == ["reduce_scatter"]
    assert verdict(program) == "verified"


def test_summing_instead_of_averaging_is_a_violation():
    plan = small("llama3-405b", dp=4)
    program = blocks.grad_sync(plan, param(plan), NO_FAULT)
    ops = [replace(op, attrs={**op.attrs, "op": "sum"}) for op in program.backward_ops]
    assert verdict(replace(program, backward_ops=tuple(ops))) == "violations"


def test_expert_gradients_need_the_expert_parallel_scaling():
    plan = small("deepseek-v3-671b")
    program = blocks.grad_sync(plan, param(plan, expert=True), NO_FAULT)
    assert verdict(program) == "verified"
    assert verdict(without(program, "ep_scaled")) == "violations"


def test_dense_gradients_in_a_moe_plan_are_averaged_over_expert_parallel_ranks_too():
    plan = small("deepseek-v3-671b")
    program = blocks.grad_sync(plan, param(plan), NO_FAULT)
    assert verdict(program) == "verified"
    assert verdict(without(program, "ep_avg")) == "violations"


def test_zero_shard_that_does_not_divide_at_the_real_size_is_reported():
    from verifier.scale.reduce import real_size_diagnostics
    plan = small("llama3-405b", dp=4, zero=True)
    program = blocks.grad_sync(plan, blocks.Param("p", "w", False, 4098), NO_FAULT)
    (problem,) = real_size_diagnostics(program)
    assert "K % 4 == 0 does not hold at the real sizes" in problem.message
