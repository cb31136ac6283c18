"""torchrun data-parallel training script whose gradients are averaged twice.

DistributedDataParallel already averages gradients over the data-parallel ranks during
`backward()`; the author, used to a hand-written all-reduce-sum loop, divides them by the
world size again before the optimizer step.  With 1 rank nothing changes, so the bug only
shows when scaling out: every update is `world` times too small.

violations
"""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

GLOBAL_BATCH, IN, OUT = 12, 16, 6

rank = int(os.environ["RANK"])
world_size = int(os.environ["WORLD_SIZE"])
dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")

torch.manual_seed(1234)
model = nn.Sequential(nn.Linear(IN, 40), nn.Tanh(), nn.Linear(40, OUT)).to(torch.float64)
ddp_model = DDP(model)
optimizer = torch.optim.SGD(ddp_model.parameters(), lr=0.5)

torch.manual_seed(0)
inputs = torch.randn(GLOBAL_BATCH, IN, dtype=torch.float64)
targets = torch.randn(GLOBAL_BATCH, OUT, dtype=torch.float64)
local_inputs = inputs.chunk(world_size)[rank]
local_targets = targets.chunk(world_size)[rank]

loss = nn.functional.mse_loss(ddp_model(local_inputs), local_targets)
loss.backward()
for p in ddp_model.parameters():
    p.grad /= world_size
optimizer.step()

dist.destroy_process_group()
