"""Explicit torch.distributed idioms: each maps to the IR the design names, at its source line."""
from __future__ import annotations

from frontend_support import complete, explicit, kinds, line_of, only, ops, translate

from verifier.placements import Partial, Replicate

ROW_PARALLEL = explicit("""
N, D = 4, 16

def example_inputs():
    return torch.randn(N, D), torch.randn(D, D)

def forward(x, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    y = x.chunk(world, dim=1)[rank] @ w.chunk(world, dim=0)[rank]
    dist.all_reduce(y)
    return y
""")


def test_chunk_world_indexed_by_rank_is_local_chunk_at_its_line():
    translation = complete(ROW_PARALLEL)
    chunks = ops(translation, "local_chunk")
    assert [(op.args[0], op.attrs["mesh_dim"], op.attrs["dim"]) for op in chunks] == [("x", "tp", 1), ("w", "tp", 0)]
    assert {op.span.line for op in chunks} == {line_of(ROW_PARALLEL, "x.chunk(world")}


def test_all_reduce_is_in_place_and_later_reads_see_its_result():
    translation = complete(ROW_PARALLEL)
    reduce = only(translation, "all_reduce")
    assert reduce.attrs == {"mesh_dim": "tp", "op": "sum"}
    assert translation.program.outputs[0].name == reduce.results[0]
    assert reduce.span.line == line_of(ROW_PARALLEL, "dist.all_reduce(y)")


def test_reduce_op_max_is_the_op_attribute():
    source = ROW_PARALLEL.replace("dist.all_reduce(y)", "dist.all_reduce(y, op=dist.ReduceOp.MAX)")
    assert only(complete(source), "all_reduce").attrs["op"] == "max"


def test_split_by_size_over_world_indexed_by_rank_is_local_chunk():
    source = ROW_PARALLEL.replace("x.chunk(world, dim=1)[rank]", "torch.split(x, D // world, dim=1)[rank]")
    assert [op.args[0] for op in ops(complete(source), "local_chunk")] == ["x", "w"]


def test_narrow_at_rank_block_is_local_chunk():
    source = ROW_PARALLEL.replace("x.chunk(world, dim=1)[rank]", "x.narrow(1, rank * (D // world), D // world)")
    assert ops(complete(source), "local_chunk")[0].attrs == {"mesh_dim": "tp", "dim": 1}


def test_slice_of_rank_block_is_local_chunk():
    source = ROW_PARALLEL.replace("x.chunk(world, dim=1)[rank]", "x[:, rank * (D // world):(rank + 1) * (D // world)]")
    assert ops(complete(source), "local_chunk")[0].attrs == {"mesh_dim": "tp", "dim": 1}


def test_static_slice_is_a_slice_op_with_its_bounds():
    source = ROW_PARALLEL.replace("x.chunk(world, dim=1)[rank] @", "x[:, 2:10].sum(dim=1, keepdim=True) * 0 + x @")
    op = ops(complete(source), "slice")[0]
    assert op.attrs == {"dim": 1, "start": 2, "end": 10}


def test_helper_functions_are_inlined_with_their_own_lines():
    source = explicit("""
    N, D = 4, 16

    def example_inputs():
        return torch.randn(N, D), torch.randn(D, D)

    def row_parallel(x_local, w_local):
        y = x_local @ w_local
        dist.all_reduce(y)
        return y

    def forward(x, w):
        rank, world = dist.get_rank(), dist.get_world_size()
        return row_parallel(x.chunk(world, dim=1)[rank], w.chunk(world, dim=0)[rank])
    """)
    translation = complete(source)
    assert only(translation, "matmul").span.line == line_of(source, "y = x_local @ w_local")
    assert only(translation, "all_reduce").span.line == line_of(source, "dist.all_reduce(y)")


def test_all_gather_into_a_list_then_cat_is_all_gather_along_the_cat_dim():
    source = explicit("""
    T, H, O = 8, 16, 32

    def example_inputs():
        return torch.randn(T, H), torch.randn(H, O)

    def forward(x, w):
        rank, world = dist.get_rank(), dist.get_world_size()
        y = x @ w.chunk(world, dim=1)[rank]
        parts = [torch.empty_like(y) for _ in range(world)]
        dist.all_gather(parts, y)
        return torch.cat(parts, dim=1)
    """)
    translation = complete(source)
    gather = only(translation, "all_gather")
    assert gather.attrs == {"mesh_dim": "tp", "dim": 1}
    assert gather.span.line == line_of(source, "dist.all_gather(parts, y)")
    assert "zeros" not in kinds(translation) and "cat" not in kinds(translation)


