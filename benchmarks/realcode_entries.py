"""The entries of benchmarks/realcode.py: installed library code, named by module and entry, each with
a small recipe of this benchmark's own for its ground truth (constructor arguments, input shapes,
which inputs and outputs are rank blocks) and the command-line arguments a user would give the tool.

A recipe only builds and calls the library's own object; it never reimplements it.  ``build(world)``
runs after the library's parallel state (``parallel``) is set up on the world and returns the
callable (a module, whose parameters are compared, or a function); inputs are drawn with a fixed
seed at their global shape and an input with ``dim`` is cut into rank blocks along it.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass(frozen=True)
class In:
    name: str
    shape: tuple[int, ...]
    dim: int | None = None           # Shard(dim): each rank gets its block; None: every rank the whole
    high: int | None = None          # integer input in [0, high)
    grad: bool = True

    def make(self):
        import torch

        if self.high is not None:
            return torch.randint(0, self.high, self.shape)
        return torch.randn(self.shape, dtype=torch.float64)


@dataclass(frozen=True)
class Entry:
    library: str
    module: str
    entry: str                       # the function / class the tool is pointed at (--entry)
    build: Callable[[int], Any]
    inputs: tuple[In, ...]
    out: Any = None                  # Shard dim of every output (int), per output (tuple), or None
    kwargs: dict = field(default_factory=dict)
    parallel: str | None = None      # "megatron" | "fairscale": the package's parallel state
    tool: tuple[str, ...] = ()       # further arguments a user gives the tool (--arg, --entry "Cls(...)")
    variant: str = ""
    copy_params: bool = True         # False: every rank built the same full values and cut its own piece

    @property
    def key(self) -> str:
        return f"{self.library}:{self.module}.{self.entry}" + (f"[{self.variant}]" if self.variant else "")

    def out_dim(self, i: int):
        return self.out[i] if isinstance(self.out, tuple) and i < len(self.out) else (
            None if isinstance(self.out, tuple) else self.out)

    def setup(self, world: int) -> None:
        if self.parallel == "megatron":
            from megatron.core import parallel_state

            parallel_state.initialize_model_parallel(tensor_model_parallel_size=world)
        elif self.library == "deepspeed":   # its comm layer wraps the process group set up
            import deepspeed.comm as dscomm

            dscomm.init_distributed(dist_backend="gloo", auto_mpi_discovery=False, verbose=False)
        elif self.parallel == "fairscale":
            from fairscale.nn.model_parallel import initialize

            initialize.initialize_model_parallel(world)

    def tool_args(self) -> list[str]:
        args = ["--entry", self.entry] if not any(a.startswith("--entry") for a in self.tool) else []
        for spec in self.inputs:
            if spec.high is None:
                args += ["--input", f"{spec.name}=" + "x".join(str(n) for n in spec.shape)]
        return args + list(self.tool)


def teardown() -> None:
    import sys

    if "megatron.core" in sys.modules:
        from megatron.core import parallel_state

        try:
            parallel_state.destroy_model_parallel()
        except Exception:
            pass
    if "fairscale.nn.model_parallel.initialize" in sys.modules:
        from fairscale.nn.model_parallel import initialize

        try:
            initialize.destroy_model_parallel()
        except Exception:
            pass


def _world_group(world: int | None = None):
    import torch.distributed as dist

    return dist.group.WORLD


def _mesh(world: int):
    from torch.distributed.device_mesh import init_device_mesh

    return init_device_mesh("cpu", (world,))


def _attr(module: str, name: str):
    import importlib

    return getattr(importlib.import_module(module), name)


def _fn(module: str, name: str, **bound):
    """The library function itself (with keyword arguments the recipe binds)."""
    def build(world: int):
        fn = _attr(module, name)
        values = {k: (v(world) if callable(v) else v) for k, v in bound.items()}
        return functools.partial(fn, **values) if values else fn
    return build


def _apply(module: str, name: str, *before, after=()):
    """An autograd Function of the library: ``Cls.apply(*before(world), *inputs, *after)``."""
    def build(world: int):
        cls = _attr(module, name)
        pre = [b(world) if callable(b) else b for b in before]
        return lambda *xs: cls.apply(*pre, *xs, *after)
    return build


def _init():
    import torch

    return functools.partial(torch.nn.init.normal_, mean=0.0, std=0.5)


# ---------------------------------------------------------------------------------------- megatron-core

MG_MAP = "megatron.core.tensor_parallel.mappings"
MG_LAYERS = "megatron.core.tensor_parallel.layers"


def _mg_config(world: int, **kw):
    import torch
    from megatron.core.model_parallel_config import ModelParallelConfig

    return ModelParallelConfig(tensor_model_parallel_size=world, use_cpu_initialization=True,
                               params_dtype=torch.float64, **kw)


def _mg_transformer_config(world: int, **kw):
    import torch
    from megatron.core.transformer.transformer_config import TransformerConfig

    base = dict(num_layers=1, hidden_size=16, num_attention_heads=4, ffn_hidden_size=32,
                tensor_model_parallel_size=world, use_cpu_initialization=True, params_dtype=torch.float64,
                add_bias_linear=True, hidden_dropout=0.0, attention_dropout=0.0)
    base.update(kw)
    return TransformerConfig(**base)


def _mg_column(gather_output: bool, sp: bool = False):
    def build(world):
        cls = _attr(MG_LAYERS, "ColumnParallelLinear")
        return cls(16, 32, config=_mg_config(world, sequence_parallel=sp), init_method=_init(),
                   gather_output=gather_output, bias=True)
    return build


def _mg_row(input_is_parallel: bool, sp: bool = False):
    def build(world):
        cls = _attr(MG_LAYERS, "RowParallelLinear")
        return cls(32, 16, config=_mg_config(world, sequence_parallel=sp), init_method=_init(), bias=True,
                   input_is_parallel=input_is_parallel, skip_bias_add=False)
    return build


def _mg_embedding(world):
    cls = _attr(MG_LAYERS, "VocabParallelEmbedding")
    return cls(32, 16, init_method=_init(), config=_mg_config(world))


def _mg_mlp(world):
    from megatron.core.tensor_parallel.layers import ColumnParallelLinear, RowParallelLinear
    from megatron.core.transformer.mlp import MLP, MLPSubmodules

    return MLP(_mg_transformer_config(world), MLPSubmodules(linear_fc1=ColumnParallelLinear,
                                                            linear_fc2=RowParallelLinear))


def _mg_linear_fn(world):
    fn = _attr(MG_LAYERS, "linear_with_grad_accumulation_and_async_allreduce")
    return functools.partial(fn, bias=None, gradient_accumulation_fusion=False, allreduce_dgrad=True,
                             sequence_parallel=False)


MEGATRON = [
    Entry("megatron-core", MG_MAP, "copy_to_tensor_model_parallel_region", _fn(MG_MAP, "copy_to_tensor_model_parallel_region"),
          (In("input_", (4, 8)),), parallel="megatron"),
    Entry("megatron-core", MG_MAP, "reduce_from_tensor_model_parallel_region", _fn(MG_MAP, "reduce_from_tensor_model_parallel_region"),
          (In("input_", (4, 8)),), parallel="megatron"),
    Entry("megatron-core", MG_MAP, "scatter_to_tensor_model_parallel_region", _fn(MG_MAP, "scatter_to_tensor_model_parallel_region"),
          (In("input_", (4, 8)),), out=-1, parallel="megatron", tool=("--expect", "out=Shard(-1)")),
    Entry("megatron-core", MG_MAP, "gather_from_tensor_model_parallel_region", _fn(MG_MAP, "gather_from_tensor_model_parallel_region"),
          (In("input_", (4, 8), dim=-1),), parallel="megatron", tool=("--expect", "input_=Shard(-1)")),
    Entry("megatron-core", MG_MAP, "scatter_to_sequence_parallel_region", _fn(MG_MAP, "scatter_to_sequence_parallel_region"),
          (In("input_", (8, 2, 4)),), out=0, parallel="megatron", tool=("--expect", "out=Shard(0)")),
    Entry("megatron-core", MG_MAP, "gather_from_sequence_parallel_region", _fn(MG_MAP, "gather_from_sequence_parallel_region"),
          (In("input_", (8, 2, 4), dim=0),), parallel="megatron", tool=("--expect", "input_=Shard(0)")),
    Entry("megatron-core", MG_MAP, "reduce_scatter_to_sequence_parallel_region", _fn(MG_MAP, "reduce_scatter_to_sequence_parallel_region"),
          (In("input_", (8, 2, 4)),), out=0, parallel="megatron", tool=("--expect", "out=Shard(0)")),
    Entry("megatron-core", MG_MAP, "all_gather_last_dim_from_tensor_parallel_region", _fn(MG_MAP, "all_gather_last_dim_from_tensor_parallel_region"),
          (In("input_", (4, 8), dim=-1),), parallel="megatron", tool=("--expect", "input_=Shard(-1)")),
    Entry("megatron-core", MG_MAP, "reduce_scatter_last_dim_to_tensor_parallel_region", _fn(MG_MAP, "reduce_scatter_last_dim_to_tensor_parallel_region"),
          (In("input_", (4, 8)),), out=-1, parallel="megatron", tool=("--expect", "out=Shard(-1)")),
    Entry("megatron-core", MG_MAP, "all_to_all_sp2hp", _fn(MG_MAP, "all_to_all_sp2hp"),
          (In("input_", (8, 8), dim=0),), out=1, parallel="megatron",
          tool=("--expect", "input_=Shard(0)", "--expect", "out=Shard(1)")),
    Entry("megatron-core", MG_MAP, "all_to_all_hp2sp", _fn(MG_MAP, "all_to_all_hp2sp"),
          (In("input_", (8, 8), dim=1),), out=0, parallel="megatron",
          tool=("--expect", "input_=Shard(1)", "--expect", "out=Shard(0)")),
    Entry("megatron-core", MG_LAYERS, "ColumnParallelLinear", _mg_column(True), (In("input_", (4, 2, 16)),),
          parallel="megatron", variant="gather_output",
          tool=("--entry", "ColumnParallelLinear(16, 32, gather_output=True)")),
    Entry("megatron-core", MG_LAYERS, "ColumnParallelLinear", _mg_column(False), (In("input_", (4, 2, 16)),),
          out=(-1, None), parallel="megatron", variant="sharded_output", tool=("--expect", "out0=Shard(-1)")),
    Entry("megatron-core", MG_LAYERS, "RowParallelLinear", _mg_row(False), (In("input_", (4, 2, 32)),),
          parallel="megatron", variant="split_input"),
    Entry("megatron-core", MG_LAYERS, "RowParallelLinear", _mg_row(True), (In("input_", (4, 2, 32), dim=-1),),
          parallel="megatron", variant="parallel_input",
          tool=("--entry", "RowParallelLinear(32, 16, input_is_parallel=True)", "--expect", "input_=Shard(-1)")),
    Entry("megatron-core", MG_LAYERS, "VocabParallelEmbedding", _mg_embedding, (In("input_", (4, 3), high=32),),
          parallel="megatron"),
    Entry("megatron-core", MG_LAYERS, "linear_with_grad_accumulation_and_async_allreduce", _mg_linear_fn,
          (In("input", (8, 16)), In("weight", (32, 16))), parallel="megatron",
          tool=("--arg", "bias=None", "--arg", "gradient_accumulation_fusion=False", "--arg", "allreduce_dgrad=True",
                "--arg", "sequence_parallel=False")),
    Entry("megatron-core", "megatron.core.tensor_parallel.cross_entropy", "vocab_parallel_cross_entropy",
          _fn("megatron.core.tensor_parallel.cross_entropy", "vocab_parallel_cross_entropy"),
          (In("vocab_parallel_logits", (4, 2, 16), dim=-1), In("target", (4, 2), high=16)), parallel="megatron",
          tool=("--expect", "vocab_parallel_logits=Shard(-1)")),
    Entry("megatron-core", "megatron.core.transformer.mlp", "MLP", _mg_mlp, (In("hidden_states", (4, 2, 16)),),
          parallel="megatron"),
]

# ---------------------------------------------------------------------------------------- fairscale

FS_MAP = "fairscale.nn.model_parallel.mappings"
FS_LAYERS = "fairscale.nn.model_parallel.layers"


def _fs(cls_name: str, *args, **kw):
    def build(world):
        import torch

        return _attr(FS_LAYERS, cls_name)(*args, init_method=torch.nn.init.xavier_normal_, **kw)
    return build


FAIRSCALE = [
    Entry("fairscale", FS_MAP, "copy_to_model_parallel_region", _fn(FS_MAP, "copy_to_model_parallel_region"),
          (In("input_", (4, 8)),), parallel="fairscale"),
    Entry("fairscale", FS_MAP, "reduce_from_model_parallel_region", _fn(FS_MAP, "reduce_from_model_parallel_region"),
          (In("input_", (4, 8)),), parallel="fairscale"),
    Entry("fairscale", FS_MAP, "scatter_to_model_parallel_region", _fn(FS_MAP, "scatter_to_model_parallel_region"),
          (In("input_", (4, 8)),), out=-1, parallel="fairscale", tool=("--expect", "out=Shard(-1)")),
    Entry("fairscale", FS_MAP, "gather_from_model_parallel_region", _fn(FS_MAP, "gather_from_model_parallel_region"),
          (In("input_", (4, 8), dim=-1),), parallel="fairscale", tool=("--expect", "input_=Shard(-1)")),
    Entry("fairscale", FS_LAYERS, "ColumnParallelLinear", _fs("ColumnParallelLinear", 16, 32, gather_output=True),
          (In("input_", (4, 16)),), parallel="fairscale", variant="gather_output",
          tool=("--entry", "ColumnParallelLinear(16, 32, gather_output=True)")),
    Entry("fairscale", FS_LAYERS, "ColumnParallelLinear", _fs("ColumnParallelLinear", 16, 32, gather_output=False),
          (In("input_", (4, 16)),), out=-1, parallel="fairscale", variant="sharded_output",
          tool=("--entry", "ColumnParallelLinear(16, 32, gather_output=False)", "--expect", "out=Shard(-1)")),
    Entry("fairscale", FS_LAYERS, "RowParallelLinear", _fs("RowParallelLinear", 32, 16, input_is_parallel=False),
          (In("input_", (4, 32)),), parallel="fairscale", variant="split_input",
          tool=("--entry", "RowParallelLinear(32, 16)")),
    Entry("fairscale", FS_LAYERS, "RowParallelLinear", _fs("RowParallelLinear", 32, 16, input_is_parallel=True),
          (In("input_", (4, 32), dim=-1),), parallel="fairscale", variant="parallel_input",
          tool=("--entry", "RowParallelLinear(32, 16, input_is_parallel=True)", "--expect", "input_=Shard(-1)")),
    Entry("fairscale", FS_LAYERS, "VocabParallelEmbedding", _fs("VocabParallelEmbedding", 32, 16),
          (In("input_", (4, 3), high=32),), parallel="fairscale", tool=("--entry", "VocabParallelEmbedding(32, 16)")),
    Entry("fairscale", FS_LAYERS, "ParallelEmbedding", _fs("ParallelEmbedding", 32, 16),
          (In("input_", (4, 3), high=32),), parallel="fairscale", tool=("--entry", "ParallelEmbedding(32, 16)")),
    Entry("fairscale", "fairscale.nn.model_parallel.cross_entropy", "vocab_parallel_cross_entropy",
          _fn("fairscale.nn.model_parallel.cross_entropy", "vocab_parallel_cross_entropy"),
          (In("vocab_parallel_logits", (4, 2, 16), dim=-1), In("target", (4, 2), high=16)), parallel="fairscale",
          tool=("--expect", "vocab_parallel_logits=Shard(-1)")),
]

# ---------------------------------------------------------------------------------------- litgpt

LG_TP = "litgpt.generate.tp"


class _Fabric:
    """What litgpt's tp functions read of a Lightning Fabric: its rank and world size."""

    def __init__(self, world: int):
        import torch.distributed as dist

        self.world_size, self.global_rank = world, dist.get_rank()


