"""A data-parallel step in megatron-core's DDP style: a hook on the weight's gradient accumulator
adds ``w.grad.data`` into a flat ``main_grad`` buffer (and drops ``w.grad``), micro-batch after
micro-batch, then the buffer is all-reduced.  The bug: every rank runs the whole batch, not its
share, so the summed gradient counts each sample world-size times.

Expected: violations (output 0); gloo: outputs mismatch.
"""
import torch
import torch.distributed as dist

ROWS, HIDDEN, MICRO = 8, 4, 2


def forward(x):
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.randn(HIDDEN, HIDDEN))
    buffer = torch.zeros(HIDDEN * HIDDEN)
    w.main_grad = buffer.view(HIDDEN, HIDDEN)

    def accumulate(*unused):
        w.main_grad.add_(w.grad.data)
        w.grad = None

    accumulator = w.expand_as(w).grad_fn.next_functions[0][0]   # kept alive, as megatron-core keeps it
    accumulator.register_hook(accumulate)
    for micro_batch in x.chunk(MICRO):
        (micro_batch @ w).tanh().sum().backward()
    dist.all_reduce(buffer)
    return w.main_grad


def example_inputs():
    return (torch.randn(ROWS, HIDDEN).requires_grad_(False),)