def test_all_gather_into_tensor_stacks_along_dim_zero():
    source = explicit("""
    T, H = 8, 16

    def example_inputs():
        return (torch.randn(T, H),)

    def forward(x):
        rank, world = dist.get_rank(), dist.get_world_size()
        out = torch.empty(T, H)
        dist.all_gather_into_tensor(out, x.chunk(world, dim=0)[rank])
        return out
    """)
    assert only(complete(source), "all_gather").attrs == {"mesh_dim": "tp", "dim": 0}


def test_cat_of_gathered_buffer_chunks_fixes_the_gather_dim():
    source = explicit("""
    T, H, O = 8, 16, 32

    def example_inputs():
        return torch.randn(T, H), torch.randn(H, O)

    def forward(x, w):
        rank, world = dist.get_rank(), dist.get_world_size()
        y = x @ w.chunk(world, dim=1)[rank]
        gathered = torch.empty(world * T, O // world)
        dist.all_gather_into_tensor(gathered, y)
        return torch.cat(gathered.chunk(world, dim=0), dim=1)
    """)
    assert only(complete(source), "all_gather").attrs["dim"] == 1


def test_reduce_scatter_tensor_scatters_dim_zero_with_its_op():
    source = explicit("""
    S, H = 8, 16

    def example_inputs():
        return torch.randn(S, H), torch.randn(H, H)

    def forward(x, w):
        rank, world = dist.get_rank(), dist.get_world_size()
        partial = x.chunk(world, dim=1)[rank] @ w.chunk(world, dim=0)[rank]
        out = torch.empty(S // world, H)
        dist.reduce_scatter_tensor(out, partial, op=dist.ReduceOp.MAX)
        return out
    """)
    op = only(complete(source), "reduce_scatter")
    assert op.attrs == {"mesh_dim": "tp", "dim": 0, "op": "max"}


def test_reduce_scatter_of_the_world_pieces_scatters_their_dim():
    source = explicit("""
    S, H = 8, 16

    def example_inputs():
        return (torch.randn(S, H),)

    def forward(x):
        rank, world = dist.get_rank(), dist.get_world_size()
        out = torch.empty(S, H // world)
        dist.reduce_scatter(out, list(x.chunk(world, dim=1)))
        return out
    """)
    assert only(complete(source), "reduce_scatter").attrs == {"mesh_dim": "tp", "dim": 1, "op": "sum"}


def test_all_to_all_single_splits_and_concatenates_dim_zero():
    source = explicit("""
    S, H = 8, 16

    def example_inputs():
        return (torch.randn(S, H),)

    def forward(x):
        out = torch.empty(S, H)
        dist.all_to_all_single(out, x)
        return out
    """)
    assert only(complete(source), "all_to_all").attrs == {"mesh_dim": "tp", "split_dim": 0, "concat_dim": 0}


def test_broadcast_and_reduce_name_their_root_coordinate():
    source = explicit("""
    def example_inputs():
        return (torch.randn(4, 4),)

    def forward(x):
        dist.broadcast(x, src=1)
        dist.reduce(x, dst=0, op=dist.ReduceOp.SUM)
        return x
    """)
    translation = complete(source)
    assert only(translation, "broadcast").attrs == {"mesh_dim": "tp", "src": 1}
    assert only(translation, "reduce").attrs == {"mesh_dim": "tp", "dst": 0, "op": "sum"}


def test_async_collective_gets_a_handle_and_wait_at_work_wait():
    source = explicit("""
    N, D = 8, 16

    def example_inputs():
        return torch.randn(N, D), torch.randn(N, D)

    def forward(x, other):
        work = dist.all_reduce(x, async_op=True)
        side = torch.tanh(other)
        work.wait()
        return x + side
    """)
    translation = complete(source)
    assert kinds(translation) == ["all_reduce", "tanh", "wait", "add"]
    assert only(translation, "all_reduce").attrs["handle"] == "work"
    wait = only(translation, "wait")
    assert wait.attrs == {"handle": "work"} and wait.span.line == line_of(source, "work.wait()")


