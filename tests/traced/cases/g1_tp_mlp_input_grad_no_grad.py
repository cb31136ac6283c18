"""g1_tp_mlp_input_grad_bug.py with x created explicitly non-trainable (the first layer: no
gradient flows to it), which the file says with requires_grad=False.

Expected: verified (the gradient of x is not compared; w1, w2 are); gloo: outputs match.
"""
import torch
import torch.distributed as dist

TOKENS, HIDDEN, FFN = 4, 6, 8


def example_inputs():
    return torch.randn(TOKENS, HIDDEN, requires_grad=False), torch.randn(HIDDEN, FFN), torch.randn(FFN, HIDDEN)


def forward(x, w1, w2):
    rank, world = dist.get_rank(), dist.get_world_size()
    h = torch.relu(x @ w1.chunk(world, dim=1)[rank])
    y = h @ w2.chunk(world, dim=0)[rank]
    dist.all_reduce(y)
    return y
