"""Harnesses instead of questions: an entry's constructor and call arguments, built from what the code says.

For each parameter nobody gave (``--arg``, ``example_inputs()``), in order:

- a default is kept (``dropout_p=0.0``, ``softmax_scale=None``); ``Optional[...]`` without one is None;
- a configuration class (type hint): its smallest valid instance (``configs.py``); a megatron-core
  ``*Submodules``: megatron-core's own local layer spec;
- a process group, a device mesh (type hint or name: ``group``, ``tp_group``, ``mesh``): the simulated
  world's; ``init_method``: the built config's, else ``torch.nn.init.xavier_normal_``;
- a size (``in_features``, ``hidden_size``, ``num_embeddings``, ...): a small value divisible by 1, 2, 4;
  a flag without a default: ``bias`` True, any other False (nothing assumed already parallel);
- a tensor (type hint or name): random, its last dim the module's own input size (``in_features``,
  ``input_size``, ``hidden_size``, ``config.hidden_size``, ...), ``[seq 4, batch 2, features]``;
  ``q``/``k``/``v``/``query``/``key``/``value`` ``[batch 2, seq 8, heads 4, head_dim 8]``; token ids and
  targets integers below the embedding's ``num_embeddings`` (or the logits' last dim).

What is still unknown raises ``EntryError`` with one line naming the parameter and its type.  Every
value built is said in the report (``built()``): the verdict is about the code on these arguments.
"""
from __future__ import annotations

import inspect
import re
import types
import typing
from typing import Any

import torch

from . import configs, strategies

_BUILT: list[str] = []
_DRAWN: list[str] = []              # call inputs whose values the harness drew (not the user's)
_CONSTRUCTED: dict[str, int] = {}   # the entry's constructor's integer arguments (given, defaults, built)
_SIZES = {"in_features": 16, "input_size": 16, "in_dim": 16, "hidden_size": 16, "embedding_dim": 16, "dim": 16,
          "embed_dim": 16, "d_model": 16, "hidden": 16, "out_features": 32, "output_size": 32, "out_dim": 32,
          "ffn_hidden_size": 32, "intermediate_size": 32, "ffn": 32, "num_embeddings": 64, "vocab_size": 64,
          "num_heads": 4, "num_attention_heads": 4, "n_heads": 4, "head_dim": 8, "seq_len": 8, "seq_length": 8}
_FEATURE_ATTRS = ("in_features", "input_size", "in_dim", "input_dim", "hidden_size", "hidden", "embed_dim", "d_model",
                  "n_embd", "dim", "embedding_dim")
_GROUP_NAMES = re.compile(r"^(\w+_)?(group|process_group|pg)$")
_MESH_NAMES = re.compile(r"^(\w+_)?(mesh|device_mesh)$")
_INTEGER_NAMES = re.compile(r"^(target|targets|labels?|input_ids|ids|tokens?|idx|token_ids|position_ids)$")
_ATTENTION_NAMES = re.compile(r"^(q|k|v|query|key|value)$")
_SHARD_NAMES = re.compile(r"(parallel|local|shard|partition)")


class Unbuildable(Exception):
    """A parameter this module cannot build: the message names it and its type (one line)."""


def reset() -> None:
    _BUILT.clear()
    _DRAWN.clear()
    _CONSTRUCTED.clear()


def drawn() -> list[str]:
    """The call inputs whose values this run's harness drew."""
    return list(_DRAWN)


def note(said: str) -> None:
    """Something built for the run outside the entry's own parameters (a style's module)."""
    _BUILT.append(said)


def built() -> list[str]:
    """What this run's harness built, one sentence (stated as an assumption of the run)."""
    return [f"harness built {'; '.join(_BUILT)}"] if _BUILT else []


def _hint_text(param: inspect.Parameter) -> str:
    hint = param.annotation
    if hint is inspect.Parameter.empty:
        return "no type hint"
    return hint if isinstance(hint, str) else getattr(hint, "__name__", None) or str(hint).replace("typing.", "")


def _hint(fn, param: inspect.Parameter) -> Any:
    """The parameter's type hint, resolved (``from __future__ import annotations`` makes it a string)."""
    hint = param.annotation
    if isinstance(hint, str):
        try:
            hint = typing.get_type_hints(fn).get(param.name, hint)
        except Exception:   # a hint naming something not importable: keep its text
            return hint
    return hint


def resolved_hint(fn, param: inspect.Parameter) -> Any:
    """The parameter's type hint, resolved, without ``Optional``."""
    return _bare(_hint(fn, param))


def _optional(hint: Any) -> bool:
    return type(None) in typing.get_args(hint) or (isinstance(hint, str) and hint.startswith("Optional["))


def _bare(hint: Any) -> Any:
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)   # Optional[X] or X | None
    return args[0] if union and len(args) == 1 else hint


