"""A tensor-parallel MLP behind a LayerNorm whose eps depends on the rank (a per-rank configuration slip):
rank 1 normalizes with twice the eps of rank 0 and of one device, so its partial sum, and the all-reduced
output every rank holds, differ from one device's.  By 4e-6 of the output's size here: within float32's
rounding tolerance, so torch in float32 shows the same numbers; in float64 they are apart."""
import torch
import torch.distributed as dist
import torch.nn.functional as F


def forward(x, w_up, w_down):
    world, rank = dist.get_world_size(), dist.get_rank()
    h = F.layer_norm(x, (x.shape[-1],), eps=1e-5 * (1 + rank))  # the bug: eps differs per rank
    y = F.gelu(h @ w_up.chunk(world, dim=1)[rank]) @ w_down.chunk(world, dim=0)[rank]
    dist.all_reduce(y)
    return y


def example_inputs():
    return (torch.randn(4, 8, requires_grad=False), torch.randn(8, 16, requires_grad=False),
            torch.randn(16, 8, requires_grad=False))
