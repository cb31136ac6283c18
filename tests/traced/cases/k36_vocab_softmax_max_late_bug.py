"""As k36_vocab_softmax_ok.py, with the MAX all-reduce of the row maximum one statement late: the
exponentials subtract each rank's own maximum.  A rank's maximum of its block is a piece of the max
reduction still to come, not a wrong value; the line that reads it unreduced is where the values go wrong.

violations: named at that line (marked 'the bug'), not at the row maximum.
"""
import torch
import torch.distributed as dist

TOKENS, HIDDEN, VOCAB = 4, 8, 16


def example_inputs():
    return torch.randn(TOKENS, HIDDEN, requires_grad=False), torch.randn(HIDDEN, VOCAB, requires_grad=False)


def forward(x, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    logits = x @ w.chunk(world, dim=1)[rank]
    row_max = logits.amax(dim=-1, keepdim=True)
    e = torch.exp(logits - row_max)   # the bug: reads each rank's own maximum
    dist.all_reduce(row_max, op=dist.ReduceOp.MAX)
    denom = e.sum(dim=-1, keepdim=True)
    dist.all_reduce(denom, op=dist.ReduceOp.SUM)
    probs = e / denom
    parts = [torch.empty_like(probs) for _ in range(world)]
    dist.all_gather(parts, probs)
    return torch.cat(parts, dim=1)
