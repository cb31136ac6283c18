"""DTensor plans and methods."""
from __future__ import annotations

from frontend_support import complete, input_spec, kinds, line_of, only, ops, translate

from verifier.placements import Partial, Replicate, Shard

HEADER = """\
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel,
                                               SequenceParallel, loss_parallel, parallelize_module)

TOKENS, DIM, HIDDEN, VOCAB = 8, 16, 32, 64


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(DIM)
        self.up = nn.Linear(DIM, HIDDEN)
        self.down = nn.Linear(HIDDEN, DIM)

    def forward(self, x):
        return self.down(F.gelu(self.up(self.norm(x))))


def example_inputs():
    return (torch.randn(TOKENS, DIM),)
"""


def build(plan: str, run: str = "return model(x)") -> str:
    return HEADER + f"""

def build(mesh):
    model = parallelize_module(MLP(), mesh, {plan})

    def run(x):
        {run}

    return run
"""


MEGATRON_PLAN = '{"up": ColwiseParallel(), "down": RowwiseParallel()}'


def test_colwise_linear_shards_weight_and_bias_on_dim_zero():
    translation = complete(build(MEGATRON_PLAN))
    assert input_spec(translation, "up.weight").placements == (Shard(0),)
    assert input_spec(translation, "up.bias").placements == (Shard(0),)
    assert input_spec(translation, "up.weight").shape == ("HIDDEN", "DIM")


def test_rowwise_linear_all_reduces_then_adds_the_replicated_bias():
    source = build(MEGATRON_PLAN)
    translation = complete(source)
    assert input_spec(translation, "down.weight").placements == (Shard(1),)
    assert input_spec(translation, "down.bias").placements == (Replicate(),)
    assert kinds(translation) == ["layer_norm", "linear", "gelu", "linear", "all_reduce", "add"]
    assert only(translation, "all_reduce").span.line == line_of(source, "return self.down(")


def test_colwise_input_sharded_on_the_sequence_is_all_gathered_first():
    plan = '{"up": ColwiseParallel(input_layouts=Shard(0)), "down": RowwiseParallel(output_layouts=Shard(0))}'
    translation = complete(build(plan, "return model(x.chunk(mesh.size(), dim=0)[mesh.get_local_rank()])"))
    assert kinds(translation) == ["local_chunk", "layer_norm", "all_gather", "linear", "gelu", "linear",
                                  "reduce_scatter", "add"]
    assert only(translation, "all_gather").attrs == {"mesh_dim": "tp", "dim": 0}
    assert only(translation, "reduce_scatter").attrs == {"mesh_dim": "tp", "dim": 0, "op": "sum"}


def test_sequence_parallel_norm_runs_on_the_shard_with_replicated_parameters():
    plan = ('{"norm": SequenceParallel(sequence_dim=0), "up": ColwiseParallel(input_layouts=Shard(0)), '
            '"down": RowwiseParallel(output_layouts=Shard(0), use_local_output=False)}')
    translation = complete(build(plan, "return model(x.chunk(mesh.size(), dim=0)[mesh.get_local_rank()])"
                                       ".full_tensor()"))
    norm = only(translation, "layer_norm")
    assert norm.args[0] == ops(translation, "local_chunk")[0].results[0]
    assert input_spec(translation, "norm.weight").placements == (Replicate(),)
    assert ops(translation)[-1].kind == "all_gather"


def test_dtensor_output_keeps_its_placement_when_returned():
    plan = '{"up": ColwiseParallel(), "down": RowwiseParallel(output_layouts=Shard(0), use_local_output=False)}'
    translation = complete(build(plan))
    assert translation.program.outputs[0].placements == (Shard(0),)


def test_prepare_module_input_redistributes_to_the_desired_layout():
    plan = ('{"": PrepareModuleInput(input_layouts=(Shard(0),), desired_input_layouts=(Replicate(),), '
            'use_local_output=True), '
            '"up": ColwiseParallel(), "down": RowwiseParallel()}')
    translation = complete(build(plan, "return model(x.chunk(mesh.size(), dim=0)[mesh.get_local_rank()])"))
    assert kinds(translation)[:2] == ["local_chunk", "all_gather"]


