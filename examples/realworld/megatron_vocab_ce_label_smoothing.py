"""megatron-core `vocab_parallel_cross_entropy` with label smoothing on vocab-sharded logits.

A GPT-style loss head: ColumnParallelLinear (no gather) yields logits split over the
vocabulary and the loss is computed without gathering them, with label smoothing 0.1.
In megatron-core (checked with 0.16) the smoothing term uses the *partition's* vocabulary
size and the mean of the log-probabilities over the *local* partition only (no all-reduce),
so for tp > 1 the loss differs from tp = 1, and differs between ranks.  The driver line
that brings it in is the `vocab_parallel_cross_entropy(...)` call.

violations
"""
import torch
from megatron.core import parallel_state, tensor_parallel
from megatron.core.model_parallel_config import ModelParallelConfig

VOCAB, HIDDEN, SEQ, BATCH = 56, 16, 12, 2


class SmoothedLMHead(torch.nn.Module):
    def __init__(self, config: ModelParallelConfig, label_smoothing: float = 0.1):
        super().__init__()
        self.label_smoothing = label_smoothing
        self.output_layer = tensor_parallel.ColumnParallelLinear(
            HIDDEN, VOCAB, config=config, init_method=torch.nn.init.normal_, bias=False,
            gather_output=False)

    def forward(self, hidden, labels):
        logits, _ = self.output_layer(hidden)
        return tensor_parallel.vocab_parallel_cross_entropy(logits, labels, label_smoothing=self.label_smoothing)


def example_module():
    tp = torch.distributed.get_world_size()
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=tp)
    config = ModelParallelConfig(tensor_model_parallel_size=tp, use_cpu_initialization=True,
                                 perform_initialization=True)
    return SmoothedLMHead(config)


def example_inputs():
    return torch.randn(SEQ, BATCH, HIDDEN, requires_grad=True), torch.randint(0, VOCAB, (SEQ, BATCH))
