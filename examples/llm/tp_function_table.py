"""A tensor-parallel MLP written against an in-house wrapper, `MyTPLinear`, whose communication
is picked by name from a function table.  Framework glue like this is what the deterministic
frontend does not know; the LLM path reads it (see README.md in this folder)."""
import torch
import torch.distributed as dist
import torch.nn.functional as F

S, H, FFN = 8, 16, 32

# What to do with a layer's local result, by name; in place, like torch.distributed.
AFTER = {
    "none": lambda t: None,
    "sum": dist.all_reduce,
}


class MyTPLinear:
    """Holds this rank's block of `weight`, split along `split_dim`; `after` names the communication."""

    def __init__(self, weight, split_dim, after):
        rank, world = dist.get_rank(), dist.get_world_size()
        self.weight = weight.chunk(world, dim=split_dim)[rank]
        self.after = AFTER[after]

    def __call__(self, x):
        y = x @ self.weight
        self.after(y)
        return y


def example_inputs():
    return torch.randn(S, H), torch.randn(H, FFN), torch.randn(FFN, H)


def forward(x, w_up, w_down):
    up = MyTPLinear(w_up, split_dim=1, after="none")
    down = MyTPLinear(w_down, split_dim=0, after="sum")
    return down(F.gelu(up(x)))