def _lg_config():
    from litgpt.config import Config

    return Config(n_layer=1, n_head=4, n_embd=16, n_query_groups=4, block_size=8, vocab_size=32, padded_vocab_size=32,
                  mlp_class_name="LLaMAMLP", intermediate_size=32, bias=False, rotary_percentage=1.0,
                  parallel_residual=False, norm_class_name="RMSNorm")


def _lg_linear(style: str):
    def build(world):
        import torch

        lin = torch.nn.Linear(16, 16, bias=True)
        _attr(LG_TP, "tensor_parallel_linear")(_Fabric(world), lin, style)
        return lin
    return build


def _lg_mlp(world):
    from litgpt.model import LLaMAMLP

    mlp = LLaMAMLP(_lg_config())
    _attr(LG_TP, "tensor_parallel_mlp")(_Fabric(world), mlp)
    return mlp


def _lg_gpt(world):
    from litgpt.model import GPT

    model = GPT(_lg_config())
    model = _attr(LG_TP, "tensor_parallel")(_Fabric(world), model)
    return model


def _lg_attn(world):
    from litgpt.model import CausalSelfAttention

    cfg = _lg_config()
    attn = CausalSelfAttention(cfg, block_idx=0)
    _attr(LG_TP, "tensor_parallel_attn")(_Fabric(world), attn)
    return attn


