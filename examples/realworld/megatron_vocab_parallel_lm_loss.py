"""Megatron-core language-model ends: VocabParallelEmbedding in, vocab-parallel LM head and loss out.

Token ids are looked up in a vocabulary split across tensor-parallel ranks (each rank
masks the ids outside its range and the partial embeddings are all-reduced), a
ColumnParallelLinear without gather produces vocab-sharded logits, and
`vocab_parallel_cross_entropy` computes the per-token loss without
ever gathering the logits.

verified
"""
import torch
from megatron.core import parallel_state, tensor_parallel
from megatron.core.model_parallel_config import ModelParallelConfig

VOCAB, HIDDEN, SEQ, BATCH = 56, 16, 12, 2
LABEL_SMOOTHING = 0.0


class TinyParallelLM(torch.nn.Module):
    def __init__(self, config: ModelParallelConfig):
        super().__init__()
        init = torch.nn.init.normal_
        self.embedding = tensor_parallel.VocabParallelEmbedding(
            VOCAB, HIDDEN, init_method=init, config=config)
        self.output_layer = tensor_parallel.ColumnParallelLinear(
            HIDDEN, VOCAB, config=config, init_method=init, bias=False, gather_output=False)

    def forward(self, input_ids, labels):
        # [b, s] ids -> [s, b, h] as Megatron's language models do
        hidden = self.embedding(input_ids).transpose(0, 1).contiguous()
        hidden = torch.tanh(hidden)
        logits, _ = self.output_layer(hidden)
        loss = tensor_parallel.vocab_parallel_cross_entropy(
            logits, labels.transpose(0, 1).contiguous(), label_smoothing=LABEL_SMOOTHING)
        return loss


def example_module():
    tp = torch.distributed.get_world_size()
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=tp)
    config = ModelParallelConfig(tensor_model_parallel_size=tp, use_cpu_initialization=True,
                                 perform_initialization=True)
    return TinyParallelLM(config)


def example_inputs():
    input_ids = torch.randint(0, VOCAB, (BATCH, SEQ))
    labels = torch.randint(0, VOCAB, (BATCH, SEQ))
    return input_ids, labels
