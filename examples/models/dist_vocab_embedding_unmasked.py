"""Vocab-parallel embedding lookup that clamps foreign ids instead of masking them.

Twin of dist_vocab_embedding_masked_ok.py.  Ids outside this rank's vocabulary range
are clamped into it (so the lookup does not fail) but their rows are not zeroed.

Bug: every rank contributes a row for every id; the all-reduce adds rows of the wrong
tokens to the right one.

Expected: violations
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F

SEQ, VOCAB, HIDDEN = 8, 16, 8


def example_inputs():
    return torch.zeros(SEQ, dtype=torch.long), torch.randn(VOCAB, HIDDEN)


def forward(ids, table):
    rank, world = dist.get_rank(), dist.get_world_size()
    per_rank = VOCAB // world
    start = rank * per_rank
    local_ids = (ids - start).clamp(0, per_rank - 1)
    emb = F.embedding(local_ids, table.chunk(world, dim=0)[rank])
    dist.all_reduce(emb)
    return emb