LITGPT = [
    Entry("litgpt", LG_TP, "tensor_parallel_linear", _lg_linear("colwise"), (In("input", (4, 16)),), out=-1,
          variant="colwise", tool=("--expect", "out=Shard(-1)", "--arg", "style='colwise'")),
    Entry("litgpt", LG_TP, "tensor_parallel_linear", _lg_linear("rowwise"), (In("input", (4, 16), dim=-1),),
          variant="rowwise_partial", tool=("--expect", "input=Shard(-1)", "--arg", "style='rowwise'")),
    Entry("litgpt", LG_TP, "tensor_parallel_mlp", _lg_mlp, (In("x", (2, 4, 16)),)),
    Entry("litgpt", LG_TP, "tensor_parallel", _lg_gpt, (In("idx", (2, 8), high=32),)),
]

# ---------------------------------------------------------------------------------------- yunchang

YC_A2A = "yunchang.comm.all_to_all"


def _yc_ulysses(world):
    from yunchang.kernels import AttnType

    cls = _attr("yunchang.ulysses.attn_layer", "UlyssesAttention")
    mod = cls(_world_group(), scatter_idx=2, gather_idx=1, attn_type=AttnType.TORCH_MATH)
    return lambda q, k, v: mod(q, k, v, causal=False)


def _yc_ring(causal: bool):
    def build(world):
        from yunchang.kernels import AttnType

        fn = _attr("yunchang.ring.ring_pytorch_attn", "ring_pytorch_attn_func")
        return lambda q, k, v: fn(q, k, v, causal=causal, group=_world_group(), attn_type=AttnType.TORCH_MATH)
    return build


