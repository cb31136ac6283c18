"""Parallel state that packages keep without an ``initialize_model_parallel`` of their own, set up on the
simulated world as their launchers would (``run.set_up_parallel_state`` handles the packages that have one:
megatron-core, fairscale, a package's own ``mpu``).

- deepspeed: ``deepspeed.comm.init_distributed`` over the process group already set up, and the device
  mesh its ``utils.groups`` reads the sequence-parallel group from (``mesh_device``, dims
  ``data_parallel=1, sequence_parallel=N``), as ``deepspeed.initialize(..., mesh_param=(1, N))`` makes it.
- accelerate: its ``PartialState`` made afresh on each simulated rank from the variables ``accelerate launch``
  (torchrun) sets (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE) over the process group already set up;
  without it, every rank's state says one process and no collective runs.

Each set-up is one sentence in the report; ``reset`` undoes it after the run.
"""
from __future__ import annotations

import os
import sys
from typing import Any

SET_UP: list[str] = []
_LAUNCH_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")
_SAVED_ENVIRONMENT: dict[str, str | None] = {}


def set_up(module: Any, world: int) -> list[str]:
    """Set up the state of the packages ``module`` uses; what was done, one sentence each."""
    if "deepspeed.comm" in sys.modules and "deepspeed.utils.groups" in sys.modules:
        _deepspeed(world)
    if "accelerate.state" in sys.modules and world > 1:
        _accelerate(world)
    return list(SET_UP)


def _accelerate(world: int) -> None:
    import torch.distributed as dist

    rank = dist.get_rank()
    for name in _LAUNCH_VARIABLES:
        _SAVED_ENVIRONMENT.setdefault(name, os.environ.get(name))
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world))
    state = sys.modules["accelerate.state"].PartialState
    state._reset_state()
    state(cpu=True)
    SET_UP.append(f"accelerate's PartialState made on each rank as `accelerate launch` would: RANK, WORLD_SIZE="
                  f"{world}, LOCAL_RANK over the simulated process group")


def _deepspeed(world: int) -> None:
    from torch.distributed.device_mesh import init_device_mesh

    comm = sys.modules["deepspeed.comm"]
    groups = sys.modules["deepspeed.utils.groups"]
    if groups.mpu is not None or groups.mesh_device is not None:   # the code set it up itself
        return
    if not comm.is_initialized():
        comm.init_distributed(dist_backend="gloo", auto_mpi_discovery=False, verbose=False)
    groups.mesh_device = init_device_mesh("cpu", (1, world), mesh_dim_names=("data_parallel", "sequence_parallel"))
    SET_UP.append(f"deepspeed's process groups set up as its launcher would: deepspeed.comm.init_distributed on the "
                  f"simulated world, and deepspeed.utils.groups.mesh_device a (data_parallel=1, "
                  f"sequence_parallel={world}) mesh")


def reset() -> None:
    """Forget what ``set_up`` did (the next simulated world sets up its own)."""
    if SET_UP and "deepspeed.utils.groups" in sys.modules:
        sys.modules["deepspeed.utils.groups"].mesh_device = None
        comm = sys.modules.get("deepspeed.comm.comm")
        if comm is not None:
            comm.cdb = None
    if SET_UP and "accelerate.state" in sys.modules:
        sys.modules["accelerate.state"].PartialState._reset_state()
    for name, value in _SAVED_ENVIRONMENT.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    _SAVED_ENVIRONMENT.clear()
    SET_UP.clear()