def _is_tensor_hint(hint: Any) -> bool:
    bare = _bare(hint)
    # ``x: torch.tensor`` (the factory function, a common slip for the class) means a tensor too
    return bare is torch.Tensor or bare is torch.tensor or (isinstance(hint, str) and "Tensor" in hint
                                                          and "List" not in hint)


def _is_group_hint(hint: Any) -> bool:
    bare = _bare(hint)
    return inspect.isclass(bare) and bare.__name__ == "ProcessGroup"


def _is_mesh_hint(hint: Any) -> bool:
    bare = _bare(hint)
    return inspect.isclass(bare) and bare.__name__ == "DeviceMesh"


_INPUT_SIZES = ("in_features", "input_size", "in_dim", "input_dim", "hidden_size", "embed_dim", "d_model", "dim",
                "n_embd")


def constructor_arguments(cls: type, given: dict, positional: int, world: int,
                          input_features: int | None = None) -> dict:
    """Keyword arguments for the required parameters of ``cls.__init__`` nobody gave.  ``input_features``:
    the last dim of the input the user gave (``--input``), which an input-size parameter takes."""
    try:
        params = list(inspect.signature(cls).parameters.values())
    except (TypeError, ValueError):
        return {}
    built, config = {}, None
    for index, param in enumerate(params):
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if param.name in given or (param.kind != param.KEYWORD_ONLY and index < positional) \
                or param.default is not inspect.Parameter.empty:
            value = given.get(param.name, param.default)
            if isinstance(value, int) and not isinstance(value, bool):
                _CONSTRUCTED[param.name] = value
            continue
        if input_features and param.name in _INPUT_SIZES and not any(n in _CONSTRUCTED for n in _INPUT_SIZES):
            value, said = input_features, f"{input_features} (the given input's last dim)"
        else:
            value, said = _constructor_value(cls.__init__, param, world, config)
        if configs.is_config_class(type(value)):
            config = value
        built[param.name] = value
        if isinstance(value, int) and not isinstance(value, bool):
            _CONSTRUCTED[param.name] = value
        _BUILT.append(f"{param.name}={said}")
    return built


def _constructor_value(fn, param: inspect.Parameter, world: int, config: Any) -> tuple[Any, str]:
    hint = _hint(fn, param)
    bare = _bare(hint)
    name = param.name
    if inspect.isclass(bare) and configs.is_config_class(bare):
        return configs.build_config(bare, world)
    if inspect.isclass(bare):
        submodules = configs.megatron_submodules(bare)
        if submodules is not None:
            return submodules
    common = _common_value(fn, param, hint, world)
    if common is not None:
        return common
    if name == "init_method":
        if config is not None and callable(getattr(config, "init_method", None)):
            return config.init_method, "the config's init_method"
        return torch.nn.init.xavier_normal_, "torch.nn.init.xavier_normal_"
    if name in _SIZES and (bare in (int, inspect.Parameter.empty) or isinstance(hint, str)):
        return _SIZES[name], str(_SIZES[name])
    if bare is bool or (hint is inspect.Parameter.empty and name in ("bias", "input_is_parallel", "skip_bias_add",
                                                                       "gather_output")):
        value = name == "bias"
        return value, f"{value} (a flag without a default)"
    raise Unbuildable(f"cannot build constructor parameter {name} ({_hint_text(param)}): give it with "
                      f"--arg {name}=LITERAL, or write a --harness")


def _common_value(fn, param: inspect.Parameter, hint: Any, world: int) -> tuple[Any, str] | None:
    """Process groups, meshes and None for an Optional."""
    import torch.distributed as dist

    name = param.name
    if _is_group_hint(hint) or (hint is inspect.Parameter.empty and _GROUP_NAMES.match(name)):
        return dist.group.WORLD, "the simulated world's process group"
    if _is_mesh_hint(hint) or (hint is inspect.Parameter.empty and _MESH_NAMES.match(name)):
        from torch.distributed.device_mesh import init_device_mesh

        return init_device_mesh("cpu", (world,), mesh_dim_names=("tp",)), f"a 1-D mesh tp={world}"
    if strategies.is_fabric_hint(_bare(hint)):
        return strategies.fabric(world)
    if _optional(hint) and not _is_tensor_hint(hint):
        return None, "None (Optional)"
    return None


def default_meshes(fn, params: list[inspect.Parameter], world: int) -> dict[str, Any]:
    """The simulated world's 1-D mesh for call parameters hinted ``DeviceMesh`` whose default is None: a
    mesh parameter is how such code is told to distribute, and without one it runs alone (torchtitan's
    ``dist_sum_tensor(x, mesh=None)``: "no reduction is performed"), so nothing distributed is checked."""
    out = {}
    for param in params:
        if param.default is None and _is_mesh_hint(_hint(fn, param)):
            from torch.distributed.device_mesh import init_device_mesh

            out[param.name] = init_device_mesh("cpu", (world,), mesh_dim_names=("tp",))
            _BUILT.append(f"{param.name}=a 1-D mesh tp={world} (its default None runs nothing distributed)")
    return out


