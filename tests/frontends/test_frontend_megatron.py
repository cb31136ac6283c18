"""Megatron-core idioms (recognised by import path; Megatron itself is not needed)."""
from __future__ import annotations

from frontend_support import complete, input_spec, kinds, line_of, only, ops

from verifier.placements import Replicate, Shard

HEADER = """\
import torch
import torch.nn.functional as F
from megatron.core import ModelParallelConfig, parallel_state
from megatron.core.tensor_parallel import ColumnParallelLinear, RowParallelLinear, VocabParallelEmbedding
from megatron.core.tensor_parallel import vocab_parallel_cross_entropy
from megatron.core.tensor_parallel.mappings import (copy_to_tensor_model_parallel_region,
    reduce_from_tensor_model_parallel_region, scatter_to_tensor_model_parallel_region,
    gather_from_tensor_model_parallel_region, scatter_to_sequence_parallel_region,
    gather_from_sequence_parallel_region, reduce_scatter_to_sequence_parallel_region)

SEQ, BATCH, HIDDEN, FFN, VOCAB = 8, 2, 16, 64, 32
"""


def mlp(fc1: str = "gather_output=False", fc2: str = "input_is_parallel=True", config: str = "",
        forward: str = "h, _ = self.fc1(x)\n        y, _ = self.fc2(F.gelu(h))\n        return y") -> str:
    return HEADER + f"""

class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        config = ModelParallelConfig({config})
        self.fc1 = ColumnParallelLinear(HIDDEN, FFN, config=config, init_method=torch.nn.init.normal_, {fc1})
        self.fc2 = RowParallelLinear(FFN, HIDDEN, config=config, init_method=torch.nn.init.normal_, bias=True,
                                     skip_bias_add=False, {fc2})

    def forward(self, x):
        {forward}


def example_inputs():
    return (torch.randn(SEQ, BATCH, HIDDEN),)
"""


def test_column_parallel_weight_is_out_by_in_sharded_on_dim_zero_with_its_bias():
    translation = complete(mlp())
    weight, bias = input_spec(translation, "fc1.weight"), input_spec(translation, "fc1.bias")
    assert (weight.shape, weight.placements) == (("FFN", "HIDDEN"), (Shard(0),))
    assert (bias.shape, bias.placements) == (("FFN",), (Shard(0),))


def test_column_parallel_copies_its_input_then_applies_linear():
    translation = complete(mlp())
    copy = ops(translation)[0]
    assert (copy.kind, copy.attrs) == ("identity", {"grad": "all_reduce", "mesh_dim": "tp"})
    assert ops(translation, "linear")[0].args == (copy.results[0], "fc1.weight", "fc1.bias")


def test_column_parallel_gather_output_all_gathers_the_last_dim():
    translation = complete(mlp(fc1="gather_output=True", fc2="input_is_parallel=False"))
    gather = only(translation, "all_gather")
    assert gather.attrs == {"mesh_dim": "tp", "dim": 2, "grad": "split"}


def test_row_parallel_weight_is_sharded_on_dim_one_and_bias_added_after_all_reduce():
    source = mlp()
    translation = complete(source)
    assert input_spec(translation, "fc2.weight").placements == (Shard(1),)
    assert input_spec(translation, "fc2.bias").placements == (Replicate(),)
    assert kinds(translation)[-3:] == ["linear", "all_reduce", "add"]
    assert ops(translation, "linear")[1].args[1:] == ("fc2.weight",)
    assert only(translation, "all_reduce").span.line == line_of(source, "y, _ = self.fc2")


def test_row_parallel_input_not_parallel_takes_the_local_chunk_of_the_last_dim():
    translation = complete(mlp(fc1="gather_output=True", fc2="input_is_parallel=False"))
    chunk = only(translation, "local_chunk")
    assert chunk.attrs == {"mesh_dim": "tp", "dim": 2, "grad": "all_gather"}


def test_sequence_parallel_gathers_the_input_sequence_and_reduce_scatters_the_output():
    forward = ("x = scatter_to_sequence_parallel_region(x)\n        h, _ = self.fc1(x)\n"
               "        y, _ = self.fc2(F.gelu(h))\n        return gather_from_sequence_parallel_region(y)")
    translation = complete(mlp(config="sequence_parallel=True", forward=forward))
    assert kinds(translation) == ["local_chunk", "all_gather", "linear", "gelu", "linear", "reduce_scatter", "add",
                                  "all_gather"]
    assert ops(translation, "all_gather")[0].attrs == {"mesh_dim": "tp", "dim": 0}
    assert only(translation, "reduce_scatter").attrs == {"mesh_dim": "tp", "dim": 0, "op": "sum"}


