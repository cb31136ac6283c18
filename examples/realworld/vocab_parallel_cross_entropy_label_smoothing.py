"""Hand-written vocab-parallel cross entropy with label smoothing (forward, raw torch.distributed).

Logits arrive sharded over the vocabulary (each rank slices its block of the last dim).
The loss is computed without gathering them: the max, the sum of exponentials, the target
logit and the sum of logits are each reduced across ranks, and the smoothing term averages
the log-probabilities over the *global* vocabulary.

verified
"""
import torch
import torch.distributed as dist

TOKENS, VOCAB = 6, 56
LABEL_SMOOTHING = 0.1


def vocab_parallel_cross_entropy(local_logits, target, label_smoothing, vocab_size):
    rank = dist.get_rank()
    part = local_logits.size(-1)
    start = rank * part
    logits_max = local_logits.max(dim=-1).values
    dist.all_reduce(logits_max, op=dist.ReduceOp.MAX)
    shifted = local_logits - logits_max.unsqueeze(-1)

    in_range = (target >= start) & (target < start + part)
    local_target = (target - start).clamp(0, part - 1)
    target_logit = shifted.gather(-1, local_target.unsqueeze(-1)).squeeze(-1) * in_range
    sum_exp = shifted.exp().sum(dim=-1)
    sum_logits = shifted.sum(dim=-1)
    dist.all_reduce(target_logit)
    dist.all_reduce(sum_exp)
    dist.all_reduce(sum_logits)

    log_z = sum_exp.log()
    nll = log_z - target_logit
    mean_log_prob = sum_logits / vocab_size - log_z
    return (1.0 - label_smoothing) * nll - label_smoothing * mean_log_prob


def forward(logits, target):
    rank, world = dist.get_rank(), dist.get_world_size()
    local_logits = logits.chunk(world, dim=-1)[rank]
    return vocab_parallel_cross_entropy(local_logits, target, LABEL_SMOOTHING, VOCAB)


def example_inputs():
    # forward only: the raw all-reduces have no autograd, the logits' gradient is not modelled here
    return torch.randn(TOKENS, VOCAB, requires_grad=False), torch.randint(0, VOCAB, (TOKENS,))
