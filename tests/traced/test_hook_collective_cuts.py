"""Cuts around collectives a parallel plan's hooks add (transformers' ``RowwiseParallel`` output hook
and ``ColwiseParallel``'s backward all-reduce): recorded at the module's line, with a view of their
result the rank takes on its own (an autograd Function's output) and, in the backward, the rank's
sum of two reduced input gradients where one device sums the unreduced ones at another line.

The single device's view of the cotangent at the same line must keep its partner (the rank's own
forward view does not take it), and the proof is cut at each reduction's paired reader, so its
terms stay one layer deep (HF Llama, 1 layer: verified in 11 CPU s, was inconclusive after 446 s).
"""
from __future__ import annotations

from verifier.ir import Op, Span, TensorSpec
from verifier.report import VERIFIED, VIOLATIONS
from verifier.traced_check import check_traced, paired_positions
from verifier.traced_ir import Comparison, TracedProgram

B, H, F = 4, 6, 8
INPUTS = (TensorSpec("x", (B, H), "float32"), TensorSpec("w1", (F, H), "float32"), TensorSpec("w3", (F, H), "float32"),
          TensorSpec("w2", (H, F), "float32"), TensorSpec("g", (B, H), "float32"))


def op(results: str, kind: str, args=(), line: int | None = None, **attrs) -> Op:
    return Op(tuple(results.split()), kind, tuple(args), attrs, Span(line, "model.py"))


def _ops(rank: int | None, reduce_output: bool = True) -> list[Op]:
    """SwiGLU-free gated MLP with a residual: out = x + (relu(x w1^T) * (x w3^T)) w2^T, and the
    gradient of x through both column layers and the residual.  ``rank`` None: one device."""
    ops, w1, w3, w2 = [], "w1", "w3", "w2"
    group = (0, 1)
    if rank is not None:
        step = F // 2
        ops += [op("w1s", "aten.slice.Tensor", ["w1"], None, dim=0, start=rank * step, end=rank * step + step),
                op("w3s", "aten.slice.Tensor", ["w3"], None, dim=0, start=rank * step, end=rank * step + step),
                op("w2s", "aten.slice.Tensor", ["w2"], None, dim=1, start=rank * step, end=rank * step + step)]
        w1, w3, w2 = "w1s", "w3s", "w2s"
    ops += [op("w1t", "aten.t.default", [w1], 10), op("h1", "aten.mm.default", ["x", "w1t"], 10),
            op("a", "aten.relu.default", ["h1"], 10),
            op("w3t", "aten.t.default", [w3], 11), op("h3", "aten.mm.default", ["x", "w3t"], 11),
            op("p", "aten.mul.Tensor", ["a", "h3"], 11),
            op("w2t", "aten.t.default", [w2], 12), op("y", "aten.mm.default", ["p", "w2t"], 12)]
    if rank is not None:  # the row-parallel output hook: all-reduce, then the Function's view of it
        ops += [op("yr", "all_reduce" if reduce_output else "aten.clone.default", ["y"], 12,
                   **({"group": group, "op": "sum"} if reduce_output else {})),
                op("yv", "aten.view.default", ["yr"], 12, size=[B, H])]
    ops += [op("out", "aten.add.Tensor", ["yv" if rank is not None else "y", "x"], 13, alpha=1),
            op("o2", "aten.mul.Tensor", ["out", "out"], 14),
            # backward: the cotangent's view at the row-parallel line, then both column layers
            op("gv", "aten.view.default", ["g"], 12, size=[B, H]),
            op("dp", "aten.mm.default", ["gv", w2], 12),
            op("dh3", "aten.mul.Tensor", ["dp", "a"], 11), op("da", "aten.mul.Tensor", ["dp", "h3"], 11),
            op("dx3", "aten.mm.default", ["dh3", w3], 11),
            op("dh1", "aten.threshold_backward.default", ["da", "h1"], 10, threshold=0),
            op("dx1", "aten.mm.default", ["dh1", w1], 10)]
    if rank is None:
        ops += [op("dxs", "aten.add.Tensor", ["dx3", "dx1"], 10, alpha=1)]
    else:  # each column layer's input gradient all-reduced by its hook, the rank sums the results
        ops += [op("r3", "all_reduce", ["dx3"], 30, group=group, op="sum"),
                op("v3", "aten.view.default", ["r3"], 30, size=[B, H]),
                op("r1", "all_reduce", ["dx1"], 30, group=group, op="sum"),
                op("v1", "aten.view.default", ["r1"], 30, size=[B, H]),
                op("dxs", "aten.add.Tensor", ["r3", "r1"], 30, alpha=1)]
    ops += [op("dx", "aten.add.Tensor", ["dxs", "g"], 13, alpha=1),
            op("dx2", "aten.mul.Tensor", ["dx", "x"], 14)]
    return ops


def hooked_mlp(reduce_output: bool = True) -> TracedProgram:
    region = ((0, B), (0, H))
    comparisons = (Comparison("output 0", "output", "o2", ("o2", "o2"), (region, region)),
                   Comparison("gradient of x", "gradient", "dx2", ("dx2", "dx2"), (region, region)))
    return TracedProgram(2, {"tp": 2}, INPUTS, tuple(_ops(None)), (tuple(_ops(0, reduce_output)),
                         tuple(_ops(1, reduce_output))), comparisons, (), ("forward", "backward"), "model.py")


def test_the_ranks_own_view_after_a_hook_all_reduce_leaves_the_backward_view_its_partner():
    program = hooked_mlp()
    reference, rank = program.reference, program.ranks[0]
    pairs = paired_positions(reference, rank)
    by_name = {o.results[0]: i for i, o in enumerate(rank)}
    reference_at = {o.results[0]: i for i, o in enumerate(reference)}
    assert by_name["yv"] not in pairs  # the hook's view has no counterpart on one device
    assert pairs[by_name["gv"]] == reference_at["gv"]  # the cotangent's view keeps its own


def test_a_hooked_row_parallel_mlp_is_verified_with_a_cut_at_each_reduction(monkeypatch):
    import verifier.traced_check as traced_check

    cut: list[str] = []
    fresh = traced_check._Cuts._fresh
    monkeypatch.setattr(traced_check._Cuts, "_fresh", lambda self, name, shape: cut.append(name) or fresh(self, name, shape))
    report = check_traced(hooked_mlp())
    assert report.verdict == VERIFIED
    # the single device's values the reductions stand for: the row-parallel output the hook reduces
    # (its paired reader is the residual add, read through the hook's view) and the sum of the two
    # input gradients (the rank sums them after reducing each, at a line of its own)
    assert "y" in cut and "dxs" in cut


def test_a_hook_that_does_not_reduce_the_row_parallel_output_is_a_violation():
    report = check_traced(hooked_mlp(reduce_output=False))
    assert report.verdict == VIOLATIONS