def call_arguments(fn, owner: Any, params: list[inspect.Parameter], world: int,
                   given_shape: tuple[int, ...] | None = None) -> list[tuple[str, Any]]:
    """Values for the entry's call parameters ``params`` (no default, nothing given).  ``given_shape``: the
    shape of the first input the user gave (``--input logits=4x2x16``), which integer targets follow."""
    float_shape = tuple(given_shape) if given_shape else None
    out = []
    for param in params:
        hint = _hint(fn, param)
        common = _common_value(fn, param, hint, world)
        if common is not None:
            out.append((param.name, common[0]))
            _BUILT.append(f"{param.name}={common[1]}")
            continue
        if _optional(hint) and _is_tensor_hint(hint):
            out.append((param.name, None))
            _BUILT.append(f"{param.name}=None (Optional[Tensor])")
            continue
        scalar = _scalar(param, hint)
        if scalar is not None:
            out.append((param.name, scalar[0]))
            _BUILT.append(f"{param.name}={scalar[1]}")
            continue
        tensor_like = _is_tensor_hint(hint) or (hint is inspect.Parameter.empty and _looks_like_tensor(param.name))
        if not tensor_like:
            raise Unbuildable(f"cannot build parameter {param.name} ({_hint_text(param)}): give it with "
                              f"--arg {param.name}=LITERAL or --input {param.name}=8x16, or write a --harness")
        if _SHARD_NAMES.search(param.name):
            raise Unbuildable(f"cannot build parameter {param.name} ({_hint_text(param)}): its name says it holds "
                              f"one rank's shard, and inputs that differ per rank are not built here: write a "
                              f"--harness")
        value, said = _tensor(param.name, owner, float_shape)
        _DRAWN.append(param.name)
        if value.is_floating_point() and float_shape is None:
            float_shape = tuple(value.shape)
        out.append((param.name, value))
        _BUILT.append(f"{param.name}={said}")
    return out


def _scalar(param: inspect.Parameter, hint: Any) -> tuple[Any, str] | None:
    """A flag (``bool`` hint) is off, ``bias`` on; a size by its name (``hidden_size``) is small."""
    bare = _bare(hint)
    if bare is bool or bare == "bool":
        return param.name == "bias", f"{param.name == 'bias'} (a flag without a default)"
    if (bare is int or bare == "int") and param.name in _SIZES:
        return _SIZES[param.name], str(_SIZES[param.name])
    return None


_TENSOR_WORDS = re.compile(r"^(input_?|inputs?|x|tensor|weight|hidden(_states)?|logits|\w+_logits|q|k|v|query|key|"
                           r"value|\w+_states|tokens?|input_ids|ids|idx|target|targets|labels?|inp|h|activations?)$")


def _looks_like_tensor(name: str) -> bool:
    return bool(_TENSOR_WORDS.match(name))


def _tensor(name: str, owner: Any, float_shape: tuple | None) -> tuple[torch.Tensor, str]:
    vocab = _attr(owner, "num_embeddings")
    if _INTEGER_NAMES.match(name) or (vocab is not None and name in ("input_", "input", "x")):
        if vocab is not None:
            shape, high = (2, 4), int(vocab)
        elif float_shape is not None:
            shape, high = float_shape[:-1], int(float_shape[-1])
        else:
            shape, high = (2, 4), 16
        return torch.randint(0, high, shape), f"integers in [0, {high}) of shape {list(shape)}"
    if name == "weight" and float_shape is not None:   # a linear's weight: [out, in]
        shape = (32, float_shape[-1])
        return torch.randn(shape), f"randn{list(shape)} (out, in)"
    if _ATTENTION_NAMES.match(name):
        shape = (2, 8, 4, 8)
        return torch.randn(shape), f"randn{list(shape)} (batch, seq, heads, head_dim)"
    features = next((int(v) for v in (_attr(owner, a) for a in _FEATURE_ATTRS) if v is not None), None)
    if features is None and owner is not None:   # the size its constructor was given (hidden=8)
        features = next((_CONSTRUCTED[a] for a in _FEATURE_ATTRS if _CONSTRUCTED.get(a, 0) > 0), None)
    config = getattr(owner, "config", None)
    if features is None and config is not None and isinstance(getattr(config, "hidden_size", None), int):
        features = int(config.hidden_size)
    said = "" if features is not None else " (no input size found on the module: 16)"
    shape = (4, 2, features or 16)
    return torch.randn(shape), f"randn{list(shape)} (seq, batch, features){said}"


def _attr(owner: Any, name: str) -> Any:
    value = getattr(owner, name, None) if owner is not None else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
