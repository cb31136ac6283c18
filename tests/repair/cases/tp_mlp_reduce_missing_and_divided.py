"""Two bugs in one pass: a tensor-parallel MLP in plain torch.distributed never all-reduces its row-parallel
partial sums, and divides them by the world size as if they had been summed.  Either edit alone leaves the
forward wrong; the fixed twin is tp_mlp_plain_fixed.py."""
import torch
import torch.distributed as dist
import torch.nn.functional as F

TOKENS, HIDDEN, FFN = 4, 8, 16


def forward(x, w_up, w_down):
    rank, world = dist.get_rank(), dist.get_world_size()
    h = F.gelu(x @ w_up.chunk(world, dim=1)[rank])
    y = h @ w_down.chunk(world, dim=0)[rank]
    return y / world


def example_inputs():
    return torch.randn(TOKENS, HIDDEN), torch.randn(HIDDEN, FFN), torch.randn(FFN, HIDDEN)
