"""Strategy objects of training frameworks, made on the simulated world.

A Lightning ``Fabric`` parameter (litgpt's ``tensor_parallel_linear(fabric, linear, style)``) gets a
stand-in that answers what such code asks of the launcher: ``world_size``, ``global_rank``,
``local_rank``, ``node_rank``, ``num_nodes``, ``is_global_zero`` of this simulated rank.  Anything else
it is asked raises an ``AttributeError`` naming it (an input error: write a ``--harness``), so a run never
goes on with a value nobody set.
"""
from __future__ import annotations

import inspect
from typing import Any


class SimulatedFabric:
    """What a ``lightning.Fabric`` launched on the simulated world says about the processes."""

    def __init__(self, world: int, rank: int) -> None:
        self.world_size, self.global_rank, self.local_rank = world, rank, rank
        self.node_rank, self.num_nodes, self.is_global_zero = 0, 1, rank == 0

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"the Fabric stand-in of the simulated world has only world_size, global_rank, "
                             f"local_rank, node_rank, num_nodes and is_global_zero, not {name!r}: write a --harness")


def is_fabric_hint(hint: Any) -> bool:
    return inspect.isclass(hint) and hint.__name__ == "Fabric" and hint.__module__.startswith("lightning")


def fabric(world: int) -> tuple[SimulatedFabric, str]:
    import torch.distributed as dist

    rank = dist.get_rank()
    return SimulatedFabric(world, rank), f"a Fabric stand-in (world_size={world}, global_rank={rank})"
