"""check_traced on hand-built recordings: each test states a program and its expected verdict.

The recordings are written the way the tracing frontend emits them (aten op kinds, collectives
with ``group`` as global ranks, p2p with ``peer``/``tag``, sharded leaves sliced at the top of
each rank's list).  The last test is differential: small programs run for real with torch
(collectives simulated by hand) against the checker's verdict.
"""
from __future__ import annotations

import numpy as np
import pytest

from verifier.ir import Op, Span, TensorSpec
from verifier.report import UNSUPPORTED, VERIFIED, VIOLATIONS
from verifier.traced_check import MAX_LEAF_ELEMENTS, check_traced
from verifier.traced_ir import Comparison, TracedProgram


def op(results: str, kind: str, args=(), line: int | None = None, **attrs) -> Op:
    return Op(tuple(results.split()), kind, tuple(args), attrs, Span(line, "model.py"))


def whole(*shape):
    return tuple((0, n) for n in shape)


def program(inputs, reference, ranks, comparisons, passes=("forward",), assumptions=()) -> TracedProgram:
    return TracedProgram(len(ranks), {"tp": len(ranks)}, tuple(inputs), tuple(reference),
                         tuple(tuple(r) for r in ranks), tuple(comparisons), tuple(assumptions), tuple(passes),
                         "model.py")


def messages(report, check=None):
    return [d.message for d in report.diagnostics if check is None or d.check == check]


# --- a tensor-parallel MLP, forward and backward ----------------------------------------------------

B, H, F = 4, 6, 8
MLP_INPUTS = (TensorSpec("x", (B, H), "float32"), TensorSpec("w1", (F, H), "float32"),
              TensorSpec("w2", (H, F), "float32"), TensorSpec("cotangent", (B, H), "float32"))


def _mlp_body(w1: str, w2: str, activation: str = "aten.relu.default") -> list[Op]:
    return [op("w1t", "aten.t.default", [w1], 10), op("h", "aten.mm.default", ["x", "w1t"], 10),
            op("a", activation, ["h"], 11), op("w2t", "aten.t.default", [w2], 12),
            op("y", "aten.mm.default", ["a", "w2t"], 12)]


def _mlp_backward(w1: str, w2: str, reduce_dx: bool, group) -> list[Op]:
    ops = [op("dy", "aten.clone.default", ["cotangent"], 20),
           op("da", "aten.mm.default", ["dy", w2], 20),
           op("dyt", "aten.t.default", ["dy"], 20), op("dw2", "aten.mm.default", ["dyt", "a"], 20),
           op("dh", "aten.threshold_backward.default", ["da", "h"], 20, threshold=0),
           op("dht", "aten.t.default", ["dh"], 20), op("dw1", "aten.mm.default", ["dht", "x"], 20),
           op("dx0", "aten.mm.default", ["dh", w1], 20)]
    if reduce_dx:
        ops.append(op("dx", "all_reduce", ["dx0"], 21, group=group, op="sum"))
    else:
        ops.append(op("dx", "aten.alias.default", ["dx0"], 21))
    return ops


def tp_mlp(world: int = 2, *, reduce_output: bool = True, reduce_dx: bool = True, backward: bool = False,
           slice_offset: int = 0) -> TracedProgram:
    step = F // world
    group = tuple(range(world))
    reference = _mlp_body("w1", "w2") + [op("out", "all_reduce", ["y"], 13, group=(0,), op="sum")]
    if backward:
        reference += _mlp_backward("w1", "w2", True, (0,))
    ranks = []
    for r in range(world):
        start = (r * step + slice_offset) % F
        ops = [op("w1s", "aten.slice.Tensor", ["w1"], 3, dim=0, start=start, end=start + step, layout_source="shape"),
               op("w2s", "aten.slice.Tensor", ["w2"], 4, dim=1, start=start, end=start + step, layout_source="shape")]
        ops += _mlp_body("w1s", "w2s")
        ops.append(op("out", "all_reduce" if reduce_output else "aten.clone.default", ["y"], 13,
                      **({"group": group, "op": "sum"} if reduce_output else {})))
        if backward:
            ops += _mlp_backward("w1s", "w2s", reduce_dx, group)
        ranks.append(ops)
    comparisons = [Comparison("output 0", "output", "out", ("out",) * world, (whole(B, H),) * world, Span(13))]
    if backward:
        comparisons += [
            Comparison("gradient of w1", "gradient", "dw1", ("dw1",) * world,
                       tuple(((r * step, (r + 1) * step), (0, H)) for r in range(world))),
            Comparison("gradient of w2", "gradient", "dw2", ("dw2",) * world,
                       tuple(((0, H), (r * step, (r + 1) * step)) for r in range(world))),
            Comparison("gradient of x", "gradient", "dx", ("dx",) * world, (whole(B, H),) * world)]
    return program(MLP_INPUTS, reference, ranks, comparisons, ("forward", "backward") if backward else ("forward",),
                   ("w1 is sharded along dim 0 (layout from shape)",))


def test_tp_mlp_forward_is_verified_with_what_was_proven():
    report = check_traced(tp_mlp())
    assert report.verdict == VERIFIED
    assert any(p.startswith("forward: 1 output(s) equal") and "ranks 0-1" in p for p in report.proven)
    assert any(p.startswith("temporal: collective order agrees") for p in report.proven)
    assert any(p.startswith("sizes:") and "w1[8, 6]" in p for p in report.proven)


