"""Log-sum-exp over vocabulary-parallel logits, the sum reduced in place by a wrapper (t6 twin cases).

violations: the wrapper is called with the reduction switched off (the line marked 'the bug'); the values
first go wrong where the partial sums are read two lines below; the violation names the call that left them.
"""
import torch
import torch.distributed as dist


def reduce_(t, enabled=True):
    if enabled:
        dist.all_reduce(t)


def forward(logits):
    world, rank = dist.get_world_size(), dist.get_rank()
    local = logits.chunk(world, -1)[rank]
    sum_exp = local.exp().sum(dim=-1)
    reduce_(sum_exp, enabled=False)  # the bug: the in-place reduction does nothing
    count = local.new_tensor(float(logits.shape[-1]))
    return torch.log(sum_exp / count)


def example_inputs():
    return (torch.randn(4, 8),)
