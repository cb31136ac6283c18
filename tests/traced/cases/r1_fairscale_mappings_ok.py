"""fairscale's own mappings around a hand-sharded MLP; the process groups set up by the code itself.

verified: copy_to_model_parallel_region all-reduces the input gradient, reduce_from the partial sums
(fairscale's _reduce marks its input dirty and returns it; the code calls fairscale's
initialize_model_parallel on every world it runs on).
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F
from fairscale.nn.model_parallel.initialize import initialize_model_parallel
from fairscale.nn.model_parallel.mappings import copy_to_model_parallel_region, reduce_from_model_parallel_region


def forward(x, w_up, w_down):
    world, rank = dist.get_world_size(), dist.get_rank()
    initialize_model_parallel(world)
    x = copy_to_model_parallel_region(x)
    h = F.gelu(x @ torch.chunk(w_up, world, dim=0)[rank].t())
    return reduce_from_model_parallel_region(h @ torch.chunk(w_down, world, dim=1)[rank].t())


def example_inputs():
    return torch.randn(4, 8, requires_grad=True), torch.randn(16, 8), torch.randn(8, 16)
