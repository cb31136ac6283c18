"""Sequence-parallel MLP block on batch-first activations [batch, seq, hidden].

Each rank owns a slice of the sequence.  LayerNorm runs on the sequence shard, the
shards are all-gathered along the sequence, a tensor-parallel MLP (column- then
row-parallel) produces partial sums for the whole sequence, and a reduce-scatter along
the sequence both sums them and hands every rank its own slice back.  The residual is
added on the shard and the final all-gather returns the whole sequence.

Expected: verified
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F

BATCH, SEQ, HIDDEN, FFN = 2, 8, 16, 32


def example_inputs():
    return torch.randn(BATCH, SEQ, HIDDEN), torch.randn(HIDDEN, FFN), torch.randn(FFN, HIDDEN)


def forward(x, w_up, w_down):
    rank, world = dist.get_rank(), dist.get_world_size()
    x_local = x.chunk(world, dim=1)[rank]
    normed = F.layer_norm(x_local, (HIDDEN,))
    parts = [torch.empty_like(normed) for _ in range(world)]
    dist.all_gather(parts, normed)
    full = torch.cat(parts, dim=1)
    h = F.gelu(full @ w_up.chunk(world, dim=1)[rank])
    partial = h @ w_down.chunk(world, dim=0)[rank]
    y_local = torch.empty_like(x_local)
    dist.reduce_scatter(y_local, list(partial.chunk(world, dim=1)))
    out_local = x_local + y_local
    outs = [torch.empty_like(out_local) for _ in range(world)]
    dist.all_gather(outs, out_local)
    return torch.cat(outs, dim=1)
