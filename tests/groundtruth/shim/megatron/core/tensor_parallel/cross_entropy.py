"""Shim of ``megatron.core.tensor_parallel.cross_entropy.vocab_parallel_cross_entropy``.

Logits are split along the last (vocabulary) dimension; the max and the softmax
denominator and the target logit are combined with all-reduces (MAX, SUM, SUM).
"""
import torch
import torch.distributed as dist

from .. import parallel_state as ps


class _VocabParallelCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, vocab_parallel_logits, target, label_smoothing=0.0):
        group = ps.get_tensor_model_parallel_group()
        logits_max = torch.max(vocab_parallel_logits, dim=-1)[0]
        dist.all_reduce(logits_max, op=dist.ReduceOp.MAX, group=group)
        logits = vocab_parallel_logits - logits_max.unsqueeze(dim=-1)

        partition_vocab_size = logits.size()[-1]
        rank = ps.get_tensor_model_parallel_rank()
        vocab_start = rank * partition_vocab_size
        vocab_end = vocab_start + partition_vocab_size

        target_mask = (target < vocab_start) | (target >= vocab_end)
        masked_target = target.clone() - vocab_start
        masked_target[target_mask] = 0

        logits_2d = logits.view(-1, partition_vocab_size)
        masked_target_1d = masked_target.view(-1)
        arange_1d = torch.arange(0, logits_2d.size()[0], device=logits_2d.device)
        predicted_logits_1d = logits_2d[arange_1d, masked_target_1d].clone().contiguous()
        predicted_logits = predicted_logits_1d.view_as(target)
        predicted_logits[target_mask] = 0.0

        exp_logits = torch.exp(logits)
        sum_exp_logits = exp_logits.sum(dim=-1)
        dist.all_reduce(predicted_logits, op=dist.ReduceOp.SUM, group=group)
        dist.all_reduce(sum_exp_logits, op=dist.ReduceOp.SUM, group=group)

        loss = torch.log(sum_exp_logits) - predicted_logits
        exp_logits.div_(sum_exp_logits.unsqueeze(dim=-1))

        vocab_size = partition_vocab_size * ps.get_tensor_model_parallel_world_size()
        if label_smoothing > 0:
            smoothing = label_smoothing * vocab_size / (vocab_size - 1)
            log_probs = torch.log(exp_logits)
            mean_log_probs = log_probs.mean(dim=-1)
            dist.all_reduce(mean_log_probs, op=dist.ReduceOp.SUM, group=group)
            mean_log_probs = mean_log_probs / ps.get_tensor_model_parallel_world_size()
            loss = (1.0 - smoothing) * loss - smoothing * mean_log_probs

        ctx.label_smoothing = label_smoothing
        ctx.vocab_size = vocab_size
        ctx.save_for_backward(exp_logits, target_mask, masked_target_1d)
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        softmax, target_mask, masked_target_1d = ctx.saved_tensors
        grad_input = softmax.clone()
        partition_vocab_size = softmax.size()[-1]
        grad_2d = grad_input.view(-1, partition_vocab_size)
        arange_1d = torch.arange(start=0, end=grad_2d.size()[0], device=grad_2d.device)
        softmax_update = 1.0 - target_mask.view(-1).to(grad_2d.dtype)
        if ctx.label_smoothing > 0:
            smoothing = ctx.label_smoothing * ctx.vocab_size / (ctx.vocab_size - 1)
            grad_2d[arange_1d, masked_target_1d] -= (1.0 - smoothing) * softmax_update
            grad_2d -= smoothing / ctx.vocab_size
        else:
            grad_2d[arange_1d, masked_target_1d] -= softmax_update
        grad_input.mul_(grad_output.unsqueeze(dim=-1))
        return grad_input, None, None


def vocab_parallel_cross_entropy(vocab_parallel_logits, target, label_smoothing=0.0):
    """Per-token cross-entropy of logits split along the vocabulary dimension."""
    return _VocabParallelCrossEntropy.apply(vocab_parallel_logits, target, label_smoothing)
