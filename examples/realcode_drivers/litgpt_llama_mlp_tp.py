"""litgpt's LLaMAMLP (SwiGLU) made tensor-parallel with a DTensor plan, as a training script does.

fc_1 (gate) and fc_2 (up) split by output features, proj by input features; litgpt's own
forward runs unchanged on the shards.
"""
import torch
import torch.distributed as dist
from litgpt.config import Config
from litgpt.model import LLaMAMLP
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

BATCH, SEQ = 2, 3


def example_module():
    config = Config(n_embd=8, intermediate_size=16, n_head=2, n_layer=1, bias=False, mlp_class_name="LLaMAMLP")
    mlp = LLaMAMLP(config)
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    plan = {"fc_1": ColwiseParallel(), "fc_2": ColwiseParallel(), "proj": RowwiseParallel()}
    return parallelize_module(mlp, mesh, plan)


def example_inputs():
    return (torch.randn(BATCH, SEQ, 8, requires_grad=True),)
