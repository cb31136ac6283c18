"""Vocab-parallel embedding lookup with masking, as in Megatron's VocabParallelEmbedding.

The table is split by rows (vocabulary ranges).  Every rank looks up the ids that fall
in its range, zeroes the rows of ids owned by other ranks, and an all-reduce adds the
per-rank results (exactly one rank contributes each row).

`ids` holds token ids in [0, VOCAB).

Expected: verified
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
    foreign = (ids < start) | (ids >= start + per_rank)
    local_ids = (ids - start).masked_fill(foreign, 0)
    emb = F.embedding(local_ids, table.chunk(world, dim=0)[rank])
    emb = emb.masked_fill(foreign.unsqueeze(-1), 0.0)
    dist.all_reduce(emb)
    return emb
