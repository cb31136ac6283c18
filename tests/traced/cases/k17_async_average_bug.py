"""A row-parallel product reduced by an asynchronous all-reduce that averages where the partial products must be
summed: gloo sums, then divides by the world size when the wait is made, so the ranks hold half of one device's
value.  The all-reduce's line is named (the division was named at the wait's line)."""
import torch
import torch.distributed as dist


def forward(x, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    y = x.chunk(world, dim=1)[rank] @ w.chunk(world, dim=0)[rank]
    handle = dist.all_reduce(y, op=dist.ReduceOp.AVG, async_op=True)  # the bug: AVG, not SUM
    z = torch.tanh(x)
    handle.wait()
    return y + z


def example_inputs():
    return torch.randn(4, 8, requires_grad=False), torch.randn(8, 8, requires_grad=False)
