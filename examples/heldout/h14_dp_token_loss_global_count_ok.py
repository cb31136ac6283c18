"""Data-parallel training step of a tiny language model on padded batches: each rank holds its own
sequences, padding tokens carry the label -100.  The loss is the mean over every real token of the
global batch: the rank's summed token losses are divided by the all-reduced count of real tokens,
and the gradients are summed over the ranks before the SGD update.

verified: the count of real tokens is all-reduced before the division
"""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

BATCH, SEQ, DIM, VOCAB = 4, 5, 6, 7
LR = 0.5


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, ids):
        return self.head(torch.tanh(self.emb(ids)))


class Step(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = TinyLM()

    def forward(self, ids, labels):
        rank, world = dist.get_rank(), dist.get_world_size()
        n = BATCH // world
        ids, labels = ids[rank * n:(rank + 1) * n], labels[rank * n:(rank + 1) * n]
        logits = self.model(ids)
        loss_sum = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100, reduction="sum")
        count = (labels != -100).sum().to(logits.dtype)
        dist.all_reduce(count)
        loss = loss_sum / count
        loss.backward()
        with torch.no_grad():
            for p in self.model.parameters():
                dist.all_reduce(p.grad)
                p -= LR * p.grad
        total = loss.detach().clone()
        dist.all_reduce(total)
        self.model.zero_grad(set_to_none=True)
        return total, self.model.emb.weight.detach().clone(), self.model.head.weight.detach().clone()


def example_module():
    return Step()


def example_inputs():
    ids = torch.randint(0, VOCAB, (BATCH, SEQ))
    labels = torch.randint(0, VOCAB, (BATCH, SEQ))
    labels[torch.rand(BATCH, SEQ) < 0.4] = -100
    return ids, labels
