"""As k5_reduce_scatter_buffer_ok.py, with the reduce-scatter that fills the buffer forgotten.

violations: the ranks gather memory torch.empty made and nothing wrote; named at that allocation
(the line marked 'the bug', right above where the collective belongs).
"""
import torch
import torch.distributed as dist


def forward(x, w):
    world, rank = dist.get_world_size(), dist.get_rank()
    partial = x.chunk(world, dim=1)[rank] @ w.chunk(world, dim=0)[rank]
    if world == 1:
        return partial
    out = torch.empty(partial.shape[0] // world, partial.shape[1])   # the bug: nothing fills it
    whole = torch.empty_like(partial)
    dist.all_gather_into_tensor(whole, out)
    return whole


def example_inputs():
    return torch.randn(8, 8, requires_grad=False), torch.randn(8, 6, requires_grad=False)   # forward-only code
