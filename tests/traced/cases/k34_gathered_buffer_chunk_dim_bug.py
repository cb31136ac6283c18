"""As k34_gathered_buffer_ok.py, with the gathered buffer cut along its columns instead of the rank dim:
each block the all-gather delivers is right, the chunk mixes the ranks' blocks.

violations: named at the chunk (the line marked 'the bug'), not at the all-gather.
"""
import torch
import torch.distributed as dist

TOKENS, HIDDEN, OUT = 4, 4, 8


def forward(x, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    y = x @ w.chunk(world, dim=1)[rank]
    if world == 1:
        return y
    gathered = torch.empty(world * y.shape[0], y.shape[1])
    dist.all_gather_into_tensor(gathered, y)
    blocks = gathered.chunk(world, dim=1)   # the bug: the ranks' blocks are stacked along dim 0
    return torch.cat(blocks, dim=1)


def example_inputs():
    return torch.randn(TOKENS, HIDDEN, requires_grad=False), torch.randn(HIDDEN, OUT, requires_grad=False)
