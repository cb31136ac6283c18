"""Row-parallel matmul whose partial sums are reduce-scattered over tokens into a buffer, then a
per-token LayerNorm on each rank's tokens, then the tokens are gathered (Megatron's sequence
parallelism after a RowParallelLinear).

Expected: verified; gloo: outputs and gradients match.
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F

TOKENS, HIDDEN = 8, 8


def example_inputs():
    return torch.randn(TOKENS, HIDDEN), torch.randn(HIDDEN, HIDDEN)


def forward(x, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    partial = x.chunk(world, dim=1)[rank] @ w.chunk(world, dim=0)[rank]
    tokens = torch.zeros(TOKENS // world, HIDDEN)
    dist.reduce_scatter_tensor(tokens, partial.contiguous())
    normed = F.layer_norm(tokens, (HIDDEN,))
    gathered = torch.empty(TOKENS, HIDDEN)
    dist.all_gather_into_tensor(gathered, normed.contiguous())
    return gathered
