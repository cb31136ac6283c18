"""As k6_main_grad_hook_bug.py, but each rank runs its own rows of the batch: the all-reduced
``main_grad`` is the single-device gradient of the whole batch's summed loss.

Expected: verified; gloo: outputs match.
"""
import torch
import torch.distributed as dist

ROWS, HIDDEN, MICRO = 8, 4, 2


def forward(x):
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.randn(HIDDEN, HIDDEN))
    buffer = torch.zeros(HIDDEN * HIDDEN)
    w.main_grad = buffer.view(HIDDEN, HIDDEN)

    def accumulate(*unused):
        w.main_grad.add_(w.grad.data)
        w.grad = None

    accumulator = w.expand_as(w).grad_fn.next_functions[0][0]   # kept alive, as megatron-core keeps it
    accumulator.register_hook(accumulate)
    for micro_batch in x.chunk(world)[rank].chunk(MICRO):
        (micro_batch @ w).tanh().sum().backward()
    dist.all_reduce(buffer)
    return w.main_grad


def example_inputs():
    return (torch.randn(ROWS, HIDDEN).requires_grad_(False),)
