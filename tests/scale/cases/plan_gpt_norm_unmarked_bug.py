"""`verify-agent plan` on a user's megatron-core GPT (embedding, attention + MLP layer, final LayerNorm, LM head, loss)
built from the user's own TransformerConfig with tensor + sequence parallelism, on megatron-core's
TE-less local spec.

The bug: the final LayerNorm is swapped for a plain torch LayerNorm whose weights are not marked
sequence_parallel, so megatron's gradient finalisation never all-reduces their gradients: each rank
keeps the part from its own sequence shard.

Expected: violations (gloo 1 vs 2 ranks: the final LayerNorm's gradients differ).
"""
import torch
from megatron.core import parallel_state
from megatron.core.models.gpt import GPTModel
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
from megatron.core.transformer.transformer_config import TransformerConfig

SEQ, BATCH, HIDDEN, HEADS, LAYERS, VOCAB = 4, 1, 8, 2, 1, 8

TRAINING_PLAN = {
    "num_layers": 8, "hidden_size": 1024, "ffn_hidden_size": 4096, "num_attention_heads": 16,
    "vocab_size": 32000, "seq_length": 2048, "tensor_model_parallel_size": 2, "sequence_parallel": True,
    "pipeline_model_parallel_size": 2, "data_parallel_size": 2, "num_microbatches": 4,
}


def example_module():
    tp = torch.distributed.get_world_size()
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=tp)
    config = TransformerConfig(num_layers=LAYERS, hidden_size=HIDDEN, num_attention_heads=HEADS,
                               tensor_model_parallel_size=tp, sequence_parallel=tp > 1,
                               use_cpu_initialization=True, hidden_dropout=0.0, attention_dropout=0.0,
                               bias_activation_fusion=False, bias_dropout_fusion=False,
                               masked_softmax_fusion=False, gradient_accumulation_fusion=False,
                               persist_layer_norm=False)
    return GPT(config)


class GPT(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.gpt = GPTModel(config, get_gpt_layer_local_spec(), vocab_size=VOCAB, max_sequence_length=SEQ)
        self.gpt.decoder.final_layernorm = torch.nn.LayerNorm(HIDDEN)

    def forward(self, tokens, labels):
        position_ids = torch.arange(SEQ).unsqueeze(0).expand(BATCH, SEQ)
        loss = self.gpt(tokens, position_ids, None, labels=labels)
        return loss.mean()


def example_inputs():
    return (torch.randint(0, VOCAB, (BATCH, SEQ)), torch.randint(0, VOCAB, (BATCH, SEQ)))
