"""DTensor sequence parallelism around a norm (torchtitan's SequenceParallel style).

The replicated input is cut into sequence shards (`PrepareModuleInput`).  The RMSNorm weight is replicated while the activations are sharded on the sequence dim, so
the weight's gradient comes out of backward as a DTensor with `Partial(sum)` placements:
each rank holds the contribution of its own tokens, and the global gradient is their sum
(`full_tensor()`).  The bug: the norm hands on its local sequence shard as a plain
tensor (`use_local_output=True`) and the projection declares that input Replicate, so each
rank projects only its own tokens and calls them the whole sequence.

Bug at line 41: the projection is told its input is replicated, but it is a local sequence
shard.

violations
"""
import torch
import torch.nn as nn
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, SequenceParallel,
                                               parallelize_module)

SEQ, DIM, OUT = 8, 6, 10


class NormThenProject(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.RMSNorm(DIM)
        self.proj = nn.Linear(DIM, OUT, bias=False)

    def forward(self, x):
        return self.proj(self.norm(x))


def build(mesh):
    torch.manual_seed(0)
    model = NormThenProject()
    with torch.no_grad():
        model.norm.weight.uniform_(0.5, 1.5)
    plan = {"": PrepareModuleInput(input_layouts=(Replicate(),), desired_input_layouts=(Shard(0),)),
            "norm": SequenceParallel(sequence_dim=0, use_local_output=True),
            "proj": ColwiseParallel(input_layouts=Replicate(), output_layouts=Replicate())}
    return parallelize_module(model, mesh, plan)


def example_inputs():
    return (torch.randn(SEQ, DIM, requires_grad=True),)