_QKV = (In("q", (1, 8, 4, 4), dim=1), In("k", (1, 8, 4, 4), dim=1), In("v", (1, 8, 4, 4), dim=1))

YUNCHANG = [
    Entry("yunchang", YC_A2A, "SeqAllToAll4D", _apply(YC_A2A, "SeqAllToAll4D", _world_group, after=(2, 1)),
          (In("input", (1, 8, 4, 4), dim=1),), out=2, variant="seq_to_head",
          tool=("--expect", "input=Shard(1)", "--expect", "out=Shard(2)",
                "--arg", "scatter_idx=2", "--arg", "gather_idx=1")),
    Entry("yunchang", YC_A2A, "SeqAllToAll4D", _apply(YC_A2A, "SeqAllToAll4D", _world_group, after=(1, 2)),
          (In("input", (1, 8, 4, 4), dim=2),), out=1, variant="head_to_seq",
          tool=("--expect", "input=Shard(2)", "--expect", "out=Shard(1)",
                "--arg", "scatter_idx=1", "--arg", "gather_idx=2")),
    Entry("yunchang", YC_A2A, "SeqAllToAll5D", _apply(YC_A2A, "SeqAllToAll5D", _world_group, after=(3, 1)),
          (In("input", (1, 8, 3, 4, 2), dim=1),), out=3,
          tool=("--expect", "input=Shard(1)", "--expect", "out=Shard(3)")),
    Entry("yunchang", "yunchang.ulysses.attn_layer", "UlyssesAttention", _yc_ulysses, _QKV, out=1,
          tool=("--expect", "q=Shard(1)", "--expect", "k=Shard(1)", "--expect", "v=Shard(1)", "--expect", "out=Shard(1)")),
    Entry("yunchang", "yunchang.ring.ring_pytorch_attn", "ring_pytorch_attn_func", _yc_ring(False), _QKV, out=1,
          variant="full", tool=("--expect", "q=Shard(1)", "--expect", "k=Shard(1)", "--expect", "v=Shard(1)",
                                "--expect", "out=Shard(1)", "--arg", "attn_type='torch_math'")),
    Entry("yunchang", "yunchang.ring.ring_pytorch_attn", "ring_pytorch_attn_func", _yc_ring(True), _QKV, out=1,
          variant="causal", tool=("--expect", "q=Shard(1)", "--expect", "k=Shard(1)", "--expect", "v=Shard(1)",
                                  "--expect", "out=Shard(1)", "--arg", "causal=True", "--arg", "attn_type='torch_math'")),
]

