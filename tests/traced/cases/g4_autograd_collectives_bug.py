"""As g4_autograd_collectives_ok.py, but the token blocks are gathered with
torch.distributed.nn.functional.all_gather, whose backward reduce-scatters: it sums the ranks'
gradients, which are the same replicated gradient on every rank, so every gradient comes back
multiplied by the number of ranks.

Expected: violations (gradients); gloo: gradients mismatch.
"""
import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_nn

TOKENS, HIDDEN = 8, 8


def example_inputs():
    return torch.randn(TOKENS, HIDDEN), torch.randn(HIDDEN, HIDDEN)


def forward(x, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    partial = x.chunk(world, dim=1)[rank] @ w.chunk(world, dim=0)[rank]
    tokens = dist_nn.reduce_scatter(torch.empty(TOKENS // world, HIDDEN), list(partial.chunk(world, dim=0)))
    return torch.cat(dist_nn.all_gather(torch.tanh(tokens)), dim=0)
