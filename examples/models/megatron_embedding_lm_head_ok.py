"""Megatron-core vocab-parallel embedding, LM head and vocab-parallel cross-entropy.

VocabParallelEmbedding masks ids owned by other ranks and all-reduces; the LM head is a
ColumnParallelLinear over the vocabulary that keeps its output split
(gather_output=False); vocab_parallel_cross_entropy combines the split logits with
MAX/SUM all-reduces.  Returns the per-token loss [seq, batch].

`tokens` and `labels` hold ids in [0, VOCAB).

Expected: verified
"""
import torch
from megatron.core import ModelParallelConfig
from megatron.core.tensor_parallel import ColumnParallelLinear, VocabParallelEmbedding, vocab_parallel_cross_entropy

SEQ, BATCH, VOCAB, HIDDEN = 8, 2, 32, 16


class TinyLM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        config = ModelParallelConfig(use_cpu_initialization=True)
        init = torch.nn.init.normal_
        self.embedding = VocabParallelEmbedding(VOCAB, HIDDEN, init_method=init, config=config)
        self.lm_head = ColumnParallelLinear(HIDDEN, VOCAB, config=config, init_method=init, bias=False,
                                            gather_output=False)

    def forward(self, tokens, labels):
        hidden = torch.tanh(self.embedding(tokens))
        logits, _ = self.lm_head(hidden)
        return vocab_parallel_cross_entropy(logits, labels)


def example_inputs():
    return torch.zeros(SEQ, BATCH, dtype=torch.long), torch.zeros(SEQ, BATCH, dtype=torch.long)
