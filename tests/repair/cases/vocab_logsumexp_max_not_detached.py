"""Vocabulary-parallel log-sum-exp of the logits, shifted by their maximum, every reduction an in-place
all-reduce: right in forward, wrong in backward.

Each rank holds a block of the vocabulary dim.  The maximum is all-reduced with MAX in place, so its
value is the global one, but autograd still differentiates the rank's own ``max``; the log-sum-exp does
not depend on the shift on one device, on a rank the in-place sums leave the shift's gradient on the
rank's arg-max.  Megatron takes the maximum without a gradient: ``.detach()``.
"""
import torch
import torch.distributed as dist

TOKENS, VOCAB = 4, 8


def example_inputs():
    return (torch.randn(TOKENS, VOCAB, requires_grad=True),)


def forward(logits):
    rank, world = dist.get_rank(), dist.get_world_size()
    local = logits.chunk(world, dim=-1)[rank]
    shift = local.max(dim=-1).values
    dist.all_reduce(shift, op=dist.ReduceOp.MAX)
    sum_exp = (local - shift.unsqueeze(-1)).exp().sum(dim=-1)
    total = local.sum(dim=-1) - local.size(-1) * shift
    dist.all_reduce(sum_exp)
    dist.all_reduce(total)
    return sum_exp.log() + shift + 0.1 * (total / (local.size(-1) * world) + shift)
