"""Parallel styles as entries: a style object computes nothing itself, it is applied to a module.

``--entry ColwiseParallel`` (or ``"ColwiseParallel(gather_output=True)"``, literal arguments) names a
style; the harness applies it, on the simulated world's 1-D mesh, to an ``nn.Linear`` whose input size
is the given input's last dim (``--input input=4x16``, else 16) and whose output size is twice that,
the way the library applies it to a model's linear:

- a torch ``ParallelStyle`` (torch's own ``ColwiseParallel``, torchtitan's ``NoParallel``, ...):
  ``parallelize_module(linear, mesh, style)``;
- a transformers ``TensorParallelLayer`` (the styles of a ``base_model_tp_plan``): each parameter cut by
  the style's ``shard_tensor`` and the hooks added by ``prepare_module_tp``, as ``from_pretrained(...,
  tp_plan=...)`` does through ``shard_and_distribute_module``.

What was built is said in the report (``harness.built()``).

A torch style states the layouts of what the module takes and returns (``input_layouts``,
``output_layouts``, ``sequence_sharding`` with ``use_local_output``): ``RowwiseParallel`` takes each
rank's block of the last dim, ``ColwiseParallel`` returns one.  Those are the style's own documented
attributes, so they state the blocks as ``--expect`` would (``stated_layouts``); the user's own
``--expect`` wins.
"""
from __future__ import annotations

import inspect
from typing import Any

import torch

from . import harness


def is_parallel_style(obj: Any) -> bool:
    """A torch ``ParallelStyle`` class, or a class with transformers' style protocol."""
    if not inspect.isclass(obj) or issubclass(obj, torch.nn.Module):
        return False
    from torch.distributed.tensor.parallel.style import ParallelStyle

    return issubclass(obj, ParallelStyle) or _is_transformers_style(obj)


def _is_transformers_style(cls: type) -> bool:
    return all(callable(getattr(cls, name, None)) for name in ("shard_tensor", "prepare_module_tp"))


def applied_to_linear(style: Any, in_features: int | None, world: int) -> torch.nn.Module:
    """An ``nn.Linear(in, 2 * in)`` with ``style`` applied on a 1-D mesh of the simulated world."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    features = in_features or 16
    linear = torch.nn.Linear(features, 2 * features)
    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("tp",))
    name = type(style).__name__
    if _is_transformers_style(type(style)):
        style.device_mesh, style.rank = mesh, dist.get_rank()
        for pname, param in list(linear.named_parameters(recurse=False)):
            style.empty_param = param
            shard = style.shard_tensor(param.detach(), dtype=param.dtype, device="cpu")
            setattr(linear, pname, torch.nn.Parameter(shard, requires_grad=param.is_floating_point()))
        style.prepare_module_tp(linear, mesh)
        how = "its parameters cut by the style's shard_tensor, hooks added by prepare_module_tp"
    else:
        from torch.distributed.tensor.parallel import parallelize_module

        linear = parallelize_module(linear, mesh, style)
        how = "parallelize_module"
    harness.note(f"the entry {name} applied to nn.Linear({features}, {2 * features}) on a 1-D mesh tp={world} "
                 f"({how})")
    return linear


def stated_layouts(style: Any) -> dict[str, str]:
    """``{"input": "Shard(d)", "out": "Shard(d)"}`` as a torch style's own layouts state them (a local
    tensor given or returned as a rank's block); empty for other styles and for whole values."""
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.parallel.style import ParallelStyle

    if not isinstance(style, ParallelStyle):
        return {}

    def shard(layouts) -> str | None:
        first = layouts[0] if isinstance(layouts, tuple) and layouts else layouts
        return f"Shard({first.dim})" if type(first) is Shard else None   # not a strided shard: no block

    sequence = getattr(style, "sequence_sharding", None)
    stated = {"input": shard(getattr(style, "input_layouts", sequence))}
    if getattr(style, "use_local_output", False):
        stated["out"] = shard(getattr(style, "output_layouts", sequence))
    return {name: layout for name, layout in stated.items() if layout is not None}