def test_assumptions_are_repeated_in_the_report():
    report = check_traced(tp_mlp())
    assert report.extra["assumptions"] == ["w1 is sharded along dim 0 (layout from shape)"]
    assert "w1 is sharded along dim 0 (layout from shape)" in messages(report, "assumption")
    assert any("no backward pass was recorded" in m for m in messages(report, "assumption"))


def test_tp_mlp_missing_all_reduce_is_found_where_the_partial_sum_is_handed_back():
    # the row-parallel matmul (line 12) computes a right partial sum on each rank; line 13 hands
    # it back unreduced (a copy where the all-reduce belongs): the line a user must change
    report = check_traced(tp_mlp(reduce_output=False))
    assert report.verdict == VIOLATIONS
    (diagnostic,) = [d for d in report.diagnostics if d.check == "equivalence"]
    assert diagnostic.line == 13 and "output 0" in diagnostic.message
    assert "partial sum no collective reduces" in diagnostic.message
    assert diagnostic.counterexample is not None and diagnostic.counterexample.confirmed


def test_tp_mlp_wrong_shard_offset_is_a_violation():
    report = check_traced(tp_mlp(slice_offset=1))
    assert report.verdict == VIOLATIONS


def test_tp_mlp_with_backward_proves_parameter_and_input_gradients():
    report = check_traced(tp_mlp(backward=True, world=2))
    assert report.verdict == VERIFIED
    assert any(p.startswith("backward: gradients of 3") and "w1" in p and "x" in p for p in report.proven)


def test_missing_input_gradient_all_reduce_names_the_gradient_and_layout():
    """Issue 12 pattern 1: the input gradient stays a per-rank partial sum.  Line 20's matmul computes
    a right partial sum on each rank; line 21 passes it on unreduced (where the all-reduce belongs)."""
    report = check_traced(tp_mlp(backward=True, reduce_dx=False))
    assert report.verdict == VIOLATIONS
    (diagnostic,) = [d for d in report.diagnostics if d.check == "equivalence"]
    assert "gradient of x" in diagnostic.message and diagnostic.line == 21
    assert "x assumed whole" in diagnostic.message


def test_four_ranks_verify():
    assert check_traced(tp_mlp(world=4, backward=True)).verdict == VERIFIED


# --- collectives and gradients --------------------------------------------------------------------

def _gathered(dim: int) -> TracedProgram:
    """x is sharded along dim 1; the ranks all-gather it back along ``dim``."""
    inputs = (TensorSpec("x", (4, 6), "float32"),)
    reference = [op("y", "all_gather", ["x"], 7, group=(0,), dim=1)]
    ranks = [[op("xs", "aten.slice.Tensor", ["x"], 2, dim=1, start=3 * r, end=3 * r + 3, layout_source="dtensor"),
              op("y", "all_gather", ["xs"], 7, group=(0, 1), dim=dim)] for r in range(2)]
    return program(inputs, reference, ranks, [Comparison("output 0", "output", "y", ("y", "y"), (whole(4, 6),) * 2)])


def test_all_gather_on_the_sharded_dim_is_verified():
    assert check_traced(_gathered(1)).verdict == VERIFIED


def test_all_gather_on_the_wrong_dim_is_a_violation_at_the_gather():
    report = check_traced(_gathered(0))
    assert report.verdict == VIOLATIONS
    (diagnostic,) = [d for d in report.diagnostics if d.check == "equivalence"]
    assert diagnostic.line == 7 and "shape [8, 3]" in diagnostic.message + diagnostic.counterexample.note


def _data_parallel_gradient(extra_average: bool) -> TracedProgram:
    """loss = mean over the batch of x @ w; each rank holds half the batch and averages gradients."""
    inputs = (TensorSpec("x", (4, 3), "float32"), TensorSpec("w", (3, 2), "float32"))
    grad = [op("ones", "aten.ones.default", [], 30, size=[4, 2]),
            op("xt", "aten.t.default", ["x"], 30), op("g0", "aten.mm.default", ["xt", "ones"], 30),
            op("g1", "aten.div.Scalar", ["g0"], 30, other=4)]
    reference = grad + [op("g", "all_reduce", ["g1"], 31, group=(0,), op="avg")]
    ranks = []
    for r in range(2):
        ops = [op("xs", "aten.slice.Tensor", ["x"], 2, dim=0, start=2 * r, end=2 * r + 2, layout_source="shape"),
               op("ones", "aten.ones.default", [], 30, size=[2, 2]),
               op("xt", "aten.t.default", ["xs"], 30), op("g0", "aten.mm.default", ["xt", "ones"], 30),
               op("g1", "aten.div.Scalar", ["g0"], 30, other=2),
               op("g2", "all_reduce", ["g1"], 31, group=(0, 1), op="avg")]
        ops.append(op("g", "aten.div.Scalar", ["g2"], 32, other=2) if extra_average
                   else op("g", "aten.alias.default", ["g2"], 32))
        ranks.append(ops)
    return program(inputs, reference, ranks, [Comparison("gradient of w", "gradient", "g", ("g", "g"),
                                                         (whole(3, 2),) * 2)], ("forward", "backward"))


def test_averaged_data_parallel_gradient_is_verified():
    assert check_traced(_data_parallel_gradient(False)).verdict == VERIFIED


