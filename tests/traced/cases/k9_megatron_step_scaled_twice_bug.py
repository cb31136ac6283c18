"""A megatron-core training step as a script writes it: the script sets up its own parallel sizes (every rank
data-parallel), builds a GPTModel under megatron-core's DistributedDataParallel, runs its forward-backward
schedule over this rank's micro-batches (one row each) and finalize_model_grads; returns every parameter's
main_grad, flattened.  The bug: the loss divided by the data-parallel size, which megatron-core's
DDP already averages over: every gradient scaled twice."""
import torch
from megatron.core import parallel_state, tensor_parallel
from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig, finalize_model_grads
from megatron.core.models.gpt import GPTModel
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
from megatron.core.pipeline_parallel import get_forward_backward_func
from megatron.core.transformer.transformer_config import TransformerConfig

GLOBAL_BATCH, SEQ, VOCAB, HIDDEN = 4, 4, 8, 8


def forward(tokens, labels):
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=1)
    torch.manual_seed(1234)
    tensor_parallel.model_parallel_cuda_manual_seed(1234)
    config = TransformerConfig(num_layers=1, hidden_size=HIDDEN, num_attention_heads=2,
                               use_cpu_initialization=True, hidden_dropout=0.0, attention_dropout=0.0,
                               bias_activation_fusion=False, bias_dropout_fusion=False,
                               masked_softmax_fusion=False, gradient_accumulation_fusion=False,
                               persist_layer_norm=False)
    gpt = GPTModel(config, get_gpt_layer_local_spec(), vocab_size=VOCAB, max_sequence_length=SEQ)
    model = DistributedDataParallel(config=config, ddp_config=DistributedDataParallelConfig(), module=gpt)
    config.finalize_model_grads_func = finalize_model_grads
    dp = parallel_state.get_data_parallel_world_size()
    rank = parallel_state.get_data_parallel_rank()
    mine_tokens = tokens.chunk(dp)[rank]
    mine_labels = labels.chunk(dp)[rank]
    batches = iter([(mine_tokens[i:i + 1], mine_labels[i:i + 1]) for i in range(mine_tokens.shape[0])])

    def forward_step(data_iterator, model):
        t, l = next(data_iterator)
        position_ids = torch.arange(SEQ).unsqueeze(0)
        out = model(t, position_ids, None, labels=l)

        def loss_func(output_tensor):
            loss = output_tensor.float().mean() / parallel_state.get_data_parallel_world_size()  # the bug
            return loss, {"loss": loss.detach()}
        return out, loss_func

    get_forward_backward_func()(forward_step_func=forward_step, data_iterator=batches, model=[model],
                                num_microbatches=mine_tokens.shape[0], seq_length=SEQ, micro_batch_size=1,
                                forward_only=False)
    return torch.cat([p.main_grad.reshape(-1) for p in model.parameters()])


def example_inputs():
    return (torch.randint(0, VOCAB, (GLOBAL_BATCH, SEQ)), torch.randint(0, VOCAB, (GLOBAL_BATCH, SEQ)))
