"""A softmax over a vocabulary split across ranks: each rank holds a block of the logits' columns; the row
maximum is all-reduced with MAX before the exponentials read it, their sum with SUM, and the normalised
blocks are all-gathered (the twin of k36_vocab_softmax_max_late_bug.py).

verified
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
    dist.all_reduce(row_max, op=dist.ReduceOp.MAX)
    e = torch.exp(logits - row_max)
    denom = e.sum(dim=-1, keepdim=True)
    dist.all_reduce(denom, op=dist.ReduceOp.SUM)
    probs = e / denom
    parts = [torch.empty_like(probs) for _ in range(world)]
    dist.all_gather(parts, probs)
    return torch.cat(parts, dim=1)
