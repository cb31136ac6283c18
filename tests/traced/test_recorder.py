"""The tracing frontend's recordings: op kinds, lines, groups, handles, layouts, comparisons.

Each test writes a small program, runs it in this process the way the child process does
(world 1 on gloo, then every rank on the fake group) and asserts what was recorded.
"""
from __future__ import annotations

import concurrent.futures
import multiprocessing
import textwrap

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

from frontends.traced.child import trace  # noqa: E402
from frontends.traced.to_ir import TraceFailure  # noqa: E402
from verifier.traced_ir import TracedProgram  # noqa: E402

HEADER = "import torch\nimport torch.distributed as dist\nimport torch.nn.functional as F\n"


_WORKER: list[concurrent.futures.ProcessPoolExecutor] = []


@pytest.fixture(scope="module", autouse=True)
def _stop_worker():
    yield
    while _WORKER:
        _WORKER.pop().shutdown()


def record(tmp_path, body: str, world: int = 2, entry: str | None = None, shapes=None, layouts=None):
    """Trace in a fresh process, as the CLI does: process-group state left behind by other tests in this
    pytest process must not leak into the recording (one spawned worker serves the whole module)."""
    path = tmp_path / "model.py"
    path.write_text(HEADER + textwrap.dedent(body))
    if not _WORKER:
        _WORKER.append(concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")))
    return _WORKER[0].submit(trace, {"path": str(path), "shown_as": "model.py", "entry": entry,
                                     "shapes": shapes or {}, "layouts": layouts or {}, "world": world}).result()


def line_of(tmp_path, fragment: str) -> int:
    for number, text in enumerate((tmp_path / "model.py").read_text().splitlines(), start=1):
        if fragment in text:
            return number
    raise AssertionError(fragment)


def kinds(ops) -> list[str]:
    return [op.kind for op in ops]


TP_MLP = """
def example_inputs():
    return torch.randn(4, 6), torch.randn(6, 8), torch.randn(8, 6)

def forward(x, w_up, w_down):
    rank, world = dist.get_rank(), dist.get_world_size()
    h = F.gelu(x @ w_up.chunk(world, dim=1)[rank])
    y = h @ w_down.chunk(world, dim=0)[rank]
    dist.all_reduce(y)
    return y
"""


def test_aten_ops_are_recorded_with_the_users_lines(tmp_path):
    program = record(tmp_path, TP_MLP)
    assert isinstance(program, TracedProgram)
    mm = [op for op in program.reference if op.kind == "aten.mm.default"]
    assert mm[0].span.line == line_of(tmp_path, "h = F.gelu") and mm[0].span.file == "model.py"
    assert "aten.gelu.default" in kinds(program.reference)
    assert [spec.name for spec in program.inputs][:3] == ["x", "w_up", "w_down"]


def test_in_place_all_reduce_is_a_collective_over_the_group_with_its_line(tmp_path):
    program = record(tmp_path, TP_MLP)
    for rank_ops in program.ranks:
        (reduce,) = [op for op in rank_ops if op.kind == "all_reduce"]
        assert reduce.attrs["group"] == (0, 1) and reduce.attrs["op"] == "sum"
        assert reduce.span.line == line_of(tmp_path, "dist.all_reduce(y)")
    (output,) = [c for c in program.comparisons if c.kind == "output"]
    assert output.regions[1] == ((0, 4), (0, 6))


def test_reduce_op_is_taken_from_the_python_call(tmp_path):
    program = record(tmp_path, TP_MLP.replace("dist.all_reduce(y)", "dist.all_reduce(y, op=dist.ReduceOp.MAX)"))
    (reduce,) = [op for op in program.ranks[0] if op.kind == "all_reduce"]
    assert reduce.attrs["op"] == "max"


def test_backward_is_recorded_and_a_trainable_input_gradient_is_compared(tmp_path):
    body = TP_MLP.replace("torch.randn(4, 6), ", "torch.randn(4, 6, requires_grad=True), ")
    program = record(tmp_path, body)
    assert program.passes == ("forward", "backward")
    labels = [c.label for c in program.comparisons]
    assert "gradient of x" in labels
    backward_mm = [op for op in program.ranks[0] if op.kind == "aten.mm.default"][2:]
    assert {op.span.line for op in backward_mm} <= {line_of(tmp_path, "h = F.gelu"), line_of(tmp_path, "y = h @")}


def test_every_floating_input_is_differentiable_by_default(tmp_path):
    program = record(tmp_path, TP_MLP)
    assert [c.label for c in program.comparisons] == ["output 0", "gradient of x", "gradient of w_up",
                                                      "gradient of w_down"]
    assert any("inputs x, w_up, w_down are differentiable" in a for a in program.assumptions)


def test_an_input_the_file_creates_with_requires_grad_false_is_not_differentiated(tmp_path):
    program = record(tmp_path, TP_MLP.replace("torch.randn(4, 6)", "torch.randn(4, 6, requires_grad=False)"))
    assert [c.label for c in program.comparisons] == ["output 0", "gradient of w_up", "gradient of w_down"]


def test_a_weight_each_rank_slices_has_its_gradient_compared_block_by_block(tmp_path):
    program = record(tmp_path, TP_MLP)
    (up,) = [c for c in program.comparisons if c.label == "gradient of w_up"]
    assert up.regions == (((0, 6), (0, 4)), ((0, 6), (4, 8)))
    (x,) = [c for c in program.comparisons if c.label == "gradient of x"]
    assert x.regions == (((0, 4), (0, 6)), ((0, 4), (0, 6)))   # read whole: every rank's whole gradient


def test_the_reference_takes_the_world_size_one_path(tmp_path):
    program = record(tmp_path, """
    def example_inputs():
        return torch.randn(4, 6), torch.randn(6, 6), torch.randn(6)

    def forward(x, w, b):
        if dist.get_world_size() == 1:
            return x @ w
        rank, world = dist.get_rank(), dist.get_world_size()
        y = x.chunk(world, dim=1)[rank] @ w.chunk(world, dim=0)[rank]
        dist.all_reduce(y)
        return y + b
    """)
    assert "aten.add.Tensor" not in kinds(program.reference)
    assert all("aten.add.Tensor" in kinds(ops) for ops in program.ranks)


def test_async_collective_gets_a_handle_and_its_wait(tmp_path):
    program = record(tmp_path, """
    def example_inputs():
        return (torch.randn(4, 6),)

    def forward(x):
        y = x * 2
        work = dist.all_reduce(y, async_op=True)
        z = torch.tanh(x)
        work.wait()
        return y + z
    """)
    ops = [op for op in program.ranks[0] if op.kind in ("all_reduce", "wait", "aten.tanh.default")]
    assert kinds(ops) == ["all_reduce", "aten.tanh.default", "wait"]
    assert ops[0].attrs["handle"] == ops[2].attrs["handle"]
    assert ops[2].span.line == line_of(tmp_path, "work.wait()")


def test_list_all_gather_becomes_the_concatenating_form_and_pieces(tmp_path):
    program = record(tmp_path, """
    def example_inputs():
        return (torch.randn(4, 6),)

    def forward(x):
        rank, world = dist.get_rank(), dist.get_world_size()
        piece = x.chunk(world, dim=0)[rank].contiguous()
        pieces = [torch.empty_like(piece) for _ in range(world)]
        dist.all_gather(pieces, piece)
        return torch.cat(pieces, dim=0)
    """)
    ops = program.ranks[1]
    gather = next(op for op in ops if op.kind == "all_gather")
    slices = [op for op in ops if op.kind == "aten.slice.Tensor" and op.args == gather.results]
    assert gather.attrs["dim"] == 0 and gather.attrs["group"] == (0, 1)
    assert [(op.attrs["start"], op.attrs["end"]) for op in slices] == [(0, 2), (2, 4)]
    cat = next(op for op in ops if op.kind == "aten.cat.default")
    assert list(cat.args) == [op.results[0] for op in slices]


def test_a_write_into_a_slice_updates_the_base(tmp_path):
    program = record(tmp_path, """
    def example_inputs():
        return (torch.randn(4, 6),)

    def forward(x):
        out = torch.zeros(4, 6)
        out[0:2] = x[0:2] * 3
        return out
    """)
    ops = program.reference
    copy = next(op for op in ops if op.kind == "aten.copy_.default")
    scatter = next(op for op in ops if op.kind == "aten.slice_scatter.default")
    assert scatter.args[1] == copy.results[0]
    (output,) = [c for c in program.comparisons if c.kind == "output"]
    assert output.reference == scatter.results[0]


def test_custom_function_backward_gets_the_lines_of_the_users_backward(tmp_path):
    program = record(tmp_path, """
    class Copy(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, grad):
            grad = grad.clone()
            dist.all_reduce(grad)
            return grad

    def example_inputs():
        return torch.randn(4, 6), torch.randn(6, 8)

    def forward(x, w):
        return Copy.apply(x) @ w
    """)
    (reduce,) = [op for op in program.ranks[0] if op.kind == "all_reduce"]
    assert reduce.span.line == line_of(tmp_path, "dist.all_reduce(grad)")
    assert "gradient of x" in [c.label for c in program.comparisons]
    assert any("inputs x, w are differentiable" in a for a in program.assumptions)


def test_dtensor_parameters_take_their_layout_from_placements(tmp_path):
    program = record(tmp_path, """
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.up = torch.nn.Linear(6, 8)
            self.down = torch.nn.Linear(8, 6)

        def forward(self, x):
            return self.down(F.gelu(self.up(x)))

    def example_inputs():
        return (torch.randn(4, 6),)

    def build(mesh):
        return parallelize_module(MLP(), mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})
    """)
    assert isinstance(program, TracedProgram), program
    pieces = {op.results[0]: op for op in program.ranks[1] if "layout_source" in op.attrs}
    up = pieces["up.weight@local"]
    assert up.kind == "aten.slice.Tensor" and up.attrs["layout_source"] == "dtensor"
    assert (up.attrs["dim"], up.attrs["start"], up.attrs["end"]) == (0, 4, 8)
    assert pieces["down.bias@local"].kind == "aten.alias.default"
    assert "gradient of up.weight" in [c.label for c in program.comparisons]
    assert any(op.kind == "all_reduce" for op in program.ranks[0])


MODULE = """
class Half(torch.nn.Module):
    def __init__(self, hidden=6, ffn=8):
        super().__init__()
        world = dist.get_world_size()
        self.weight = torch.nn.Parameter(torch.randn(ffn // world, hidden))

    def forward(self, x):
        y = F.linear(x, self.weight)
        pieces = [torch.empty_like(y) for _ in range(dist.get_world_size())]
        dist.all_gather(pieces, y.t().contiguous())
        return torch.cat(pieces, dim=0).t()

def example_inputs():
    return (torch.randn(4, 6),)
"""


def test_a_parameter_every_rank_draws_alike_takes_the_shape_layout_unconfirmed(tmp_path):
    # each rank draws randn(ffn // world, hidden) from the same seed: the values show no layout
    program = record(tmp_path, MODULE.replace("torch.empty_like(y)", "torch.empty_like(y.t())"))
    assert isinstance(program, TracedProgram), program
    piece = next(op for op in program.ranks[1] if op.results == ("weight@local",))
    assert (piece.attrs["dim"], piece.attrs["start"], piece.attrs["end"]) == (0, 4, 8)
    assert piece.attrs["layout_source"] == "shape"
    assert len(program.unconfirmed) == 1 and program.unconfirmed[0].startswith("parameter weight: rank r holds "
                                                                                "chunk r of 2 contiguous chunks")
    assert "NOT confirmed: every rank built the same numbers" in program.unconfirmed[0]


def test_module_parameters_take_the_piece_their_values_show(tmp_path):
    sliced = MODULE.replace("torch.empty_like(y)", "torch.empty_like(y.t())").replace(
        "torch.nn.Parameter(torch.randn(ffn // world, hidden))",
        "torch.nn.Parameter(torch.randn(ffn, hidden)[dist.get_rank()::world].clone())")
    program = record(tmp_path, sliced)
    assert isinstance(program, TracedProgram), program
    piece = next(op for op in program.ranks[1] if op.results == ("weight@local",))
    assert (piece.attrs["dim"], piece.attrs["start"], piece.attrs["end"], piece.attrs["step"]) == (0, 1, 8, 2)
    assert piece.attrs["layout_source"] == "values" and not program.unconfirmed
    assert any(a.startswith("parameter weight: rank r holds positions r, r + 2") and "as its values show" in a
               for a in program.assumptions), program.assumptions


def test_user_layout_that_contradicts_the_shapes_is_unsupported(tmp_path):
    result = record(tmp_path, MODULE.replace("torch.empty_like(y)", "torch.empty_like(y.t())"),
                    layouts={"weight": "Shard(1)"})
    assert isinstance(result, TraceFailure) and result.kind == "unsupported"
    assert "weight" in result.message


def test_entry_class_with_literal_arguments(tmp_path):
    program = record(tmp_path, MODULE.replace("torch.empty_like(y)", "torch.empty_like(y.t())"),
                     entry="Half(hidden=6, ffn=12)")
    weight = next(spec for spec in program.inputs if spec.name == "weight")
    assert tuple(weight.shape) == (12, 6)


def test_an_exception_in_the_users_code_is_an_input_error_naming_the_line(tmp_path):
    result = record(tmp_path, """
    def example_inputs():
        return (torch.randn(4, 6),)

    def forward(x):
        return x @ torch.randn(5, 3)
    """)
    assert isinstance(result, TraceFailure) and result.kind == "input-error"
    assert result.line == line_of(tmp_path, "return x @") and "RuntimeError" in result.message


def test_scatter_with_a_list_on_a_non_source_rank_raises_as_torch_does(tmp_path):
    result = record(tmp_path, """
    def example_inputs():
        return (torch.randn(4, 6),)

    def forward(x):
        out = torch.empty(4 // dist.get_world_size(), 6)
        dist.scatter(out, list(x.chunk(dist.get_world_size())), src=0)
        return out
    """)
    assert isinstance(result, TraceFailure) and result.kind == "violation"   # gloo raises the same ValueError
    assert "ValueError" in result.message and result.line == line_of(tmp_path, "dist.scatter")


def test_branching_on_a_simulated_collective_value_is_unsupported(tmp_path):
    result = record(tmp_path, """
    def example_inputs():
        return (torch.randn(4, 6),)

    def forward(x):
        total = x.sum()
        dist.all_reduce(total)
        if total.item() > 0:
            return x * 2
        return x
    """)
    assert isinstance(result, TraceFailure) and result.kind == "unsupported"
    assert result.line == line_of(tmp_path, "if total.item()")


def test_branching_on_input_values_is_an_assumption(tmp_path):
    program = record(tmp_path, """
    def example_inputs():
        return (torch.randn(4, 6),)

    def forward(x):
        if x.sum() > -1e9:
            return x * 2
        return x
    """)
    assert isinstance(program, TracedProgram)
    assert any("path taken for the recorded inputs" in a for a in program.assumptions)


def test_point_to_point_ops_carry_global_peer_and_tag(tmp_path):
    program = record(tmp_path, """
    def example_inputs():
        return (torch.randn(4, 6),)

    def forward(x):
        rank, world = dist.get_rank(), dist.get_world_size()
        buffer = torch.empty_like(x)
        if world > 1 and rank == 0:
            dist.send(x, dst=1, tag=7)
        elif world > 1:
            dist.recv(buffer, src=0, tag=7)
        return x
    """)
    send = next(op for op in program.ranks[0] if op.kind == "isend")
    recv = next(op for op in program.ranks[1] if op.kind == "irecv")
    assert (send.attrs["peer"], send.attrs["tag"], recv.attrs["peer"], recv.attrs["tag"]) == (1, 7, 0, 7)
    assert recv.attrs["shape"] == [4, 6]
    assert any(op.kind == "wait" and op.attrs["handle"] == send.attrs["handle"] for op in program.ranks[0])


def test_random_draws_are_leaves_matched_by_line(tmp_path):
    program = record(tmp_path, """
    def example_inputs():
        return (torch.randn(4, 6),)

    def forward(x):
        noise = torch.randn(4, 6)
        return x + noise
    """)
    name = f"random_L{line_of(tmp_path, 'noise = torch.randn')}_0"
    assert name in [spec.name for spec in program.inputs]
    assert all(any(name in op.args for op in ops) for ops in program.ranks)


def test_four_ranks_record_four_op_lists_with_the_whole_group(tmp_path):
    program = record(tmp_path, TP_MLP.replace("torch.randn(6, 8), torch.randn(8, 6)",
                                              "torch.randn(6, 8), torch.randn(8, 6)"), world=4)
    assert program.world == 4 and len(program.ranks) == 4
    assert all(next(op for op in ops if op.kind == "all_reduce").attrs["group"] == (0, 1, 2, 3)
               for ops in program.ranks)


def test_a_stale_piece_of_a_split_is_re_derived_as_that_piece(tmp_path):
    """A base changed in place after a split: reading the second piece again re-derives it, and the
    replay must take the second piece (an engine cache shared between identical split ops once
    handed back the first)."""
    import numpy as np

    from verifier.backends import NumpyBackend
    from verifier.traced_check import _run_all

    program = record(tmp_path, """
    def example_inputs():
        return (torch.randn(4, 3),)

    def forward(x):
        buffer = x.detach().clone()
        first, second = buffer.split(2)
        buffer.mul_(2)
        return second + first.sum()
    """, world=1)
    x = np.arange(12.0).reshape(4, 3)
    runs = _run_all(program, {"x": x}, NumpyBackend())
    (output,) = [c for c in program.comparisons if c.kind == "output"]
    assert np.allclose(runs.reference[output.reference], x[2:] * 2 + (x[:2] * 2).sum())
