"""torchrun launch script in the style of pytorch/examples' tensor_parallel_example.py.

Module-level code: read the launcher's environment, build a 1-D device mesh on "cuda",
parallelise a toy MLP with ColwiseParallel/RowwiseParallel, and run a few optimizer steps
with an input seeded by rank: the tensor-parallel ranks disagree on the batch.  Run with
`torchrun --nproc-per-node 2 tp_example_launch.py`.

Bug at line 46: each rank draws a different input, but tensor parallelism needs the same
one on every rank.

violations
"""
import os

import torch
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module


class ToyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.in_proj = nn.Linear(10, 32)
        self.relu = nn.ReLU()
        self.out_proj = nn.Linear(32, 5)

    def forward(self, x):
        return self.out_proj(self.relu(self.in_proj(x)))


world_size = int(os.environ["WORLD_SIZE"])
device_mesh = init_device_mesh(device_type="cuda", mesh_shape=(world_size,))

torch.manual_seed(0)
tp_model = ToyModel().to(torch.float64)
tp_model = parallelize_module(
    module=tp_model,
    device_mesh=device_mesh,
    parallelize_plan={"in_proj": ColwiseParallel(), "out_proj": RowwiseParallel()},
)
optimizer = torch.optim.SGD(tp_model.parameters(), lr=0.25)

for i in range(3):
    # the bug: the input is seeded by rank, so the ranks of one tensor-parallel group see different batches
    torch.manual_seed(i + int(os.environ["RANK"]))
    inp = torch.rand(20, 10, dtype=torch.float64)
    output = tp_model(inp)
    output.sum().backward()
    optimizer.step()
    if i < 2:
        optimizer.zero_grad()
