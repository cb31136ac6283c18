"""A torchrun launch script (as examples/realworld/tp_example_launch.py): module-level code builds a mesh, gives a
toy MLP a column- then row-parallel plan and runs one step.  Its twin gives the first layer RowwiseParallel: the
ranks raise in DTensor's sharding propagation at the forward's matmul; the placements were chosen where the plan's
style was made (in a launch script too, where no entry's parameters are bound before the run)."""
import os

import torch
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module


class ToyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.in_proj = nn.Linear(6, 8)
        self.out_proj = nn.Linear(8, 3)

    def forward(self, x):
        return self.out_proj(torch.relu(self.in_proj(x)))


world_size = int(os.environ["WORLD_SIZE"])
device_mesh = init_device_mesh(device_type="cpu", mesh_shape=(world_size,))

torch.manual_seed(0)
tp_model = ToyModel().to(torch.float64)
tp_model = parallelize_module(
    module=tp_model,
    device_mesh=device_mesh,
    parallelize_plan={"in_proj": ColwiseParallel(),
                      "out_proj": RowwiseParallel()},
)
torch.manual_seed(1)
tp_model(torch.rand(4, 6, dtype=torch.float64)).sum().backward()
