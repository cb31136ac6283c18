"""Three edits: a residual MLP whose row-parallel sum is all-reduced twice and whose output (already
replicated) is all-reduced once more, and whose replicated input gets no all-reduce of its gradient.
Each edit alone leaves the file wrong; the fix removes the second reduce of ``y`` and the reduce of
``out`` and guards ``x`` (the mutation campaign's duplicate of examples/models/dist_tp_mlp_double_allreduce.py)."""
import torch
import torch.distributed as dist
import torch.nn.functional as F

TOKENS, HIDDEN, FFN = 8, 16, 64


def example_inputs():
    return torch.randn(TOKENS, HIDDEN), torch.randn(HIDDEN, FFN), torch.randn(FFN, HIDDEN)


def forward(x, w_up, w_down):
    rank, world = dist.get_rank(), dist.get_world_size()
    h = F.gelu(x @ w_up.chunk(world, dim=1)[rank])
    y = h @ w_down.chunk(world, dim=0)[rank]
    dist.all_reduce(y)
    dist.all_reduce(y)
    out = x + y
    dist.all_reduce(out)
    return out
