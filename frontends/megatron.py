"""Megatron-core (recognised by import path; Megatron need not be installed).

* ``parallel_state``: tensor-parallel world size / rank / group -> the ``tp`` mesh dim;
* ``ColumnParallelLinear``: weight ``[out, in]`` placed ``S(0)`` (bias ``S(0)``); with
  ``sequence_parallel`` the input is all-gathered along dim 0 first; ``linear``; then
  ``all_gather(dim=-1)`` if ``gather_output``.  Returns ``(output, bias)`` like Megatron;
* ``RowParallelLinear``: weight ``S(1)``; ``local_chunk(dim=-1)`` of the input unless
  ``input_is_parallel``; ``linear`` without bias; ``all_reduce`` (``reduce_scatter(dim=0)``
  with ``sequence_parallel``); then the bias;
* ``VocabParallelEmbedding`` -> ``vocab_parallel_embedding``; ``vocab_parallel_cross_entropy``;
* ``tensor_parallel.mappings``: copy_to -> identity, reduce_from -> all_reduce, scatter_to ->
  local_chunk(-1), gather_from -> all_gather(-1), and the sequence-parallel variants along dim 0.
"""
from __future__ import annotations

from typing import Any

import sympy as sp

from verifier.placements import Replicate, Shard

from .library import Call, function, layer
from .nn_modules import param_tensor
from .values import MISSING, ConfigObj, GroupObj, ModuleObj, Tensor, UnsupportedError

CONFIG_DEFAULTS = {"sequence_parallel": False, "tensor_model_parallel_size": 1, "pipeline_model_parallel_size": 1,
                   "params_dtype": None, "perform_initialization": True, "use_cpu_initialization": False,
                   "gradient_accumulation_fusion": False, "async_tensor_model_parallel_allreduce": False,
                   "tp_comm_overlap": False, "bf16": False, "fp16": False}


def tp_dim(cx: Call) -> str:
    names = cx.it.dims.mesh.names
    if "tp" in names:
        return "tp"
    if len(names) == 1:
        return names[0]
    raise UnsupportedError(cx.line, "tensor parallelism", f"the mesh ({cx.it.dims.mesh}) has no 'tp' dim")


def dp_dims(cx: Call) -> tuple[str, ...]:
    names = cx.it.dims.mesh.names
    return ("dp",) if "dp" in names else ()


# --- parallel_state --------------------------------------------------------------------------

@function("megatron.get_tensor_model_parallel_world_size")
def tp_world_size(cx: Call):
    return cx.it.dims.size[tp_dim(cx)]


@function("megatron.get_tensor_model_parallel_rank")
def tp_rank(cx: Call):
    return cx.it.dims.rank[tp_dim(cx)]


@function("megatron.get_tensor_model_parallel_group")
def tp_group(cx: Call, check_initialized=True):
    return GroupObj((tp_dim(cx),))


@function("megatron.get_data_parallel_world_size")
def dp_world_size(cx: Call, with_context_parallel=False, partial_data_parallel=False):
    return cx.it.dims.world(dp_dims(cx))


@function("megatron.get_data_parallel_rank")
def dp_rank(cx: Call, with_context_parallel=False, partial_data_parallel=False):
    return cx.it.dims.global_rank(dp_dims(cx))


@function("megatron.get_data_parallel_group")
def dp_group(cx: Call, with_context_parallel=False, partial_data_parallel=False):
    return GroupObj(dp_dims(cx))


@function("megatron.get_pipeline_model_parallel_world_size")
def pp_world_size(cx: Call):
    return sp.Integer(1)


@function("megatron.get_pipeline_model_parallel_rank")
def pp_rank(cx: Call):
    return sp.Integer(0)


@function("megatron.initialize_model_parallel", "megatron.destroy_model_parallel",
          "megatron.model_parallel_cuda_manual_seed")
def _setup(cx: Call, *args, **kwargs):
    return None


@function("megatron.model_parallel_is_initialized")
def _initialized(cx: Call):
    return True


@function("megatron.TransformerConfig", "megatron.ModelParallelConfig", "megatron.transformer.TransformerConfig",
          "megatron.model_parallel_config.ModelParallelConfig",
          "megatron.transformer.transformer_config.TransformerConfig")
def config(cx: Call, **fields):
    return ConfigObj(dict(fields))


def config_field(obj: ConfigObj, name: str) -> Any:
    if name in obj.fields:
        return obj.fields[name]
    if name in CONFIG_DEFAULTS:
        return CONFIG_DEFAULTS[name]
    raise UnsupportedError(None, f"config.{name}", "this config field is not modelled")


