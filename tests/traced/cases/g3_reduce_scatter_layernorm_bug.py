"""As g3_reduce_scatter_layernorm_ok.py, but the LayerNorm runs on the partial sums before they are
reduce-scattered (a norm of a partial sum is not the norm of the sum).

Expected: violations (output 0); gloo: outputs mismatch.
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F

TOKENS, HIDDEN = 8, 8


def example_inputs():
    return torch.randn(TOKENS, HIDDEN), torch.randn(HIDDEN, HIDDEN)


def forward(x, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    partial = F.layer_norm(x.chunk(world, dim=1)[rank] @ w.chunk(world, dim=0)[rank], (HIDDEN,))
    tokens = torch.zeros(TOKENS // world, HIDDEN)
    dist.reduce_scatter_tensor(tokens, partial.contiguous())
    normed = tokens
    gathered = torch.empty(TOKENS, HIDDEN)
    dist.all_gather_into_tensor(gathered, normed.contiguous())
    return gathered
