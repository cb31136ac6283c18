"""A vocabulary-parallel LM head with DTensor's loss_parallel, as torchtitan's loss path (the twin of
k37_loss_parallel_local_bug.py): the output projection is ColwiseParallel with use_local_output=False, so the
logits stay a DTensor sharded over the vocabulary and F.cross_entropy inside loss_parallel() computes the
loss without gathering them; the backward runs in the same context.

verified
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.tensor import Shard
from torch.distributed.tensor.parallel import ColwiseParallel, loss_parallel, parallelize_module

TOKENS, DIM, VOCAB = 6, 16, 56


class LMHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(DIM)
        self.output = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, h):
        return self.output(self.norm(h))


def build(mesh):
    head = parallelize_module(LMHead(), mesh, {
        "output": ColwiseParallel(output_layouts=Shard(-1), use_local_output=False),
    })

    def train_step(h, labels):
        logits = head(h)
        with loss_parallel():
            loss = F.cross_entropy(logits, labels)
            loss.backward()  # the backward must run inside the context too
        return loss.detach()

    return train_step


def example_inputs():
    return torch.randn(TOKENS, DIM, requires_grad=True), torch.randint(0, VOCAB, (TOKENS,))
