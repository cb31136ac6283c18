"""DTensor LM head with loss_parallel: the cross-entropy consumes vocab-sharded logits.

The head is ColwiseParallel over the vocabulary with use_local_output=False, so the
logits stay a Shard(-1) DTensor, and F.cross_entropy inside loss_parallel() computes
the loss without gathering the vocabulary.  Returns the mean loss.

`labels` holds ids in [0, VOCAB).

Expected: verified
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.tensor.parallel import ColwiseParallel, loss_parallel, parallelize_module

TOKENS, DIM, VOCAB = 8, 16, 32


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, x):
        return self.proj(x)


def example_inputs():
    return torch.randn(TOKENS, DIM), torch.zeros(TOKENS, dtype=torch.long)


def build(mesh):
    head = parallelize_module(Head(), mesh, {"proj": ColwiseParallel(use_local_output=False)})

    def run(x, labels):
        with loss_parallel():
            loss = F.cross_entropy(head(x), labels)
        return loss.full_tensor()

    return run