def test_double_averaged_gradient_is_found_at_the_second_division():
    report = check_traced(_data_parallel_gradient(True))
    assert report.verdict == VIOLATIONS
    (diagnostic,) = [d for d in report.diagnostics if d.check == "equivalence"]
    assert diagnostic.line == 32 and "gradient of w" in diagnostic.message


def test_collectives_in_a_different_order_on_two_ranks_name_both_lines():
    inputs = (TensorSpec("x", (2, 2), "float32"),)
    reference = [op("a", "all_reduce", ["x"], 5, group=(0,), op="max"), op("b", "all_gather", ["x"], 6, group=(0,))]
    first = [op("a", "all_reduce", ["x"], 5, group=(0, 1), op="max"), op("b", "all_gather", ["x"], 6, group=(0, 1))]
    second = [op("b", "all_gather", ["x"], 6, group=(0, 1)), op("a", "all_reduce", ["x"], 5, group=(0, 1), op="max")]
    report = check_traced(program(inputs, reference, [first, second],
                                  [Comparison("output 0", "output", "a", ("a", "a"), (whole(2, 2),) * 2)]))
    assert report.verdict == VIOLATIONS
    order = [d for d in report.diagnostics if d.check == "collective-order"]
    assert order and "line 5" in order[0].message and "line 6" in order[0].message
    assert not any(p.startswith("forward") for p in report.proven)


# --- point-to-point and async ----------------------------------------------------------------------

def _exchange(receive_tags: tuple[int, int]) -> TracedProgram:
    """Rank 0 sends x with tag 1 then y with tag 2; rank 1 receives in the order given."""
    inputs = (TensorSpec("x", (2,), "float32"), TensorSpec("y", (2,), "float32"))
    reference = [op("s", "aten.add.Tensor", ["x", "y"], 40)]
    sender = [op("", "send", ["x"], 10, peer=1, tag=1), op("", "send", ["y"], 11, peer=1, tag=2),
              op("s", "aten.add.Tensor", ["x", "y"], 40)]
    names = {1: "rx", 2: "ry"}
    receiver = [op(names[t], "recv", [], 20 + i, peer=0, tag=t) for i, t in enumerate(receive_tags)]
    receiver.append(op("s", "aten.add.Tensor", ["rx", "ry"], 40))
    ops0 = [o if o.results != ("",) else Op((), o.kind, o.args, o.attrs, o.span) for o in sender]
    return program(inputs, reference, [ops0, receiver],
                   [Comparison("output 0", "output", "s", ("s", "s"), ((( 0, 2),),) * 2)])


def test_receives_in_send_order_are_matched_and_verified():
    report = check_traced(_exchange((1, 2)))
    assert report.verdict == VERIFIED
    assert any("point-to-point messages matched" in p for p in report.proven)


def test_receives_posted_in_the_other_tag_order_deadlock():
    """Issue 12 pattern 5: under gloo the first send waits for a receive with its tag."""
    report = check_traced(_exchange((2, 1)))
    assert report.verdict == VIOLATIONS
    deadlock = [d for d in report.diagnostics if d.check == "deadlock"]
    assert deadlock and "rank 1" in deadlock[0].message
    assert not any(p.startswith("temporal: deadlock-free") for p in report.proven)


def test_a_receive_nobody_sends_blocks_forever():
    inputs = (TensorSpec("x", (2,), "float32"),)
    reference = [op("s", "aten.clone.default", ["x"], 5)]
    ranks = [[op("s", "aten.clone.default", ["x"], 5)],
             [op("r", "recv", [], 9, peer=0, tag=0), op("s", "aten.clone.default", ["x"], 5)]]
    report = check_traced(program(inputs, reference, ranks,
                                  [Comparison("output 0", "output", "s", ("s", "s"), (((0, 2),),) * 2)]))
    assert report.verdict == VIOLATIONS
    assert any(d.check == "p2p" and d.line == 9 and "no matching send" in d.message for d in report.diagnostics)
    assert not any(p.startswith("temporal: deadlock-free") for p in report.proven)


def _async(read_before_wait: bool) -> TracedProgram:
    inputs = (TensorSpec("x", (2, 2), "float32"),)
    reference = [op("y", "all_reduce", ["x"], 5, group=(0,), op="max"), op("z", "aten.mul.Scalar", ["y"], 7, other=2)]
    ops = [op("y", "all_reduce", ["x"], 5, group=(0, 1), op="max", handle="work")]
    use = op("z", "aten.mul.Scalar", ["y"], 7, other=2)
    ops += [use, op("", "wait", [], 6, handle="work")] if read_before_wait else [op("", "wait", [], 6, handle="work"),
                                                                                 use]
    ops = [Op((), o.kind, o.args, o.attrs, o.span) if o.results == ("",) else o for o in ops]
    return program(inputs, reference, [ops, ops], [Comparison("output 0", "output", "z", ("z", "z"),
                                                              (whole(2, 2),) * 2)])


def test_async_result_used_after_its_wait_is_verified():
    report = check_traced(_async(False))
    assert report.verdict == VERIFIED
    assert any("async op" in p for p in report.proven)


def test_async_result_read_before_its_wait_is_a_violation():
    report = check_traced(_async(True))
    assert report.verdict == VIOLATIONS
    assert any(d.check == "async" and d.line == 7 for d in report.diagnostics)


