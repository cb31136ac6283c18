"""Each rank adds the whole product into a flat buffer through a view, then all-reduces the buffer
and returns the view: every rank counted every term, so the result is the world size times the
single-device one.  (``dist.all_reduce`` writes the buffer without bumping torch's version counter:
the view returned must still be read as the reduced buffer.)

Expected: violations (output 0); gloo: outputs mismatch.
"""
import torch
import torch.distributed as dist

ROWS, HIDDEN = 4, 4


def forward(x, w):
    buffer = torch.zeros(ROWS * HIDDEN)
    total = buffer.view(ROWS, HIDDEN)
    total.add_(x @ w)
    dist.all_reduce(buffer)
    return total


def example_inputs():
    return torch.randn(ROWS, HIDDEN).requires_grad_(False), torch.randn(HIDDEN, HIDDEN).requires_grad_(False)
