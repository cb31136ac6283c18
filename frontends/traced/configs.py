"""The smallest valid configuration objects of the libraries users train with.

A constructor that needs a ``config`` gets one built here, small (hidden 16, 4 heads, 1 layer, FFN 32,
vocabulary 64: every size divisible by the world sizes 1, 2 and 4 the tool runs) and deterministic
(dropout off: a random mask drawn on one device differs from the masks the ranks draw).  Known
classes: megatron-core's ``TransformerConfig`` / ``ModelParallelConfig``, HF ``PretrainedConfig``
subclasses, and any dataclass (torchtitan's ``ModelArgs``, litgpt's ``Config``) whose size fields
carry the usual names.  Each builder returns the object and one sentence saying what was built.
"""
from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import torch

# field name -> small value; only fields the class has are set
SMALL = {
    "hidden_size": 16, "n_embd": 16, "dim": 16, "d_model": 16, "embed_dim": 16, "embedding_dim": 16, "hidden_dim": 16,
    "num_layers": 1, "n_layers": 1, "n_layer": 1, "num_hidden_layers": 1,
    "num_attention_heads": 4, "n_head": 4, "n_heads": 4, "num_heads": 4,
    "num_key_value_heads": 4, "n_kv_heads": 4, "n_query_groups": 4, "num_query_groups": 4,
    "intermediate_size": 32, "ffn_hidden_size": 32, "ffn_dim": 32, "intermediate_dim": 32,
    "vocab_size": 64, "padded_vocab_size": 64, "max_position_embeddings": 32, "block_size": 32, "max_seq_len": 32,
    "seq_length": 32, "head_dim": 4, "kv_channels": 4, "head_size": 4, "multiple_of": 16,
    "hidden_dropout": 0.0, "attention_dropout": 0.0, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
    "dropout": 0.0, "attn_dropout": 0.0, "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0,
}
_MEGATRON_CONFIGS = ("megatron.core.transformer.transformer_config", "megatron.core.model_parallel_config")


def is_config_class(hint: Any) -> bool:
    """A configuration class this module can build."""
    if not inspect.isclass(hint):
        return False
    if hint.__module__ in _MEGATRON_CONFIGS or _is_hf_config(hint):
        return True
    return dataclasses.is_dataclass(hint) and hint.__name__.endswith(("Config", "Args", "Arguments"))


def _is_hf_config(hint: Any) -> bool:
    return any(base.__name__ in ("PretrainedConfig", "PreTrainedConfig") and base.__module__.startswith("transformers")
               for base in inspect.getmro(hint))


def build_config(cls: type, world: int) -> tuple[Any, str]:
    """The smallest valid instance of ``cls`` on a world of ``world`` ranks, and what was built."""
    if cls.__module__ in _MEGATRON_CONFIGS:
        return _megatron(cls, world)
    accepted = _accepted(cls)
    values = {name: value for name, value in SMALL.items() if name in accepted}
    if _is_hf_config(cls):
        values.setdefault("hidden_size", 16)
        values.setdefault("num_attention_heads", 4)
        values.setdefault("num_hidden_layers", 1)
    instance = cls(**values)
    return instance, f"{cls.__name__}({_shown(values)})"


def _accepted(cls: type) -> set[str]:
    if dataclasses.is_dataclass(cls):
        return {f.name for f in dataclasses.fields(cls) if f.init}
    try:
        return set(inspect.signature(cls).parameters)
    except (TypeError, ValueError):
        return set()


def _megatron(cls: type, world: int) -> tuple[Any, str]:
    values: dict[str, Any] = {"tensor_model_parallel_size": world, "use_cpu_initialization": True,
                              "perform_initialization": True, "params_dtype": torch.float32}
    if cls.__name__ != "ModelParallelConfig":
        values.update(num_layers=1, hidden_size=16, num_attention_heads=4, ffn_hidden_size=32,
                      hidden_dropout=0.0, attention_dropout=0.0)
    accepted = _accepted(cls)
    values = {k: v for k, v in values.items() if k in accepted}
    return cls(**values), f"{cls.__name__}({_shown(values)})"


def _shown(values: dict) -> str:
    return ", ".join(f"{k}={v}" if not isinstance(v, torch.dtype) else f"{k}={str(v)}" for k, v in values.items())


def megatron_submodules(cls: type) -> tuple[Any, str] | None:
    """A megatron-core ``*Submodules`` dataclass as megatron-core's own local (non-Transformer-Engine)
    GPT layer spec fills it: found by walking ``get_gpt_layer_local_spec()``."""
    if not cls.__module__.startswith("megatron.core") or not cls.__name__.endswith("Submodules"):
        return None
    try:
        from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    except ImportError:
        return None
    stack, seen = [get_gpt_layer_local_spec()], set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, cls):
            return node, f"{cls.__name__} from megatron-core's local GPT layer spec (get_gpt_layer_local_spec)"
        if dataclasses.is_dataclass(node) and not isinstance(node, type):
            stack.extend(getattr(node, f.name) for f in dataclasses.fields(node))
    return None