def _view_of_pending(read_view_before_wait: bool) -> TracedProgram:
    """A view (and the recorder's write-back into a base buffer) of an async result, made before
    its wait: metadata only, as Megatron's sequence-parallel backward does with its gather buffer."""
    inputs = (TensorSpec("x", (2, 2), "float32"), TensorSpec("buffer", (4,), "float32"))
    reference = [op("y", "all_reduce", ["x"], 5, group=(0,), op="max"), op("z", "aten.mul.Scalar", ["y"], 7, other=2)]
    ops = [op("y", "all_reduce", ["x"], 5, group=(0, 1), op="max", handle="work"),
           op("flat", "aten.view.default", ["y"], 5, size=[4]),
           op("kept", "aten.slice_scatter.default", ["buffer", "flat"], 5, dim=0, start=0, end=4, step=1,
              write_back=True),
           op("back", "aten.view.default", ["kept"], 6, size=[2, 2])]
    use = op("z", "aten.mul.Scalar", ["back"], 7, other=2)
    wait = Op((), "wait", (), {"handle": "work"}, Span(6, "model.py"))
    ops += [use, wait] if read_view_before_wait else [wait, use]
    return program(inputs, reference, [ops, ops], [Comparison("output 0", "output", "z", ("z", "z"),
                                                              (whole(2, 2),) * 2)])


def test_a_view_of_an_async_result_taken_before_its_wait_is_not_a_read():
    report = check_traced(_view_of_pending(False))
    assert not [d for d in report.diagnostics if d.check == "async"]
    assert report.verdict == VERIFIED


def test_reading_a_view_of_an_async_result_before_its_wait_is_a_violation():
    report = check_traced(_view_of_pending(True))
    assert report.verdict == VIOLATIONS
    assert any(d.check == "async" and d.line == 7 for d in report.diagnostics)


# --- integer semantics --------------------------------------------------------------------------------

def _integer_positions(rank_rounding: str) -> TracedProgram:
    """Position ids halved: the reference uses ``//`` (floor); the ranks a rounding mode."""
    inputs = (TensorSpec("pos", (6,), "int64", bounds=(-8, 8)),)
    reference = [op("q", "aten.floor_divide.default", ["pos", "two"], 3), ]
    reference = [op("two", "aten.scalar_tensor.default", [], 3, s=2, dtype="int64")] + reference
    ranks = [[op("two", "aten.scalar_tensor.default", [], 3, s=2, dtype="int64"),
              op("q", "aten.div.Tensor_mode", ["pos", "two"], 3, rounding_mode=rank_rounding)] for _ in range(2)]
    return program(inputs, reference, ranks, [Comparison("output 0", "output", "q", ("q", "q"), (((0, 6),),) * 2)])


def test_floor_division_equals_floor_rounding_mode_by_proof():
    report = check_traced(_integer_positions("floor"))
    assert report.verdict == VERIFIED


def test_truncating_division_differs_from_floor_division_on_negative_ids():
    report = check_traced(_integer_positions("trunc"))
    assert report.verdict == VIOLATIONS
    assert report.diagnostics[-1].counterexample is not None


def test_integer_true_division_is_not_integer_division():
    """``ids / 2`` on an int64 tensor is true division in torch (issue 12 pattern 6)."""
    inputs = (TensorSpec("ids", (4,), "int64", bounds=(0, 10)),)
    reference = [op("half", "aten.div.Scalar", ["ids"], 3, other=2)]
    ranks = [[op("half", "aten.div.Scalar_mode", ["ids"], 3, other=2, rounding_mode="floor")] for _ in range(2)]
    report = check_traced(program(inputs, reference, ranks,
                                  [Comparison("output 0", "output", "half", ("half", "half"), (((0, 4),),) * 2)]))
    assert report.verdict == VIOLATIONS


# --- what is not a pass --------------------------------------------------------------------------------

def test_a_program_with_no_comparisons_is_unsupported_not_vacuously_verified():
    report = check_traced(program((TensorSpec("x", (2,), "float32"),), [], [[], []], []))
    assert report.verdict == UNSUPPORTED
    assert "vacuously" in messages(report, "unsupported")[0]


def test_an_op_we_do_not_model_is_unsupported_with_its_line():
    inputs = (TensorSpec("x", (2, 2), "float32"),)
    ops = [op("y", "aten.linalg_svd.default", ["x"], 17)]
    report = check_traced(program(inputs, ops, [ops, ops], [Comparison("output 0", "output", "y", ("y", "y"),
                                                                       (whole(2, 2),) * 2)]))
    assert report.verdict == UNSUPPORTED
    (diagnostic,) = [d for d in report.diagnostics if d.check == "unsupported"]
    assert diagnostic.line == 17 and "aten.linalg_svd.default" in diagnostic.message


def test_an_engine_error_on_the_reference_is_unsupported_never_a_violation():
    """Issue 12 pattern 3: a broadcast from a rank the one-device world does not have."""
    inputs = (TensorSpec("x", (2,), "float32"),)
    reference = [op("y", "broadcast", ["x"], 4, group=(0,), src=1)]
    ranks = [[op("y", "broadcast", ["x"], 4, group=(0, 1), src=1)] for _ in range(2)]
    report = check_traced(program(inputs, reference, ranks,
                                  [Comparison("output 0", "output", "y", ("y", "y"), (((0, 2),),) * 2)]))
    assert report.verdict == UNSUPPORTED
    assert any(d.line == 4 for d in report.diagnostics if d.check == "unsupported")


