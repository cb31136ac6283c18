"""A hand-sharded MLP whose collectives live in a package of the user's own (k2_parallel_regions/).

violations: the package's reduce takes the maximum (regions_max.py, the line marked 'the bug'); the
violation names that file and line, not this file's call into it.
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F
from k2_parallel_regions.regions_max import copy_to_region, reduce_from_region


def forward(x, w_up, w_down):
    world, rank = dist.get_world_size(), dist.get_rank()
    x = copy_to_region(x)
    h = F.gelu(x @ torch.chunk(w_up, world, dim=0)[rank].t())
    return reduce_from_region(h @ torch.chunk(w_down, world, dim=1)[rank].t())


def example_inputs():
    return torch.randn(4, 8, requires_grad=True), torch.randn(16, 8), torch.randn(8, 16)
