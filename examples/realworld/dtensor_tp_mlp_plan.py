"""DTensor tensor parallelism with a `parallelize_module` plan (pytorch/examples, torchtitan style).

A SwiGLU feed-forward block: `w1` and `w3` are ColwiseParallel, `w2` is RowwiseParallel, so
the hidden activations stay sharded and the output is all-reduced once.  The input is a
replicated plain tensor, as ColwiseParallel expects by default.

verified
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

TOKENS, DIM, HIDDEN = 6, 16, 40


class FeedForward(nn.Module):
    def __init__(self, dim: int, hidden_dim: int):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden_dim, bias=False)
        self.w2 = nn.Linear(hidden_dim, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden_dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


def build(mesh):
    model = FeedForward(DIM, HIDDEN)
    plan = {"w1": ColwiseParallel(), "w2": RowwiseParallel(), "w3": ColwiseParallel()}
    return parallelize_module(model, mesh, plan)


def example_inputs():
    return (torch.randn(TOKENS, DIM, requires_grad=True),)
