"""Megatron-core LM head whose vocab-split logits go to the ordinary F.cross_entropy.

Twin of megatron_embedding_lm_head_ok.py with vocab_parallel_cross_entropy replaced by
F.cross_entropy on this rank's logits.

Bug: softmax over a sharded dim: the log-softmax sees VOCAB/world logits, and labels
owned by other ranks index past the local block (an error on more than one rank).

Expected: violations
"""
import torch
import torch.nn.functional as F
from megatron.core import ModelParallelConfig
from megatron.core.tensor_parallel import ColumnParallelLinear, VocabParallelEmbedding

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
        return F.cross_entropy(logits.view(SEQ * BATCH, -1), labels.view(-1), reduction="none").view(SEQ, BATCH)


def example_inputs():
    return torch.zeros(SEQ, BATCH, dtype=torch.long), torch.zeros(SEQ, BATCH, dtype=torch.long)