def test_send_and_recv_peers_are_written_over_the_mesh_coordinate():
    source = explicit("""
    def example_inputs():
        return (torch.randn(4, 4),)

    def forward(x):
        rank, world = dist.get_rank(), dist.get_world_size()
        buf = torch.empty(4, 4)
        req = dist.isend(x, dst=(rank + 1) % world)
        dist.recv(buf, src=(rank - 1) % world)
        req.wait()
        return x + buf
    """)
    translation = complete(source)
    send, recv = only(translation, "isend"), only(translation, "recv")
    assert send.attrs == {"peer": "(tp + 1) % tp_size", "mesh_dim": "tp", "handle": "req"}
    assert recv.attrs == {"peer": "(tp + tp_size - 1) % tp_size", "mesh_dim": "tp", "shape": [4, 4], "dtype": "f32"}


def test_batch_isend_irecv_posts_every_op_with_a_handle():
    source = explicit("""
    def example_inputs():
        return (torch.randn(4, 4),)

    def forward(x):
        rank, world = dist.get_rank(), dist.get_world_size()
        buf = torch.empty(4, 4)
        reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, x, (rank + 1) % world),
                                       dist.P2POp(dist.irecv, buf, (rank - 1) % world)])
        for req in reqs:
            req.wait()
        return buf
    """)
    translation = complete(source)
    assert kinds(translation) == ["isend", "irecv", "wait", "wait"]
    handles = [op.attrs["handle"] for op in ops(translation)[:2]]
    assert [op.attrs["handle"] for op in ops(translation, "wait")] == handles


def test_branch_on_rank_puts_when_conditions_on_both_branches():
    source = explicit("""
    def example_inputs():
        return torch.randn(4, 4), torch.randn(4, 4)

    def forward(a, b):
        rank = dist.get_rank()
        if rank == 0:
            dist.all_reduce(a)
        else:
            dist.all_reduce(b)
        return a, b
    """)
    translation = complete(source)
    assert [op.attrs["when"] for op in ops(translation, "all_reduce")] == ["tp == 0", "tp != 0"]


def test_value_rebound_in_both_rank_branches_is_selected_by_the_rank():
    source = explicit("""
    def example_inputs():
        return (torch.randn(4, 4),)

    def forward(x):
        if dist.get_rank() == 0:
            y = x * 2
        else:
            y = x * 3
        return y
    """)
    translation = complete(source)
    assert translation.program.outputs[0].name == only(translation, "where").results[0]


def test_empty_buffers_are_not_ops():
    translation = complete(explicit("""
    S, H = 8, 16

    def example_inputs():
        return (torch.randn(S, H),)

    def forward(x):
        out = torch.empty(S, H)
        dist.all_to_all_single(out, x)
        return out
    """))
    assert kinds(translation) == ["all_to_all"]


def test_division_by_world_size_reads_the_mesh_size():
    source = ROW_PARALLEL.replace("    return y\n", "    return y / world\n")
    translation = complete(source)
    size = only(translation, "world_size")
    assert size.attrs == {"mesh_dim": "tp"}
    assert only(translation, "div").args[1] == size.results[0]


def test_view_with_a_world_dependent_size_writes_minus_one():
    source = ROW_PARALLEL.replace("    return y\n", "    return y.view(N, 2, D // 2)\n").replace(
        "x.chunk(world, dim=1)[rank] @ w.chunk(world, dim=0)[rank]", "x @ w.chunk(world, dim=1)[rank]")
    source = source.replace("y.view(N, 2, D // 2)", "y.view(N, 2, D // world // 2)")
    assert only(complete(source), "reshape").attrs["shape"] == ["N", 2, -1]


def test_view_with_two_world_dependent_sizes_writes_mesh_sizes():
    source = ROW_PARALLEL.replace("    return y\n", "    return y.view(N, 2 // world * 2, D // world // 2 * world)\n")
    source = source.replace("x.chunk(world, dim=1)[rank] @ w.chunk(world, dim=0)[rank]", "x @ w")
    source = source.replace("y.view(N, 2 // world * 2, D // world // 2 * world)", "y.view(N // world, world, D)")
    assert only(complete(source), "reshape").attrs["shape"] == ["N/tp_size", "tp_size", "D"]


def test_mesh_of_two_dims_chunks_over_both_for_the_global_rank():
    translation = complete(ROW_PARALLEL, mesh="dp=2,tp=2")
    chunks = ops(translation, "local_chunk")
    assert [(op.args[0], op.attrs["mesh_dim"]) for op in chunks][:2] == [("x", "dp"), (chunks[0].results[0], "tp")]
    assert [op.attrs["mesh_dim"] for op in ops(translation, "all_reduce")] == ["dp", "tp"]


