"""One FSDP2 (`fully_shard`) data-parallel step on a 1-D mesh, torchtitan style.

Each layer and then the root are wrapped with `fully_shard`, so parameters are DTensors
sharded on dim 0 and gathered on demand; each rank back-propagates the mean loss of its
slice of the batch and FSDP reduce-scatters (averages) the gradients.  The function returns
the full gradients (`full_tensor()`) and the globally averaged loss.

verified
"""
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

GLOBAL_BATCH, DIM, HIDDEN = 12, 16, 40


def forward(inputs, targets):
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cuda", (world,), mesh_dim_names=("dp",))
    torch.manual_seed(4321)
    model = nn.Sequential(nn.Linear(DIM, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, DIM))
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    loss = nn.functional.mse_loss(model(inputs.chunk(world)[rank]), targets.chunk(world)[rank])
    loss.backward()
    global_loss = loss.detach().clone()
    dist.all_reduce(global_loss, op=dist.ReduceOp.AVG)
    return global_loss, [p.grad.full_tensor() for p in model.parameters()]


def example_inputs():
    return torch.randn(GLOBAL_BATCH, DIM), torch.randn(GLOBAL_BATCH, DIM)
