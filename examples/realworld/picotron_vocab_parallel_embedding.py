"""picotron-style vocabulary-parallel embedding: mask foreign ids, look up, all-reduce.

Each rank owns rows `[vocab_start, vocab_end)` of the embedding table.  Ids outside the
range are masked (looked up as row 0, then zeroed), and the partial embeddings are summed
with a custom autograd Function (all-reduce forward, identity backward).

verified
"""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

VOCAB, HIDDEN, BATCH, SEQ = 56, 16, 7, 8


class ReduceFromModelParallelRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        if group.size() == 1:
            return x
        dist.all_reduce(x, op=dist.ReduceOp.SUM, group=group)
        return x

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output, None


class VocabParallelEmbedding(nn.Module):
    def __init__(self, num_embeddings: int, embedding_dim: int, tp_group):
        super().__init__()
        self.tp_group = tp_group
        tp_size, tp_rank = tp_group.size(), tp_group.rank()
        self.num_embeddings_per_partition = num_embeddings // tp_size
        self.vocab_start_index = tp_rank * self.num_embeddings_per_partition
        self.vocab_end_index = self.vocab_start_index + self.num_embeddings_per_partition
        self.weight = nn.Parameter(torch.randn(self.num_embeddings_per_partition, embedding_dim))

    def forward(self, input_ids):
        input_mask = (input_ids < self.vocab_start_index) | (input_ids >= self.vocab_end_index)
        masked_input = input_ids.clone() - self.vocab_start_index
        masked_input[input_mask] = 0
        output_parallel = F.embedding(masked_input, self.weight)
        output_parallel[input_mask, :] = 0.0
        return ReduceFromModelParallelRegion.apply(output_parallel, self.tp_group)


class Embedder(nn.Module):
    def __init__(self, tp_group):
        super().__init__()
        self.embedding = VocabParallelEmbedding(VOCAB, HIDDEN, tp_group)
        self.norm = nn.LayerNorm(HIDDEN)

    def forward(self, input_ids):
        return self.norm(self.embedding(input_ids))


def example_module():
    return Embedder(dist.new_group(list(range(dist.get_world_size()))))


def example_inputs():
    # every id once, in random order: the range boundaries are always exercised
    return (torch.randperm(VOCAB).view(BATCH, SEQ),)
