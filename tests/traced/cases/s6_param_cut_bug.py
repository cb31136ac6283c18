"""Row-parallel weight cut one column too wide where the layer is built: rank 0 keeps 9 of the 16 columns
and its matmul raises where one device runs.  Expected: violations, named at the cut, not the matmul."""
import torch
import torch.distributed as dist
import torch.nn as nn

TOKENS, HIDDEN, FFN = 4, 8, 16


class RowParallel(nn.Module):
    def __init__(self):
        super().__init__()
        rank, world = dist.get_rank(), dist.get_world_size()
        per = FFN // world
        master = torch.randn(HIDDEN, FFN, generator=torch.Generator().manual_seed(0))
        self.weight = nn.Parameter(master[:, rank * per:(rank + 1) * per + 1].clone(), requires_grad=False)  # the bug

    def forward(self, h):
        rank, world = dist.get_rank(), dist.get_world_size()
        partial = h.chunk(world, dim=-1)[rank] @ self.weight.t()
        dist.all_reduce(partial)
        return partial


def example_module():
    return RowParallel()


def example_inputs():
    return (torch.randn(TOKENS, FFN, requires_grad=False),)