# ---------------------------------------------------------------------------------------- deepspeed

DS_SEQ = "deepspeed.sequence.layer"
DS_INJ = "deepspeed.module_inject.layers"


def _ds_local_attention(q, k, v, *args):
    """A plain attention over [seq, batch, heads, dim] blocks (DeepSpeed's callers pass their own)."""
    import torch.nn.functional as F

    o = F.scaled_dot_product_attention(q.permute(1, 2, 0, 3), k.permute(1, 2, 0, 3), v.permute(1, 2, 0, 3))
    return o.permute(2, 0, 1, 3)


def _ds_dist_attention(world):
    import torch

    cls = _attr(DS_SEQ, "DistributedAttention")

    class _Local(torch.nn.Module):
        def forward(self, q, k, v, *args, **kw):
            return _ds_local_attention(q, k, v)

    mod = cls(_Local(), _world_group(), scatter_idx=2, gather_idx=0)
    return lambda q, k, v: mod(q, k, v, 1)


def _ds_inject(cls_name: str, **kw):
    def build(world):
        import torch

        lin = torch.nn.Linear(16, 16, bias=True)
        return _attr(DS_INJ, cls_name)(lin, _world_group(), **kw)
    return build


def _ds_ce(world):
    import torch.distributed as dist

    fn = _attr("deepspeed.sequence.cross_entropy", "vocab_parallel_cross_entropy")
    return lambda logits, target: fn(logits, target, tp_group=_world_group(), global_vocab_size=16,
                                     vocab_start_index=dist.get_rank() * (16 // dist.get_world_size()),
                                     vocab_end_index=(dist.get_rank() + 1) * (16 // dist.get_world_size()))


_SBHD = (In("query", (8, 1, 4, 4), dim=0), In("key", (8, 1, 4, 4), dim=0), In("value", (8, 1, 4, 4), dim=0))

DEEPSPEED = [
    Entry("deepspeed", DS_SEQ, "single_all_to_all", _fn(DS_SEQ, "single_all_to_all", scatter_idx=2, gather_idx=0,
                                                         batch_dim_idx=1, group=lambda w: _world_group()),
          (In("input", (8, 1, 4, 4), dim=0),), out=2,
          tool=("--arg", "scatter_idx=2", "--arg", "gather_idx=0", "--arg", "batch_dim_idx=1",
                "--expect", "input=Shard(0)", "--expect", "out=Shard(2)")),
    Entry("deepspeed", DS_SEQ, "_SeqAllToAll", _apply(DS_SEQ, "_SeqAllToAll", _world_group, after=(2, 0, 1)),
          (In("input", (8, 1, 4, 4), dim=0),), out=2, variant="seq_to_head",
          tool=("--expect", "input=Shard(0)", "--expect", "out=Shard(2)",
                "--arg", "scatter_idx=2", "--arg", "gather_idx=0", "--arg", "batch_dim_idx=1")),
    Entry("deepspeed", DS_SEQ, "_SeqAllToAll", _apply(DS_SEQ, "_SeqAllToAll", _world_group, after=(0, 2, 1)),
          (In("input", (8, 1, 4, 4), dim=2),), out=0, variant="head_to_seq",
          tool=("--expect", "input=Shard(2)", "--expect", "out=Shard(0)",
                "--arg", "scatter_idx=0", "--arg", "gather_idx=2", "--arg", "batch_dim_idx=1")),
    Entry("deepspeed", DS_SEQ, "DistributedAttention", _ds_dist_attention, _SBHD, out=0,
          tool=("--expect", "query=Shard(0)", "--expect", "key=Shard(0)", "--expect", "value=Shard(0)",
                "--expect", "out=Shard(0)")),
    Entry("deepspeed", DS_INJ, "LinearAllreduce", _ds_inject("LinearAllreduce"), (In("input", (4, 16)),)),
    Entry("deepspeed", DS_INJ, "LinearLayer", _ds_inject("LinearLayer"), (In("input", (4, 16)),), out=-1,
          variant="sharded_output", tool=("--expect", "out=Shard(-1)")),
    Entry("deepspeed", DS_INJ, "LinearLayer", _ds_inject("LinearLayer", gather_output=True), (In("input", (4, 16)),),
          variant="gather_output", tool=("--arg", "gather_output=True")),
    Entry("deepspeed", "deepspeed.sequence.cross_entropy", "vocab_parallel_cross_entropy", _ds_ce,
          (In("vocab_parallel_logits", (4, 16), dim=-1), In("target", (4,), high=16)),
          tool=("--expect", "vocab_parallel_logits=Shard(-1)")),
]

# ---------------------------------------------------------------------------------------- torchtitan

TT_UTILS = "torchtitan.distributed.utils"


def _tt_noparallel(world):
    import torch
    from torch.distributed.tensor.parallel import parallelize_module

    style = _attr("torchtitan.distributed.tensor_parallel", "NoParallel")()
    lin = torch.nn.Linear(16, 16)
    return parallelize_module(lin, _mesh(world), style)


def _tt_colwise_plan(world):
    """torchtitan's ParallelDims builds the mesh its parallelize functions receive."""
    import torch
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    dims = _attr("torchtitan.distributed.parallel_dims", "ParallelDims")(
        dp_replicate=1, dp_shard=1, cp=1, tp=world, pp=1, ep=1, world_size=world)
    dims.build_mesh()
    mesh = dims.get_mesh("tp")
    mlp = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 16))
    return parallelize_module(mlp, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})


