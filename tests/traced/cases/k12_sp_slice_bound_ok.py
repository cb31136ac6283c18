"""A sequence-parallel scatter to each rank's rows, then a gather and a cross-entropy pick (its twin cuts one row
off by one): each rank's piece has a row too few, the gathered sequence is short, and the ranks raise at the
cross-entropy pick, whose row index comes from ``torch.arange(logits.size(0))``: a size read off a value,
which torch's dispatcher does not see.  The shape the pick could not take was made by the slice."""
import torch
import torch.distributed as dist


def scatter_to_sequence(x):
    world, rank = dist.get_world_size(), dist.get_rank()
    if world == 1:
        return x
    local = x.shape[0] // world
    return x[rank * local:(rank + 1) * local].contiguous()


def gather_from_sequence(piece):
    if dist.get_world_size() == 1:
        return piece
    pieces = [torch.empty_like(piece) for _ in range(dist.get_world_size())]
    dist.all_gather(pieces, piece)
    return torch.cat(pieces)


def forward(x, w, target):
    hidden = torch.tanh(scatter_to_sequence(x) @ w)
    logits = gather_from_sequence(hidden)
    picked = logits[torch.arange(logits.size(0)), target]
    return (torch.log(torch.exp(logits).sum(dim=-1)) - picked).mean()


def example_inputs():
    return torch.randn(8, 8, requires_grad=False), torch.randn(8, 8, requires_grad=False), torch.randint(0, 8, (8,))