def test_local_output_treated_as_global_is_translated_as_the_local_computation():
    source = HEADER + """

class Mixer(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(DIM, HIDDEN)

    def forward(self, x):
        return torch.softmax(self.up(x), dim=-1)


def build(mesh):
    return parallelize_module(Mixer(), mesh, {"up": ColwiseParallel(output_layouts=Shard(-1))})
"""
    translation = complete(source)
    assert kinds(translation) == ["linear", "softmax"]


def test_softmax_of_a_sharded_dtensor_gathers_the_dim_first():
    source = HEADER + """

class Mixer(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(DIM, HIDDEN)

    def forward(self, x):
        return torch.softmax(self.up(x), dim=-1).full_tensor()


def build(mesh):
    return parallelize_module(Mixer(), mesh, {"up": ColwiseParallel(use_local_output=False)})
"""
    assert kinds(complete(source)) == ["linear", "all_gather", "softmax"]


def test_distribute_from_local_redistribute_and_to_local():
    source = HEADER + """

def build(mesh):
    def run(x):
        d = distribute_tensor(x, mesh, [Shard(0)])
        p = DTensor.from_local(d.to_local() * 2, mesh, [Shard(0)])
        r = p.redistribute(mesh, [Shard(1)])
        return r.full_tensor()
    return run
"""
    translation = complete(source)
    assert kinds(translation) == ["local_chunk", "mul", "all_to_all", "all_gather"]
    assert only(translation, "all_to_all").attrs == {"mesh_dim": "tp", "split_dim": 1, "concat_dim": 0}


def test_partial_dtensor_redistributed_to_replicate_is_all_reduced():
    source = (HEADER + """

def build(mesh):
    def run(x):
        return DTensor.from_local(x, mesh, [Partial()]).redistribute(mesh, [Replicate()]).to_local()
    return run
""").replace("import DTensor, Replicate,", "import DTensor, Partial, Replicate,")
    assert only(complete(source), "all_reduce").attrs == {"mesh_dim": "tp", "op": "sum"}


def test_loss_parallel_cross_entropy_is_the_vocab_parallel_op():
    source = HEADER + """

class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.out = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, x, labels):
        logits = self.out(x)
        with loss_parallel():
            return F.cross_entropy(logits, labels)


def example_inputs():
    return torch.randn(TOKENS, DIM), torch.randint(0, VOCAB, (TOKENS,))


def build(mesh):
    return parallelize_module(Head(), mesh, {"out": ColwiseParallel(use_local_output=False)})
"""
    op = only(complete(source), "vocab_parallel_cross_entropy")
    assert op.attrs == {"mesh_dim": "tp", "reduction": "mean"}


def test_plan_key_that_matches_no_submodule_is_unsupported_at_the_style():
    source = build('{"upp": ColwiseParallel()}')
    translation = translate(source)
    assert translation.program is None
    assert translation.unsupported[0].line == line_of(source, "model = parallelize_module")
    assert "upp" in translation.unsupported[0].reason


def test_partial_placement_output():
    source = (HEADER + """

def build(mesh):
    def run(x):
        return DTensor.from_local(x, mesh, [Partial()])
    return run
""").replace("import DTensor, Replicate,", "import DTensor, Partial, Replicate,")
    assert complete(source).program.outputs[0].placements == (Partial("sum"),)


def test_shape_of_a_sharded_dtensor_is_its_global_shape():
    source = HEADER + """

def build(mesh):
    def run(x):
        d = distribute_tensor(x, mesh, [Shard(0)])
        rows, cols = d.shape
        return d.to_local().reshape(rows // 2, cols)
    return run
"""
    assert only(complete(source), "reshape").attrs["shape"] == ["TOKENS/2", "DIM"]