TORCHTITAN = [
    Entry("torchtitan", "torchtitan.distributed.tensor_parallel", "NoParallel", _tt_noparallel, (In("input", (4, 16)),)),
    Entry("torchtitan", TT_UTILS, "dist_sum_tensor", _fn(TT_UTILS, "dist_sum_tensor", mesh=_mesh),
          (In("x", (4,)),)),
    Entry("torchtitan", TT_UTILS, "dist_mean", _fn(TT_UTILS, "dist_mean", mesh=_mesh), (In("x", ()),)),
    Entry("torchtitan", TT_UTILS, "dist_max", _fn(TT_UTILS, "dist_max", mesh=_mesh), (In("x", ()),)),
]

# ---------------------------------------------------------------------------------------- transformers

HF_TP = "transformers.integrations.tensor_parallel"


def _hf_fn(name: str):
    def build(world):
        fn = _attr(HF_TP, name)
        mesh = _mesh(world)
        return lambda x: fn(x, mesh)
    return build


def _hf_style(style: str, in_f: int, out_f: int, **kw):
    """A Linear sharded and hooked the way transformers' from_pretrained does it for one plan entry."""
    def build(world):
        import torch
        import torch.distributed as dist

        mesh = _mesh(world)
        lin = torch.nn.Linear(in_f, out_f)
        layer = _attr(HF_TP, style)(**kw)
        layer.device_mesh, layer.rank, layer.empty_param = mesh, dist.get_rank(), lin.weight
        for pname in ("weight", "bias"):
            p = getattr(lin, pname)
            layer.empty_param = p
            setattr(lin, pname, torch.nn.Parameter(layer.shard_tensor(p.detach(), dtype=p.dtype, device="cpu")))
        layer.prepare_module_tp(lin, mesh)
        return lin
    return build


