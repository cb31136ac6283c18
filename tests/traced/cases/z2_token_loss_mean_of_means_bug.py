"""Data-parallel token loss over padded labels (-100 marks padding): each rank divides its tokens'
summed losses by its own count of real tokens and by the world size, then the ranks' shares are summed:
a mean of means, wrong whenever the ranks hold different numbers of real tokens.

violations
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F

BATCH, SEQ, VOCAB = 4, 3, 5


def forward(logits, labels):
    rank, world = dist.get_rank(), dist.get_world_size()
    n = BATCH // world
    logits, labels = logits[rank * n:(rank + 1) * n], labels[rank * n:(rank + 1) * n]
    loss_sum = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100, reduction="sum")
    count = (labels != -100).sum().to(logits.dtype)
    loss = loss_sum / count / world   # the bug
    dist.all_reduce(loss)
    return loss


def example_inputs():
    logits = torch.randn(BATCH, SEQ, VOCAB)
    labels = torch.randint(0, VOCAB, (BATCH, SEQ))
    labels[torch.rand(BATCH, SEQ) < 0.4] = -100
    return logits, labels