def _sequence_parallel(cx: Call, cfg: Any) -> bool:
    if cfg is None or cfg is MISSING:
        return False
    if not isinstance(cfg, ConfigObj):
        raise UnsupportedError(cx.line, "config", "expected a TransformerConfig / ModelParallelConfig")
    value = config_field(cfg, "sequence_parallel")
    if not isinstance(value, bool):
        raise UnsupportedError(cx.line, "config.sequence_parallel", "must be a literal True/False")
    return value


def _init_method(*args, **kwargs):
    return None


for _name in ("init_method_normal", "scaled_init_method_normal", "xavier_uniform_"):
    function(f"megatron.{_name}", f"megatron.utils.{_name}")(lambda cx, *a, **k: _init_method)


# --- layers ----------------------------------------------------------------------------------

def _dtype(cfg: Any) -> str:
    return "f32"


@function("megatron.ColumnParallelLinear")
def column_parallel_linear(cx: Call, input_size, output_size, *, config, init_method=None, bias=True,
                           gather_output=False, stride=1, keep_master_weight_for_test=False, skip_bias_add=False,
                           skip_weight_param_allocation=False, embedding_activation_buffer=None,
                           grad_output_buffer=None, is_expert=False, tp_comm_buffer_name=None,
                           disable_grad_reduce=False):
    if stride != 1 or skip_weight_param_allocation or embedding_activation_buffer is not None:
        raise UnsupportedError(cx.line, "ColumnParallelLinear", "stride/skip_weight_param_allocation/embedding "
                                                                "buffers are not modelled")
    sequence_parallel = _sequence_parallel(cx, config)
    if sequence_parallel and gather_output:
        raise UnsupportedError(cx.line, "ColumnParallelLinear", "gather_output with sequence_parallel (Megatron "
                                                                "rejects it)")
    mesh_dim = tp_dim(cx)
    module = ModuleObj("ColumnParallelLinear", None, {}, fqn=f"#col{cx.line}{id(cx)}", line=cx.line,
                       options={"gather_output": bool(gather_output), "skip_bias_add": bool(skip_bias_add),
                                "sequence_parallel": sequence_parallel, "mesh_dim": mesh_dim,
                                "disable_grad_reduce": bool(disable_grad_reduce)})
    _attach(cx, module, "weight", (output_size, input_size), {mesh_dim: Shard(0)})
    if bias:
        _attach(cx, module, "bias", (output_size,), {mesh_dim: Shard(0)})
    else:
        module.attrs["bias"] = None
    return module


@function("megatron.RowParallelLinear")
def row_parallel_linear(cx: Call, input_size, output_size, *, config, init_method=None, bias=True,
                        input_is_parallel=False, skip_bias_add=False, stride=1, keep_master_weight_for_test=False,
                        is_expert=False, tp_comm_buffer_name=None):
    if stride != 1:
        raise UnsupportedError(cx.line, "RowParallelLinear", "stride is not modelled")
    sequence_parallel = _sequence_parallel(cx, config)
    if sequence_parallel and not input_is_parallel:
        raise UnsupportedError(cx.line, "RowParallelLinear", "sequence_parallel needs input_is_parallel=True "
                                                             "(Megatron rejects it)")
    mesh_dim = tp_dim(cx)
    module = ModuleObj("RowParallelLinear", None, {}, fqn=f"#row{cx.line}{id(cx)}", line=cx.line,
                       options={"input_is_parallel": bool(input_is_parallel), "skip_bias_add": bool(skip_bias_add),
                                "sequence_parallel": sequence_parallel, "mesh_dim": mesh_dim})
    _attach(cx, module, "weight", (output_size, input_size), {mesh_dim: Shard(1)})
    if bias:
        _attach(cx, module, "bias", (output_size,), {})
        # Megatron marks it: with sequence parallelism each rank's bias gradient covers its shard only
        module.attrs["bias"].__dict__.setdefault("meta", {})["sequence_parallel"] = sequence_parallel
    else:
        module.attrs["bias"] = None
    return module


@function("megatron.VocabParallelEmbedding")
def vocab_parallel_embedding(cx: Call, num_embeddings, embedding_dim, *, init_method=None, config=None,
                             reduce_scatter_embeddings=False):
    if reduce_scatter_embeddings:
        raise UnsupportedError(cx.line, "VocabParallelEmbedding", "reduce_scatter_embeddings is not modelled")
    mesh_dim = tp_dim(cx)
    module = ModuleObj("VocabParallelEmbedding", None, {}, fqn=f"#vpe{cx.line}{id(cx)}", line=cx.line,
                       options={"mesh_dim": mesh_dim})
    _attach(cx, module, "weight", (num_embeddings, embedding_dim), {mesh_dim: Shard(0)})
    return module