def test_leaves_too_large_for_the_solver_are_refused_with_their_size():
    inputs = (TensorSpec("x", (MAX_LEAF_ELEMENTS + 1,), "float32"),)
    ops = [op("y", "aten.clone.default", ["x"], 3)]
    report = check_traced(program(inputs, ops, [ops, ops], [Comparison("output 0", "output", "y", ("y", "y"),
                                                                       (((0, MAX_LEAF_ELEMENTS + 1),),) * 2)]))
    assert report.verdict == UNSUPPORTED
    assert "too large for the solver" in messages(report, "unsupported")[0]


def test_reading_an_undefined_value_is_a_malformed_recording_not_a_violation():
    inputs = (TensorSpec("x", (2,), "float32"),)
    ops = [op("y", "aten.add.Tensor", ["x", "ghost"], 3)]
    report = check_traced(program(inputs, ops, [ops, ops], [Comparison("output 0", "output", "y", ("y", "y"),
                                                                       (((0, 2),),) * 2)]))
    assert report.verdict == UNSUPPORTED
    assert "ghost" in messages(report, "unsupported")[0]


def test_exp_products_are_proven_by_the_exp_identity():
    """exp(a) * exp(b) against exp(a + b): online-softmax rescaling rests on this identity."""
    inputs = (TensorSpec("a", (2,), "float32"), TensorSpec("b", (2,), "float32"))
    reference = [op("s", "aten.add.Tensor", ["a", "b"], 3), op("y", "aten.exp.default", ["s"], 4)]
    rank = [op("ea", "aten.exp.default", ["a"], 3), op("eb", "aten.exp.default", ["b"], 3),
            op("y", "aten.mul.Tensor", ["ea", "eb"], 4)]
    report = check_traced(program(inputs, reference, [rank, rank],
                                  [Comparison("output 0", "output", "y", ("y", "y"), (((0, 2),),) * 2)]))
    assert report.verdict == VERIFIED


def test_a_counterexample_that_only_the_abstraction_allows_is_not_reported():
    """sigmoid(x) against 1 - sigmoid(-x): equal on reals, but sigmoid is uninterpreted."""
    inputs = (TensorSpec("x", (2,), "float32"),)
    reference = [op("y", "aten.sigmoid.default", ["x"], 4)]
    rank = [op("n", "aten.neg.default", ["x"], 3), op("s", "aten.sigmoid.default", ["n"], 3),
            op("y", "aten.rsub.Scalar", ["s"], 4, other=1)]
    report = check_traced(program(inputs, reference, [rank, rank],
                                  [Comparison("output 0", "output", "y", ("y", "y"), (((0, 2),),) * 2)]))
    assert report.verdict == UNSUPPORTED
    assert not [d for d in report.diagnostics if d.check == "equivalence"]


# --- differential: random small programs run for real with torch ------------------------------------

ACTIVATIONS = ("aten.relu.default", "aten.gelu.default", "aten.tanh.default", "aten.silu.default")
MUTATIONS = ("none", "no_reduce", "double_reduce", "shift_shard", "avg_reduce", "bias_before_reduce", "scale",
             "softmax_sharded_dim", "gather_wrong_dim")


def _random_program(seed: int) -> tuple[TracedProgram, str]:
    """A column- then row-parallel block, or a row-sharded softmax, with one random mutation."""
    rng = np.random.default_rng(seed)
    world = int(rng.choice([2, 4]))
    mutation = str(rng.choice(MUTATIONS))
    if mutation in ("softmax_sharded_dim", "gather_wrong_dim") or rng.random() < 0.25:
        mutation = mutation if mutation in ("softmax_sharded_dim", "gather_wrong_dim") else "none"
        return _softmax_program(world, mutation), mutation
    activation = str(rng.choice(ACTIVATIONS))
    rows, hidden, ffn = 3, 5, 4 * world
    step = ffn // world
    inputs = (TensorSpec("x", (rows, hidden), "float32"), TensorSpec("w1", (ffn, hidden), "float32"),
              TensorSpec("w2", (hidden, ffn), "float32"), TensorSpec("bias", (hidden,), "float32"))

    def body(w1, w2, group, reduce_op="sum", reduce_count=1, bias_first=False, scale=False):
        ops = [op("w1t", "aten.t.default", [w1], 10), op("h", "aten.mm.default", ["x", "w1t"], 10),
               op("a", activation, ["h"], 11), op("w2t", "aten.t.default", [w2], 12),
               op("y0", "aten.mm.default", ["a", "w2t"], 12)]
        current = "y0"
        if bias_first:
            ops.append(op("yb", "aten.add.Tensor", [current, "bias"], 13))
            current = "yb"
        for k in range(reduce_count):
            ops.append(op(f"r{k}", "all_reduce", [current], 14, group=group, op=reduce_op))
            current = f"r{k}"
        if not bias_first:
            ops.append(op("yb", "aten.add.Tensor", [current, "bias"], 15))
            current = "yb"
        ops.append(op("out", "aten.mul.Scalar" if scale else "aten.alias.default", [current], 16,
                      **({"other": 2} if scale else {})))
        return ops

    reference = body("w1", "w2", (0,))
    ranks = []
    for r in range(world):
        start = ((r + (mutation == "shift_shard")) % world) * step
        ops = [op("w1s", "aten.slice.Tensor", ["w1"], 2, dim=0, start=start, end=start + step, layout_source="shape"),
               op("w2s", "aten.slice.Tensor", ["w2"], 3, dim=1, start=r * step, end=(r + 1) * step,
                  layout_source="shape")]
        ops += body("w1s", "w2s", tuple(range(world)), reduce_op="avg" if mutation == "avg_reduce" else "sum",
                    reduce_count={"no_reduce": 0, "double_reduce": 2}.get(mutation, 1),
                    bias_first=mutation == "bias_before_reduce", scale=mutation == "scale")
        ranks.append(ops)
    comparison = Comparison("output 0", "output", "out", ("out",) * world, (whole(rows, hidden),) * world)
    return program(inputs, reference, ranks, [comparison]), mutation


