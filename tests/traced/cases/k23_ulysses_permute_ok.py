"""Ulysses' exchange written out (as examples/realworld/ulysses_attention.py): [s/p, b, h] -> [s, b, h/p]
through all_to_all_single, a per-head product, and back.  Before each all-to-all the rank views its value as
[world, ...], one device as [1, ...]: those values are no blocks of one device's, though they hold the right
numbers.  Twins: the permute after the second all-to-all takes the wrong dims (k23_..._after_bug), the
permute before the first one does (k23_..._before_bug)."""
import torch
import torch.distributed as dist

SEQ, BATCH, HEADS = 8, 3, 4


def heads_to_seq(x):
    world = dist.get_world_size()
    s_local, b, h = x.shape
    send = x.reshape(s_local, b, world, h // world).permute(2, 0, 1, 3).contiguous()
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)
    return recv.reshape(world * s_local, b, h // world)


def seq_to_heads(x):
    world = dist.get_world_size()
    s, b, h_local = x.shape
    send = x.reshape(world, s // world, b, h_local).contiguous()
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)
    return recv.permute(1, 2, 0, 3).reshape(s // world, b, world * h_local)


def forward(x, scale):
    world, rank = dist.get_world_size(), dist.get_rank()
    heads = heads_to_seq(x.chunk(world, dim=0)[rank])
    mixed = heads.cumsum(dim=0) * scale.chunk(world, dim=0)[rank]
    out = seq_to_heads(mixed)
    pieces = [torch.empty_like(out) for _ in range(world)]
    dist.all_gather(pieces, out)
    return torch.cat(pieces, dim=0)


def example_inputs():
    return torch.randn(SEQ, BATCH, HEADS), torch.randn(HEADS)
