"""Greedy decoding with a vocabulary-parallel output layer: each rank holds the rows of the output
weight for its slice of the vocabulary, takes its local best logit and its index, adds its slice's
offset, gathers every rank's best and keeps the overall best (the lowest token id on ties).

verified: the local index plus the rank's vocabulary offset
"""
import torch
import torch.distributed as dist

BATCH, DIM, VOCAB = 4, 6, 16


def forward(h, weight):
    rank, world = dist.get_rank(), dist.get_world_size()
    shard = VOCAB // world
    logits = h @ weight[rank * shard:(rank + 1) * shard].T
    best, index = logits.max(dim=-1)
    token = index + rank * shard
    bests = [torch.empty_like(best) for _ in range(world)]
    tokens = [torch.empty_like(token) for _ in range(world)]
    dist.all_gather(bests, best.contiguous())
    dist.all_gather(tokens, token.contiguous())
    bests, tokens = torch.stack(bests, dim=-1), torch.stack(tokens, dim=-1)
    winner = bests.argmax(dim=-1, keepdim=True)
    return bests.max(dim=-1).values, tokens.gather(-1, winner).squeeze(-1)


def example_inputs():
    return torch.randn(BATCH, DIM), torch.randn(VOCAB, DIM)
