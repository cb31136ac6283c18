"""torchtitan's SwiGLU FeedForward, tensor-parallel with a DTensor plan (w1/w3 column-wise, w2 row-wise).

The module is torchtitan's own; the plan is the one its Llama recipes apply to every block's
feed-forward: the gate and up projections split by output features, the down projection by
input features, its partial sums reduced back to a replicated output.
"""
import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
from torchtitan.models.common.feed_forward import FeedForward
from torchtitan.models.common.linear import Linear

BATCH, DIM, HIDDEN = 4, 8, 16


def example_module():
    config = FeedForward.Config(w1=Linear.Config(in_features=DIM, out_features=HIDDEN),
                                w2=Linear.Config(in_features=HIDDEN, out_features=DIM),
                                w3=Linear.Config(in_features=DIM, out_features=HIDDEN))
    ffn = FeedForward(config)
    for linear in (ffn.w1, ffn.w2, ffn.w3):
        torch.nn.init.normal_(linear.weight, std=DIM ** -0.5)
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    plan = {"w1": ColwiseParallel(), "w3": ColwiseParallel(), "w2": RowwiseParallel()}
    return parallelize_module(ffn, mesh, plan)


def example_inputs():
    return (torch.randn(BATCH, DIM, requires_grad=True),)