def _softmax_program(world: int, mutation: str) -> TracedProgram:
    rows, cols = 2 * world, 3
    inputs = (TensorSpec("x", (rows, cols), "float32"),)
    step = rows // world
    reference = [op("p", "aten._softmax.default", ["x"], 5, dim=1, half_to_float=False),
                 op("y", "all_gather", ["p"], 6, group=(0,), dim=0)]
    ranks = [[op("xs", "aten.slice.Tensor", ["x"], 2, dim=0, start=r * step, end=(r + 1) * step,
                 layout_source="dtensor"),
              op("p", "aten._softmax.default", ["xs"], 5, dim=0 if mutation == "softmax_sharded_dim" else 1,
                 half_to_float=False),
              op("y", "all_gather", ["p"], 6, group=tuple(range(world)), dim=1 if mutation == "gather_wrong_dim" else 0)]
             for r in range(world)]
    return program(inputs, reference, ranks, [Comparison("output 0", "output", "y", ("y",) * world,
                                                         (whole(rows, cols),) * world)])


def _torch_collective(torch, kind: str, values: list, attrs: dict) -> list:
    if kind == "all_reduce":
        stacked = torch.stack(values)
        total = {"sum": stacked.sum(0), "avg": stacked.mean(0), "max": stacked.amax(0)}[attrs.get("op", "sum")]
        return [total.clone() for _ in values]
    if kind == "all_gather":
        return [torch.cat(values, dim=attrs.get("dim", 0)) for _ in values]
    raise AssertionError(kind)


def _torch_run(torch, call_torch, op_lists, leaves: dict) -> list[dict]:
    """Replay the recording with real torch ops; collectives computed by hand across ranks."""
    envs = [{k: torch.tensor(v) for k, v in leaves.items()} for _ in op_lists]
    for position in range(len(op_lists[0])):
        first = op_lists[0][position]
        if first.kind in ("all_reduce", "all_gather"):
            values = [env[ops[position].args[0]] for env, ops in zip(envs, op_lists)]
            for env, ops, value in zip(envs, op_lists, _torch_collective(torch, first.kind, values, first.attrs)):
                env[ops[position].results[0]] = value
            continue
        for env, ops in zip(envs, op_lists):
            current = ops[position]
            attrs = {k: v for k, v in current.attrs.items() if k != "layout_source"}
            (value,) = call_torch(current.kind, [env[a].numpy() for a in current.args], attrs)
            env[current.results[0]] = torch.tensor(value)
    return envs


@pytest.mark.torch
@pytest.mark.parametrize("seed", range(20))
def test_checker_agrees_with_torch_on_random_programs(seed):
    """Never `verified` when torch's numbers differ; never a violation when they agree."""
    torch = pytest.importorskip("torch")
    from test_aten_rules import call_torch

    traced, mutation = _random_program(seed)
    rng = np.random.default_rng(1000 + seed)
    leaves = {spec.name: rng.standard_normal(tuple(spec.shape)) for spec in traced.inputs}
    (reference,) = _torch_run(torch, call_torch, (traced.reference,), leaves)
    ranks = _torch_run(torch, call_torch, traced.ranks, leaves)
    agree = True
    for comparison in traced.comparisons:
        whole_value = reference[comparison.reference].numpy()
        for env, name, region in zip(ranks, comparison.per_rank, comparison.regions):
            expected = whole_value[tuple(slice(a, b) for a, b in region)]
            got = env[name].numpy()
            agree &= expected.shape == got.shape and bool(np.allclose(expected, got, rtol=1e-5, atol=1e-6))
    verdict = check_traced(traced).verdict
    if agree:
        assert verdict == VERIFIED, f"{mutation}: torch agrees, checker says {verdict}"
    else:
        assert verdict == VIOLATIONS, f"{mutation}: torch differs, checker says {verdict}"


def _relu_two_ways() -> TracedProgram:
    """relu(x) against (x + |x|) / 2: equal on the reals, but only the solver sees it."""
    inputs = (TensorSpec("x", (3,), "float32"),)
    reference = [op("y", "aten.relu.default", ["x"], 3)]
    rank = [op("a", "aten.abs.default", ["x"], 3), op("s", "aten.add.Tensor", ["x", "a"], 3),
            op("y", "aten.div.Scalar", ["s"], 3, other=2)]
    return program(inputs, reference, [rank, rank], [Comparison("output 0", "output", "y", ("y", "y"),
                                                                (((0, 3),),) * 2)])


def test_what_normal_forms_cannot_close_the_solver_proves():
    report = check_traced(_relu_two_ways())
    assert report.verdict == VERIFIED
    assert report.extra["solver"]["solver_calls"] >= 1


