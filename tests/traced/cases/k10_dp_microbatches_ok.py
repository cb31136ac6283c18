"""Data parallelism over micro-batches as a training loop writes it: each rank takes its rows of the global
batch, one row per micro-batch, accumulates the gradient of its loss divided by its number of micro-batches,
then averages over the ranks.  On 2 ranks each rank runs the single device's third and fourth micro-batch
(rank 1) with gradients twice the single device's until the all-reduce averages them."""
import torch
import torch.distributed as dist


def forward(x, w):
    world, rank = dist.get_world_size(), dist.get_rank()
    micro_batches = x.chunk(world)[rank].split(1)
    grad = torch.zeros_like(w)
    for rows in micro_batches:
        hidden = torch.nn.functional.layer_norm(rows @ w, (w.shape[1],))
        loss = torch.tanh(hidden).pow(2).mean() / len(micro_batches)
        grad = grad + torch.autograd.grad(loss, w)[0]
    dist.all_reduce(grad)
    return grad / world


def example_inputs():
    return torch.randn(4, 8, requires_grad=False), torch.randn(8, 8, requires_grad=True)
