"""Softmax applied to vocab-parallel logits over their sharded vocabulary dim.

Twin of dist_vocab_parallel_softmax_ok.py that calls torch.softmax on the local block.

Bug: softmax over a sharded dim: every rank's block is normalised on its own and sums
to 1, so the gathered rows sum to world.

Expected: violations
"""
import torch
import torch.distributed as dist

TOKENS, HIDDEN, VOCAB = 8, 16, 32


def example_inputs():
    return torch.randn(TOKENS, HIDDEN), torch.randn(HIDDEN, VOCAB)


def forward(x, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    logits = x @ w.chunk(world, dim=1)[rank]
    probs = torch.softmax(logits, dim=-1)
    parts = [torch.empty_like(probs) for _ in range(world)]
    dist.all_gather(parts, probs)
    return torch.cat(parts, dim=1)