def _attach(cx: Call, module: ModuleObj, name: str, shape: tuple, placements: dict) -> None:
    t = param_tensor(cx, shape, placements, "f32", cx.line)
    t.param.owner, t.param.attr = module, name
    module.attrs[name] = t


def _all_gather(cx: Call, x: Tensor, dim: int, mesh_dim: str, grad: str | None = None) -> Tensor:
    it = cx.it
    it.megatron_autograd = True
    d = it.norm_dim(dim, x.ndim, cx.line)
    shape = list(x.shape)
    shape[d] = sp.expand(shape[d] * it.dims.size[mesh_dim])
    attrs = {"mesh_dim": mesh_dim, "dim": d, **({"grad": grad} if grad else {})}
    return it.op("all_gather", [x], attrs, shape, x.dtype, cx.line)


def _copy(cx: Call, x: Tensor, mesh_dim: str) -> Tensor:
    """Megatron's f: identity forward, all-reduce of the gradient backward."""
    cx.it.megatron_autograd = True
    return cx.it.op("identity", [x], {"grad": "all_reduce", "mesh_dim": mesh_dim}, x.shape, x.dtype, cx.line)


def _scatter(cx: Call, x: Tensor, dim: int, mesh_dim: str) -> Tensor:
    """Megatron's scatter mappings: this rank's block forward, all-gather of the gradient backward."""
    cx.it.megatron_autograd = True
    return cx.it.local_chunk(x, cx.it.norm_dim(dim, x.ndim, cx.line), (mesh_dim,), cx.line, grad="all_gather")


def _reduce_scatter(cx: Call, x: Tensor, dim: int, mesh_dim: str) -> Tensor:
    it = cx.it
    it.megatron_autograd = True
    d = it.norm_dim(dim, x.ndim, cx.line)
    it.divisible(x.shape[d], it.dims.size[mesh_dim], "reduce_scatter", cx.line)
    shape = list(x.shape)
    shape[d] = sp.cancel(shape[d] / it.dims.size[mesh_dim])
    return it.op("reduce_scatter", [x], {"mesh_dim": mesh_dim, "dim": d, "op": "sum"}, shape, x.dtype, cx.line)


def _all_reduce(cx: Call, x: Tensor, mesh_dim: str) -> Tensor:
    cx.it.megatron_autograd = True
    return cx.it.op("all_reduce", [x], {"mesh_dim": mesh_dim, "op": "sum"}, x.shape, x.dtype, cx.line)