def test_a_spent_time_budget_is_unsupported_never_verified():
    report = check_traced(_relu_two_ways(), timeout_s=0)
    assert report.verdict == UNSUPPORTED
    assert "timeout" in messages(report, "unsupported")[0]


def _causal_softmax(rank_diagonal: int) -> TracedProgram:
    """Rows of causally masked scores (``masked_fill(-inf)``) split over two ranks."""
    inputs = (TensorSpec("s", (4, 4), "float32"),)

    def body(source: str, row0: int, diagonal: int) -> list[Op]:
        return [op("rows", "aten.arange.start", [], 5, start=row0, end=row0 + (4 if source == "s" else 2)),
                op("cols", "aten.arange.default", [], 5, end=4),
                op("r2", "aten.unsqueeze.default", ["rows"], 6, dim=1),
                op("shifted", "aten.add.Scalar", ["r2"], 6, other=diagonal),
                op("mask", "aten.gt.Tensor", ["cols", "shifted"], 6),
                op("masked", "aten.masked_fill.Scalar", [source, "mask"], 7, value=float("-inf")),
                op("p", "aten._softmax.default", ["masked"], 8, dim=-1, half_to_float=False)]

    reference = body("s", 0, 0)
    ranks = [[op("local", "aten.slice.Tensor", ["s"], 2, dim=0, start=2 * r, end=2 * r + 2, layout_source="shape")]
             + body("local", 2 * r, rank_diagonal) for r in range(2)]
    return program(inputs, reference, ranks, [Comparison("output 0", "output", "p", ("p", "p"),
                                                         (((0, 2), (0, 4)), ((2, 4), (0, 4))))])


def test_causal_mask_with_minus_infinity_and_global_positions_is_verified():
    assert check_traced(_causal_softmax(0)).verdict == VERIFIED


def test_causal_mask_shifted_by_one_is_a_violation():
    assert check_traced(_causal_softmax(1)).verdict == VIOLATIONS


def test_a_deadlock_is_reported_even_when_some_op_is_not_modelled():
    """Time needs no op semantics: the hang is a violation, not an unsupported op."""
    traced = _exchange((2, 1))
    odd = op("u", "aten.linalg_svd.default", ["x"], 3)
    traced = TracedProgram(traced.world, traced.mesh, traced.inputs, traced.reference,
                           tuple((odd,) + ranks for ranks in traced.ranks), traced.comparisons)
    report = check_traced(traced)
    assert report.verdict == VIOLATIONS
    assert any(d.check == "deadlock" for d in report.diagnostics)


def _online_softmax(rescale_sum: bool) -> TracedProgram:
    """softmax of rows of 4 against two blocks of 2 with a running max (flash-attention style)."""
    inputs = (TensorSpec("x", (3, 4), "float32"),)
    reference = [op("m", "aten.amax.default", ["x"], 3, dim=[-1], keepdim=True),
                 op("d", "aten.sub.Tensor", ["x", "m"], 4), op("p", "aten.exp.default", ["d"], 4),
                 op("l", "aten.sum.dim_IntList", ["p"], 5, dim=[-1], keepdim=True),
                 op("y", "aten.div.Tensor", ["p", "l"], 6)]
    rank = [op("a", "aten.slice.Tensor", ["x"], 2, dim=1, start=0, end=2),
            op("b", "aten.slice.Tensor", ["x"], 2, dim=1, start=2, end=4),
            op("m1", "aten.amax.default", ["a"], 3, dim=[-1], keepdim=True),
            op("da", "aten.sub.Tensor", ["a", "m1"], 4), op("pa", "aten.exp.default", ["da"], 4),
            op("la", "aten.sum.dim_IntList", ["pa"], 5, dim=[-1], keepdim=True),
            op("mb", "aten.amax.default", ["b"], 13, dim=[-1], keepdim=True),
            op("m2", "aten.maximum.default", ["m1", "mb"], 13),
            op("dc", "aten.sub.Tensor", ["m1", "m2"], 14), op("c", "aten.exp.default", ["dc"], 14),
            op("db", "aten.sub.Tensor", ["b", "m2"], 15), op("pb", "aten.exp.default", ["db"], 15),
            op("lb", "aten.sum.dim_IntList", ["pb"], 16, dim=[-1], keepdim=True),
            op("lac", "aten.mul.Tensor", ["la", "c"] if rescale_sum else ["la", "la"], 17),
            op("l", "aten.add.Tensor", ["lac" if rescale_sum else "la", "lb"], 17),
            op("pac", "aten.mul.Tensor", ["pa", "c"], 18),
            op("p", "aten.cat.default", ["pac", "pb"], 18, dim=1),
            op("y", "aten.div.Tensor", ["p", "l"], 19)]
    return program(inputs, reference, [rank, rank], [Comparison("output 0", "output", "y", ("y", "y"),
                                                                (whole(3, 4),) * 2)])


def test_online_softmax_rescaling_is_proven_equal_to_softmax():
    """Issue 12 pattern 11: exp(m1 - m2) rescaling of partial sums, as ring attention does."""
    assert check_traced(_online_softmax(True)).verdict == VERIFIED


def test_online_softmax_without_rescaling_the_sum_is_a_violation():
    assert check_traced(_online_softmax(False)).verdict == VIOLATIONS


