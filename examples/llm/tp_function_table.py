"""A tensor-parallel MLP written against an in-house wrapper, `MyTPLinear`, whose communication
comes from a function table that a decorator fills at import time.  Framework glue like this is
what the deterministic frontend does not follow; the LLM path translates it."""
import torch
import torch.distributed as dist
import torch.nn.functional as F

S, H, FFN = 8, 16, 32

COMM = {}  # name -> what to do with a layer's local result


def comm(name):
    def register(fn):
        COMM[name] = fn
        return fn
    return register


@comm("none")
def _no_comm(t):
    return t


@comm("sum")
def _all_reduce_sum(t):
    dist.all_reduce(t)
    return t


class MyTPLinear:
    """Holds this rank's block of `weight`, split along `split_dim`; `after` names the communication."""

    def __init__(self, weight, split_dim, after):
        rank, world = dist.get_rank(), dist.get_world_size()
        self.weight = weight.chunk(world, dim=split_dim)[rank]
        self.after = COMM[after]

    def __call__(self, x):
        return self.after(x @ self.weight)


def example_inputs():
    return torch.randn(S, H), torch.randn(H, FFN), torch.randn(FFN, H)


def forward(x, w_up, w_down):
    up = MyTPLinear(w_up, split_dim=1, after="none")
    down = MyTPLinear(w_down, split_dim=0, after="sum")
    return down(F.gelu(up(x)))
