"""A sequence-parallel block: layer norm on each rank's rows of the sequence, an all-gather of the normed rows
concatenated along the sequence, a tensor-parallel MLP, and a reduce-scatter of its partial sums back to each
rank's rows (its twin concatenates the gathered rows along the batch dim instead: each rank's hidden value is
then no block of one device's, and the ranks raise at the reduce-scatter, whose pieces no longer match the
rank's rows; the concatenation is named, not the reduce-scatter nor the cut of the rows)."""
import torch
import torch.distributed as dist
import torch.nn.functional as F


def forward(x, w_up, w_down):
    rank, world = dist.get_rank(), dist.get_world_size()
    x_local = x.chunk(world, dim=1)[rank]
    normed = F.layer_norm(x_local, (16,))
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


def example_inputs():
    return (torch.randn(2, 8, 16, requires_grad=False), torch.randn(16, 32, requires_grad=False),
            torch.randn(32, 16, requires_grad=False))
