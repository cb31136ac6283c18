"""A user's megatron-core GPT and the parallel configuration it trains with.

``example_module()`` builds the model from the user's own TransformerConfig (tensor + sequence
parallel, grouped-query attention, megatron-core's TE-less local spec) at reduced sizes: that is
the code `verify-agent plan` traces, forward and backward.  ``TRAINING_PLAN`` is the real run:
the 405B-shaped configuration: 126 layers, TP=8 with sequence parallelism, PP=16
(1F1B), DP=64 with the distributed optimizer, 16 micro-batches.

    verify-agent plan examples/plans/megatron_gpt_405b_shaped.py
"""
import torch
from megatron.core import parallel_state
from megatron.core.models.gpt import GPTModel
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
from megatron.core.transformer.transformer_config import TransformerConfig

SEQ, BATCH, HIDDEN, HEADS, GROUPS, LAYERS, VOCAB = 4, 1, 8, 4, 2, 1, 8

TRAINING_PLAN = {
    "num_layers": 126, "hidden_size": 16384, "ffn_hidden_size": 53248, "num_attention_heads": 128,
    "num_query_groups": 8, "kv_channels": 128, "vocab_size": 128256, "seq_length": 8192,
    "tensor_model_parallel_size": 8, "sequence_parallel": True, "pipeline_model_parallel_size": 16,
    "data_parallel_size": 64, "num_microbatches": 16, "use_distributed_optimizer": True,
}


def example_module():
    tp = torch.distributed.get_world_size()
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=tp)
    config = TransformerConfig(num_layers=LAYERS, hidden_size=HIDDEN, num_attention_heads=HEADS,
                               num_query_groups=GROUPS, tensor_model_parallel_size=tp, sequence_parallel=tp > 1,
                               use_cpu_initialization=True, hidden_dropout=0.0, attention_dropout=0.0,
                               bias_activation_fusion=False, bias_dropout_fusion=False,
                               masked_softmax_fusion=False, gradient_accumulation_fusion=False,
                               persist_layer_norm=False)
    return GPT(config)


class GPT(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.gpt = GPTModel(config, get_gpt_layer_local_spec(), vocab_size=VOCAB, max_sequence_length=SEQ)

    def forward(self, tokens, labels):
        position_ids = torch.arange(SEQ).unsqueeze(0).expand(BATCH, SEQ)
        loss = self.gpt(tokens, position_ids, None, labels=labels)
        return loss.mean()


def example_inputs():
    return (torch.randint(0, VOCAB, (BATCH, SEQ)), torch.randint(0, VOCAB, (BATCH, SEQ)))
