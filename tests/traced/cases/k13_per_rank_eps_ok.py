"""A tensor-parallel MLP behind a LayerNorm with one eps on every rank (its twin takes an eps that depends on the
rank, a difference within float32's rounding tolerance)."""
import torch
import torch.distributed as dist
import torch.nn.functional as F


def forward(x, w_up, w_down):
    world, rank = dist.get_world_size(), dist.get_rank()
    h = F.layer_norm(x, (x.shape[-1],), eps=1e-5)
    y = F.gelu(h @ w_up.chunk(world, dim=1)[rank]) @ w_down.chunk(world, dim=0)[rank]
    dist.all_reduce(y)
    return y


def example_inputs():
    return (torch.randn(4, 8, requires_grad=False), torch.randn(8, 16, requires_grad=False),
            torch.randn(16, 8, requires_grad=False))
