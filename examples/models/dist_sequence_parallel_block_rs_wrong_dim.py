"""Sequence-parallel MLP block that reduce-scatters along the batch instead of the sequence.

Twin of dist_sequence_parallel_block_ok.py.  The partial sums are flattened batch-major
and reduce-scattered with reduce_scatter_tensor (which splits dim 0), then viewed as a
sequence shard — the Megatron helpers assume sequence-first tensors, these are
batch-first.

Bug: reduce-scatter on the wrong dim: each rank receives a batch slice, not its
sequence slice, and adds it to its sequence shard of the residual.

Expected: violations
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
    flat = torch.empty(BATCH * SEQ // world, HIDDEN)
    dist.reduce_scatter_tensor(flat, partial.reshape(BATCH * SEQ, HIDDEN))
    y_local = flat.view(BATCH, SEQ // world, HIDDEN)
    out_local = x_local + y_local
    outs = [torch.empty_like(out_local) for _ in range(world)]
    dist.all_gather(outs, out_local)
    return torch.cat(outs, dim=1)