def test_custom_autograd_function_becomes_a_call_of_forward_and_backward_defs():
    source = explicit("""
    N, D = 4, 16

    class CopyToTP(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, grad):
            grad = grad.clone()
            dist.all_reduce(grad)
            return grad

    def example_inputs():
        return torch.randn(N, D), torch.randn(D, D)

    def forward(x, w):
        rank, world = dist.get_rank(), dist.get_world_size()
        y = CopyToTP.apply(x) @ w.chunk(world, dim=1)[rank]
        parts = [torch.empty_like(y) for _ in range(world)]
        dist.all_gather(parts, y)
        return torch.cat(parts, dim=1)
    """)
    translation = complete(source)
    call = only(translation, "call")
    program = translation.program
    backward = program.functions[call.attrs["backward"]]
    assert [op.kind for op in backward.ops] == ["identity", "all_reduce"]
    assert backward.ops[1].span.line == line_of(source, "dist.all_reduce(grad)")
    assert program.functions[call.attrs["forward"]].ops == ()
    assert [b.function for b in translation.backward_bodies] == ["CopyToTP"]
    assert {g.input: g.placements for g in program.gradients} == {"x": (), "w": (Partial("sum"),)}


def test_outputs_are_replicated_by_default():
    assert complete(ROW_PARALLEL).program.outputs[0].placements == (Replicate(),)


def test_loop_over_the_world_size_is_unsupported_with_its_line():
    source = explicit("""
    def example_inputs():
        return (torch.randn(4, 4),)

    def forward(x):
        world = dist.get_world_size()
        for step in range(world - 1):
            x = x * 2
        return x
    """)
    translation = translate(source)
    assert translation.program is None
    assert [u.line for u in translation.unsupported] == [line_of(source, "for step in range(world - 1)")]


def test_custom_function_whose_backward_reads_a_saved_intermediate_falls_back_to_derived_gradients():
    source = explicit("""
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x * x
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            return grad * y

    def example_inputs():
        return (torch.randn(4, 4),)

    def forward(x):
        return Square.apply(x)
    """)
    translation = complete(source)
    assert "backward" not in only(translation, "call").attrs
    assert any("backward of Square is not translated" in note for note in translation.notes)


def test_size_condition_becomes_a_requirement_on_the_dims():
    source = explicit("""
    S, H = 8, 16

    def example_inputs():
        return (torch.randn(S, H),)

    def forward(x):
        if x.shape[0] % dist.get_world_size() != 0:
            raise ValueError("sequence not divisible")
        return x * 2
    """)
    assert complete(source).program.requires == ("S % 2 == 0",)


def test_parameters_initialised_randomly_are_inputs_sharded_by_their_world_sized_dim():
    source = explicit("""
    H, F = 16, 64

    class TPMLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            world = dist.get_world_size()
            self.up = torch.nn.Parameter(torch.randn(H, F // world))

        def forward(self, x):
            return x @ self.up

    def example_inputs():
        return (torch.randn(8, H),)
    """)
    spec = complete(source).program.inputs[1]
    assert (spec.name, spec.shape, str(spec.placements[0])) == ("up", ("H", "F"), "S(1)")


def test_random_values_read_inside_the_program_are_unsupported():
    source = explicit("""
    def example_inputs():
        return (torch.randn(4, 4),)

    def forward(x):
        return x + torch.randn(4, 4)
    """)
    translation = translate(source)
    assert translation.program is None and "random" in translation.unsupported[0].reason


def test_scatter_and_gather_name_their_root_and_dim():
    source = explicit("""
    S, H = 8, 16

    def example_inputs():
        return (torch.randn(S, H),)

    def forward(x):
        rank, world = dist.get_rank(), dist.get_world_size()
        mine = torch.empty(S // world, H)
        dist.scatter(mine, list(x.chunk(world, dim=0)) if rank == 0 else None, src=0)
        parts = [torch.empty_like(mine) for _ in range(world)] if rank == 0 else None  # torch: dst only
        dist.gather(mine * 2, parts, dst=0)
        return torch.cat(parts, dim=0) if rank == 0 else torch.zeros(S, H)
    """)
    translation = complete(source)
    assert only(translation, "scatter").attrs == {"mesh_dim": "tp", "src": 0, "dim": 0}
    assert only(translation, "gather").attrs == {"mesh_dim": "tp", "dst": 0, "dim": 0}