def _tensor(cx: Call, x: Any, what: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise UnsupportedError(cx.line, what, f"expected a tensor, got {type(x).__name__}")
    return x


@layer("ColumnParallelLinear")
def column_forward(cx: Call, module: ModuleObj, input_, weight=None, runtime_gather_output=None):
    it = cx.it
    if weight is not None:
        raise UnsupportedError(cx.line, "ColumnParallelLinear", "an explicit weight= is not modelled")
    options = module.options
    x = _tensor(cx, input_, "ColumnParallelLinear")
    if options["sequence_parallel"]:
        x = _all_gather(cx, x, 0, options["mesh_dim"])
    elif options.get("disable_grad_reduce"):
        x = it.op("identity", [x], {}, x.shape, x.dtype, cx.line)
    else:
        x = _copy(cx, x, options["mesh_dim"])
    bias = module.attrs.get("bias")
    out = it.linear(x, module.attrs["weight"], None if options["skip_bias_add"] else bias, cx.line)
    gather = options["gather_output"] if runtime_gather_output is None else bool(runtime_gather_output)
    if gather:
        out = _all_gather(cx, out, -1, options["mesh_dim"], grad="split")
    return out, (bias if options["skip_bias_add"] else None)


@layer("RowParallelLinear")
def row_forward(cx: Call, module: ModuleObj, input_):
    it = cx.it
    options = module.options
    x = _tensor(cx, input_, "RowParallelLinear")
    if not options["input_is_parallel"]:
        x = _scatter(cx, x, -1, options["mesh_dim"])
    out = it.linear(x, module.attrs["weight"], None, cx.line)
    if options["sequence_parallel"]:
        out = _reduce_scatter(cx, out, 0, options["mesh_dim"])
    else:
        out = _all_reduce(cx, out, options["mesh_dim"])
    bias = module.attrs.get("bias")
    if bias is not None and not options["skip_bias_add"]:
        out = it.binary("add", out, bias, cx.line)
        return out, None
    return out, bias


@layer("VocabParallelEmbedding")
def vocab_embedding_forward(cx: Call, module: ModuleObj, input_):
    it = cx.it
    ids = _tensor(cx, input_, "VocabParallelEmbedding")
    weight = module.attrs["weight"]
    it.megatron_autograd = True
    return it.op("vocab_parallel_embedding", [ids, weight], {"mesh_dim": module.options["mesh_dim"]},
                 tuple(ids.shape) + (weight.shape[1],), weight.dtype, cx.line)


@function("megatron.vocab_parallel_cross_entropy")
def vocab_parallel_cross_entropy(cx: Call, vocab_parallel_logits, target, label_smoothing=0.0):
    it = cx.it
    if label_smoothing:
        raise UnsupportedError(cx.line, "vocab_parallel_cross_entropy", "label_smoothing is not modelled")
    logits, labels = _tensor(cx, vocab_parallel_logits, "vocab_parallel_cross_entropy"), _tensor(
        cx, target, "vocab_parallel_cross_entropy")
    for a, b in zip(logits.shape[:-1], labels.shape):
        it.unify(a, b, "vocab_parallel_cross_entropy", cx.line)
    it.megatron_autograd = True
    return it.op("vocab_parallel_cross_entropy", [logits, labels], {"mesh_dim": tp_dim(cx), "reduction": "none"},
                 labels.shape, logits.dtype, cx.line)


# --- mappings --------------------------------------------------------------------------------

@function("megatron.copy_to_tensor_model_parallel_region")
def copy_to(cx: Call, input_, group=None):
    return _copy(cx, _tensor(cx, input_, "copy_to_tensor_model_parallel_region"), tp_dim(cx))


@function("megatron.reduce_from_tensor_model_parallel_region")
def reduce_from(cx: Call, input_, group=None):
    return _all_reduce(cx, _tensor(cx, input_, "reduce_from_tensor_model_parallel_region"), tp_dim(cx))


@function("megatron.scatter_to_tensor_model_parallel_region")
def scatter_to(cx: Call, input_, group=None):
    return _scatter(cx, _tensor(cx, input_, "scatter_to_tensor_model_parallel_region"), -1, tp_dim(cx))


@function("megatron.gather_from_tensor_model_parallel_region",
          "megatron.all_gather_last_dim_from_tensor_parallel_region")
def gather_from(cx: Call, input_, group=None):
    return _all_gather(cx, _tensor(cx, input_, "gather_from_tensor_model_parallel_region"), -1, tp_dim(cx),
                       grad="split")


@function("megatron.reduce_scatter_last_dim_to_tensor_parallel_region")
def reduce_scatter_last(cx: Call, input_, group=None):
    return _reduce_scatter(cx, _tensor(cx, input_, "reduce_scatter_last_dim_to_tensor_parallel_region"), -1,
                           tp_dim(cx))


@function("megatron.scatter_to_sequence_parallel_region")
def scatter_to_sequence(cx: Call, input_, group=None):
    return _scatter(cx, _tensor(cx, input_, "scatter_to_sequence_parallel_region"), 0, tp_dim(cx))


@function("megatron.gather_from_sequence_parallel_region")
def gather_from_sequence(cx: Call, input_, tensor_parallel_output_grad=True, group=None, output_split_sizes=None,
                         use_global_buffer=False):
    if output_split_sizes is not None:
        raise UnsupportedError(cx.line, "gather_from_sequence_parallel_region", "uneven split sizes")
    return _all_gather(cx, _tensor(cx, input_, "gather_from_sequence_parallel_region"), 0, tp_dim(cx),
                       grad=None if tensor_parallel_output_grad else "split")


@function("megatron.reduce_scatter_to_sequence_parallel_region")
def reduce_scatter_to_sequence(cx: Call, input_, group=None, input_split_sizes=None, use_global_buffer=False):
    if input_split_sizes is not None:
        raise UnsupportedError(cx.line, "reduce_scatter_to_sequence_parallel_region", "uneven split sizes")
    return _reduce_scatter(cx, _tensor(cx, input_, "reduce_scatter_to_sequence_parallel_region"), 0, tp_dim(cx))


__all__ = ["config_field", "tp_dim", "Replicate"]