def test_ops_of_one_line_pair_by_common_subsequence_not_occurrence():
    """A rank's masked vocabulary lookup adds ops to the line (a clone of the ids among them);
    the clone of ``.contiguous()`` after the lookup still pairs with the reference's clone."""
    from verifier.traced_check import paired_positions
    reference = [op("e", "aten.embedding.default", ["w", "ids"], 30), op("v", "aten.view.default", ["e"], 30),
                 op("c", "aten.clone.default", ["v"], 30)]
    rank = [op("m", "aten.lt.Scalar", ["ids"], 30), op("k", "aten.clone.default", ["ids"], 30),
            op("e", "aten.embedding.default", ["w", "k"], 30), op("r", "all_reduce", ["e"], 30, group=(0, 1)),
            op("v", "aten.view.default", ["r"], 30), op("c", "aten.clone.default", ["v"], 30)]
    assert paired_positions(tuple(reference), tuple(rank)) == {2: 0, 4: 1, 5: 2}


def test_decide_proves_each_element_and_returns_a_model_for_a_false_one():
    import z3
    from verifier.traced_check import _decide
    ids = z3.Ints("i0 i1")
    w = z3.Reals("w0 w1 w2")
    domain = [v >= 0 for v in ids] + [v < 3 for v in ids]

    def lookup(i):
        return z3.If(i == 0, w[0], z3.If(i == 1, w[1], w[2]))

    def masked(i):  # two shards of a vocabulary of 3: [0, 2) and [2, 3), summed
        return z3.If(i < 2, z3.If(i == 0, w[0], w[1]), 0) + z3.If(i >= 2, w[2], 0)

    equal = [lookup(i) != masked(i) for i in ids]
    assert _decide(equal, domain, 10.0) == ("proven", None)
    status, model = _decide(equal + [lookup(ids[0]) != w[0]], domain, 10.0)
    assert status == "sat" and model.eval(ids[0]).as_long() != 0


def test_a_line_with_very_many_ops_pairs_by_occurrence():
    from verifier.traced_check import paired_positions
    reference = [op(f"r{i}", "aten.add.Tensor" if i % 2 else "aten.mul.Tensor", ["x"], 7) for i in range(600)]
    rank = [op("extra", "aten.mul.Tensor", ["x"], 7)] + \
        [op(f"r{i}", "aten.add.Tensor" if i % 2 else "aten.mul.Tensor", ["x"], 7) for i in range(600)]
    pairs = paired_positions(tuple(reference), tuple(rank))
    assert pairs[0] == 0 and pairs[1] == 2 and pairs[2] == 1  # k-th mul with k-th mul, k-th add with k-th add


def _sharded_lookup(masked: bool) -> TracedProgram:
    """Rows of a table of 8 split over two ranks; ids in [0, 8).  Unmasked, a rank looks up ids
    past its 4 rows, which torch refuses (IndexError) while the single device does not."""
    inputs = (TensorSpec("w", (8, 3), "float32"), TensorSpec("ids", (5,), "int64", bounds=(0, 8)))
    reference = [op("e", "aten.embedding.default", ["w", "ids"], 9)]
    ranks = []
    for r in range(2):
        ops = [op("wl", "aten.slice.Tensor", ["w"], 2, dim=0, start=4 * r, end=4 * r + 4, layout_source="shape")]
        if masked:
            ops += [op("lo", "aten.lt.Scalar", ["ids"], 8, other=4 * r),
                    op("hi", "aten.ge.Scalar", ["ids"], 8, other=4 * r + 4),
                    op("out", "aten.bitwise_or.Tensor", ["lo", "hi"], 8),
                    op("c", "aten.scalar_tensor.default", [], 8, s=4 * r, dtype="int64"),
                    op("shifted", "aten.sub.Tensor", ["ids", "c"], 8, alpha=1),
                    op("z", "aten.scalar_tensor.default", [], 8, s=0, dtype="int64"),
                    op("local", "aten.index_put.default", ["shifted", "out", "z"], 8, accumulate=False,
                       list_lengths={"indices": 1}),
                    op("e0", "aten.embedding.default", ["wl", "local"], 9),
                    op("zf", "aten.scalar_tensor.default", [], 9, s=0.0, dtype="float32"),
                    op("em", "aten.index_put.default", ["e0", "out", "zf"], 9, accumulate=False,
                       list_lengths={"indices": 1}),
                    op("e", "all_reduce", ["em"], 10, group=(0, 1), op="sum")]
        else:
            ops += [op("e0", "aten.embedding.default", ["wl", "ids"], 9),
                    op("e", "all_reduce", ["e0"], 10, group=(0, 1), op="sum")]
        ranks.append(ops)
    return program(inputs, reference, ranks, [Comparison("output 0", "output", "e", ("e", "e"), (whole(5, 3),) * 2)])


def test_a_rank_looking_up_ids_past_its_shard_fails_where_one_device_does_not():
    report = check_traced(_sharded_lookup(masked=False))
    assert report.verdict == VIOLATIONS, messages(report)
    finding = next(d for d in report.diagnostics if d.severity == "error")
    assert "fails where the single-device run does not" in finding.message and finding.line == 9
    assert finding.counterexample is not None and "ids" in finding.counterexample.inputs


def test_a_masked_sharded_lookup_verifies():
    report = check_traced(_sharded_lookup(masked=True))
    assert report.verdict == VERIFIED, messages(report)

