"""A user's megatron-core GPT (embedding, attention + MLP layer, final LayerNorm, LM head, loss)
built from the user's own TransformerConfig with tensor + sequence parallelism, on megatron-core's
TE-less local spec.

Ground truth: gloo 1 vs 2 ranks agree (loss and every parameter gradient).  The tool: the NumPy
screen finds no difference and the normal forms settle every comparison but the gradient of
linear_qkv.weight, which falls to the solver without cuts and does not finish within the budget on
this machine (not in the test suite; the twin with the seeded fault is).
"""
import torch
from megatron.core import parallel_state
from megatron.core.models.gpt import GPTModel
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
from megatron.core.transformer.transformer_config import TransformerConfig

SEQ, BATCH, HIDDEN, HEADS, LAYERS, VOCAB = 4, 1, 8, 2, 1, 8


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

    def forward(self, tokens, labels):
        position_ids = torch.arange(SEQ).unsqueeze(0).expand(BATCH, SEQ)
        loss = self.gpt(tokens, position_ids, None, labels=labels)
        return loss.mean()


def example_inputs():
    return (torch.randint(0, VOCAB, (BATCH, SEQ)), torch.randint(0, VOCAB, (BATCH, SEQ)))