TRANSFORMERS = [
    Entry("transformers", HF_TP, "all_reduce_forward", _hf_fn("all_reduce_forward"), (In("x", (4, 8)),)),
    Entry("transformers", HF_TP, "all_reduce_backward", _hf_fn("all_reduce_backward"), (In("x", (4, 8)),)),
    Entry("transformers", HF_TP, "all_gather", _hf_fn("all_gather"), (In("x", (4, 8), dim=-1),),
          tool=("--expect", "x=Shard(-1)")),
    Entry("transformers", HF_TP, "split", _hf_fn("split"), (In("x", (4, 8)),), out=-1, tool=("--expect", "out=Shard(-1)")),
    Entry("transformers", HF_TP, "reduce_scatter", _hf_fn("reduce_scatter"), (In("x", (4, 8)),), out=-1,
          tool=("--expect", "out=Shard(-1)")),
    Entry("transformers", HF_TP, "ColwiseParallel", _hf_style("ColwiseParallel", 16, 32, gather_output=True),
          (In("input", (4, 16)),), variant="gather_output", tool=("--entry", "ColwiseParallel(gather_output=True)")),
    Entry("transformers", HF_TP, "ColwiseParallel", _hf_style("ColwiseParallel", 16, 32), (In("input", (4, 16)),),
          out=-1, variant="sharded_output", tool=("--expect", "out=Shard(-1)")),
    Entry("transformers", HF_TP, "RowwiseParallel", _hf_style("RowwiseParallel", 32, 16), (In("input", (4, 32), dim=-1),),
          tool=("--expect", "input=Shard(-1)")),
    Entry("transformers", HF_TP, "RowwiseParallel", _hf_style("RowwiseParallel", 32, 16, split_input=True),
          (In("input", (4, 32)),), variant="split_input", tool=("--entry", "RowwiseParallel(split_input=True)")),
]

