"""As k37_loss_parallel_ok.py, with the head's style handing out its local output (use_local_output=True):
F.cross_entropy runs on each rank's block of the vocabulary as if it were all of it, and a label outside the
block is out of range on the rank.  The rank fails at the loss; the piece was handed out by the layer whose
style was chosen on the marked line (the repair line).
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
        "output": ColwiseParallel(output_layouts=Shard(-1), use_local_output=True),  # the bug
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