def test_vocab_parallel_embedding_and_cross_entropy():
    source = HEADER + """

class LM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        config = ModelParallelConfig()
        self.embedding = VocabParallelEmbedding(VOCAB, HIDDEN, init_method=torch.nn.init.normal_, config=config)
        self.head = ColumnParallelLinear(HIDDEN, VOCAB, config=config, init_method=torch.nn.init.normal_,
                                         bias=False)

    def forward(self, tokens, labels):
        logits, _ = self.head(self.embedding(tokens))
        return vocab_parallel_cross_entropy(logits, labels)


def example_inputs():
    return torch.zeros(SEQ, BATCH, dtype=torch.long), torch.zeros(SEQ, BATCH, dtype=torch.long)
"""
    translation = complete(source)
    assert input_spec(translation, "embedding.weight").placements == (Shard(0),)
    assert only(translation, "vocab_parallel_embedding").args == ("tokens", "embedding.weight")
    assert only(translation, "vocab_parallel_cross_entropy").attrs == {"mesh_dim": "tp", "reduction": "none"}
    assert input_spec(translation, "tokens").bounds == (0, "VOCAB")


def test_mappings_map_to_their_collectives():
    forward = ("a = copy_to_tensor_model_parallel_region(x)\n"
               "        b = reduce_from_tensor_model_parallel_region(a)\n"
               "        c = scatter_to_tensor_model_parallel_region(b)\n"
               "        d = gather_from_tensor_model_parallel_region(c)\n"
               "        e = scatter_to_sequence_parallel_region(d)\n"
               "        f = gather_from_sequence_parallel_region(e)\n"
               "        return reduce_scatter_to_sequence_parallel_region(f)")
    translation = complete(mlp(forward=forward))
    assert [(op.kind, op.attrs.get("dim")) for op in ops(translation)] == [
        ("identity", None), ("all_reduce", None), ("local_chunk", 2), ("all_gather", 2), ("local_chunk", 0),
        ("all_gather", 0), ("reduce_scatter", 0)]


def test_parameter_with_a_size_divided_by_tp_is_the_global_parameter_sharded_on_that_dim():
    source = HEADER + """

class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        tp = parallel_state.get_tensor_model_parallel_world_size()
        self.w_in = torch.nn.Parameter(torch.empty(HIDDEN, FFN // tp))

    def forward(self, x):
        return reduce_from_tensor_model_parallel_region(copy_to_tensor_model_parallel_region(x) @ self.w_in)


def example_inputs():
    return (torch.randn(SEQ, HIDDEN),)
"""
    spec = input_spec(complete(source), "w_in")
    assert (spec.shape, spec.placements) == (("HIDDEN", "FFN"), (Shard(1),))
    assert spec.span.line == line_of(source, "self.w_in = ")


def test_gradients_of_inputs_and_parameters_are_checked():
    translation = complete(mlp())
    assert [g.input for g in translation.program.gradients] == ["x", "fc1.weight", "fc1.bias", "fc2.weight",
                                                                "fc2.bias"]


def test_sequence_parallel_parameter_gradients_get_the_finalisation_all_reduce():
    source = mlp(config="sequence_parallel=True").replace(
        "        self.fc1 =", "        self.norm = torch.nn.LayerNorm(HIDDEN)\n"
                             "        for p in self.norm.parameters():\n"
                             "            p.sequence_parallel = True\n        self.fc1 =")
    source = source.replace("h, _ = self.fc1(x)", "x = scatter_to_sequence_parallel_region(x)\n"
                                                   "        h, _ = self.fc1(self.norm(x))")
    program = complete(source).program
    synced = {g.input: g.value for g in program.gradients if g.value != f"grad_{g.input}"}
    assert set(synced) == {"norm.weight", "norm.bias", "fc2.bias"}
    assert [(op.kind, op.args) for op in program.backward_ops] == [
        ("all_reduce", (f"grad_{name}",)) for name in ("norm.weight", "norm.bias", "fc2.bias")]