# ---------------------------------------------------------------------------------------- accelerate

AC_OPS = "accelerate.utils.operations"


def _ac(name: str, **kw):
    def build(world):
        from accelerate.state import PartialState

        PartialState(cpu=True)
        fn = _attr(AC_OPS, name)
        return functools.partial(fn, **kw) if kw else fn
    return build


ACCELERATE = [
    Entry("accelerate", AC_OPS, "reduce", _ac("reduce"), (In("tensor", (4, 8)),), variant="mean"),
    Entry("accelerate", AC_OPS, "reduce", _ac("reduce", reduction="sum"), (In("tensor", (4, 8)),), variant="sum",
          tool=("--arg", "reduction='sum'")),
    Entry("accelerate", AC_OPS, "gather", _ac("gather"), (In("tensor", (4, 8), dim=0),),
          tool=("--expect", "tensor=Shard(0)")),
    Entry("accelerate", AC_OPS, "broadcast", _ac("broadcast"), (In("tensor", (4, 8)),)),
    Entry("accelerate", AC_OPS, "pad_across_processes", _ac("pad_across_processes"), (In("tensor", (4, 8)),)),
]

def hf_entry(model_type: str, config: str) -> Entry:
    """A transformers architecture with its tensor-parallel plan applied (benchmarks/hf_tp_plans.py)."""
    def build(world):
        import hf_tp_harness

        model, _ = hf_tp_harness.build(model_type, config, world)
        if world > 1:
            hf_tp_harness.state_packed_layouts(model)
        return hf_tp_harness.logits_of(model), list(model.named_parameters())
    return Entry("hf-tp", model_type, config, build, (In("input_ids", (1, 8), high=64),), copy_params=False)


def by_key(key: str) -> Entry:
    if key.startswith("hf-tp:"):
        model_type, _, config = key[len("hf-tp:"):].partition(".")
        return hf_entry(model_type, config)
    return next(e for e in ENTRIES if e.key == key)


ENTRIES: list[Entry] = MEGATRON + FAIRSCALE + LITGPT + YUNCHANG + DEEPSPEED + TORCHTITAN + TRANSFORMERS + ACCELERATE
