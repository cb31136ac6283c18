"""As k34_gathered_buffer_ok.py, with the all-gather that fills the buffer forgotten: the ranks cut and
concatenate memory torch.empty made and nothing wrote, through views of the buffer.

violations: named at the allocation (the line marked 'the bug', right above where the collective belongs).
"""
import torch
import torch.distributed as dist

TOKENS, HIDDEN, OUT = 4, 4, 8


def forward(x, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    y = x @ w.chunk(world, dim=1)[rank]
    if world == 1:
        return y
    gathered = torch.empty(world * y.shape[0], y.shape[1])   # the bug: nothing fills it
    blocks = gathered.chunk(world, dim=0)
    return torch.cat(blocks, dim=1)


def example_inputs():
    return torch.randn(TOKENS, HIDDEN, requires_grad=False), torch.randn(HIDDEN, OUT, requires_grad=False)
