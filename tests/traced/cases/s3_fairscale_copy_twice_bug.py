"""fairscale's mappings around a hand-sharded MLP (s3; its correct twin is r1_fairscale_mappings_ok.py).

violations: the input goes through copy_to_model_parallel_region twice (the line marked 'the bug'), so
its gradient is all-reduced twice in backward: world times one device's.  The all-reduce runs in
fairscale's backward, at no line of this file; it is named at the line whose forward made it.
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F
from fairscale.nn.model_parallel.initialize import initialize_model_parallel
from fairscale.nn.model_parallel.mappings import copy_to_model_parallel_region, reduce_from_model_parallel_region


def forward(x, w_up, w_down):
    world, rank = dist.get_world_size(), dist.get_rank()
    initialize_model_parallel(world)
    x = copy_to_model_parallel_region(copy_to_model_parallel_region(x))  # the bug: copied twice
    h = F.gelu(x @ torch.chunk(w_up, world, dim=0)[rank].t())
    return reduce_from_model_parallel_region(h @ torch.chunk(w_down, world, dim=1)[rank].t())


def example_inputs():
    return torch.randn(4, 8, requires_grad=True), torch.randn(16, 8), torch.randn(8, 16)
