"""Shim of ``megatron.core.tensor_parallel.layers``.

Weights are held in the Megatron layout (``[out, in]`` as for ``F.linear``); the
partition is the contiguous block ``rank`` of the split dimension (stride 1).  Forward
semantics (and so, through the mappings, backward semantics) follow Megatron-core;
fused kernels, gradient-accumulation fusion and communication overlap are left out.
"""
import torch
import torch.nn.functional as F
from torch.nn.parameter import Parameter

from .. import parallel_state as ps
from .mappings import (copy_to_tensor_model_parallel_region, gather_from_sequence_parallel_region,
                       gather_from_tensor_model_parallel_region, reduce_from_tensor_model_parallel_region,
                       reduce_scatter_to_sequence_parallel_region, scatter_to_tensor_model_parallel_region)


def _divide(numerator, denominator):
    if numerator % denominator:
        raise AssertionError(f"{numerator} is not divisible by {denominator}")
    return numerator // denominator


def _new_weight(shape, config, init_method, partition_dim):
    weight = Parameter(torch.empty(*shape, dtype=getattr(config, "params_dtype", torch.float32)))
    if getattr(config, "perform_initialization", True) and init_method is not None:
        init_method(weight)
    weight.tensor_model_parallel = True
    weight.partition_dim = partition_dim
    weight.partition_stride = 1
    return weight


class ColumnParallelLinear(torch.nn.Module):
    """Y = X A + b with A split along its output (column) dimension."""

    def __init__(self, input_size, output_size, *, config, init_method, bias=True, gather_output=False,
                 stride=1, keep_master_weight_for_test=False, skip_bias_add=False,
                 skip_weight_param_allocation=False, embedding_activation_buffer=None,
                 grad_output_buffer=None, is_expert=False, tp_comm_buffer_name=None,
                 disable_grad_reduce=False):
        super().__init__()
        if stride != 1:
            raise NotImplementedError("the Megatron shim supports stride=1 only")
        self.input_size = input_size
        self.output_size = output_size
        self.gather_output = gather_output
        self.skip_bias_add = skip_bias_add
        self.config = config
        self.sequence_parallel = getattr(config, "sequence_parallel", False)
        self.disable_grad_reduce = disable_grad_reduce
        world = ps.get_tensor_model_parallel_world_size()
        self.output_size_per_partition = _divide(output_size, world)
        if skip_weight_param_allocation:
            self.weight = None
        else:
            self.weight = _new_weight((self.output_size_per_partition, input_size), config, init_method, 0)
        if bias:
            self.bias = Parameter(torch.zeros(self.output_size_per_partition,
                                              dtype=getattr(config, "params_dtype", torch.float32)))
            self.bias.tensor_model_parallel = True
            self.bias.partition_dim = 0
        else:
            self.register_parameter("bias", None)
        if self.sequence_parallel and ps.get_tensor_model_parallel_world_size() <= 1:
            self.sequence_parallel = False

    def forward(self, input_, weight=None):
        if weight is None:
            if self.weight is None:
                raise RuntimeError("weight was not supplied to ColumnParallelLinear forward pass "
                                   "and skip_weight_param_allocation is True.")
            weight = self.weight
        bias = self.bias if not self.skip_bias_add else None
        if self.sequence_parallel:
            # Megatron all-gathers the sequence shards inside the linear's autograd function
            # and reduce-scatters the input gradient in backward.
            input_parallel = gather_from_sequence_parallel_region(input_, tensor_parallel_output_grad=True)
        elif self.disable_grad_reduce:
            input_parallel = input_
        else:
            input_parallel = copy_to_tensor_model_parallel_region(input_)
        output_parallel = F.linear(input_parallel, weight, bias)
        if self.gather_output:
            if self.sequence_parallel:
                raise AssertionError("gather_output is incompatible with sequence parallelism")
            output = gather_from_tensor_model_parallel_region(output_parallel)
        else:
            output = output_parallel
        output_bias = self.bias if self.skip_bias_add else None
        return output, output_bias


class RowParallelLinear(torch.nn.Module):
    """Y = X A + b with A split along its input (row) dimension and X split along its last dimension."""

    def __init__(self, input_size, output_size, *, config, init_method, bias, input_is_parallel,
                 skip_bias_add, stride=1, keep_master_weight_for_test=False, is_expert=False,
                 tp_comm_buffer_name=None):
        super().__init__()
        if stride != 1:
            raise NotImplementedError("the Megatron shim supports stride=1 only")
        self.input_size = input_size
        self.output_size = output_size
        self.input_is_parallel = input_is_parallel
        self.skip_bias_add = skip_bias_add
        self.config = config
        self.sequence_parallel = getattr(config, "sequence_parallel", False)
        if self.sequence_parallel and not input_is_parallel:
            raise RuntimeError("To enable `sequence_parallel`, `input_is_parallel` must be `True`")
        world = ps.get_tensor_model_parallel_world_size()
        self.input_size_per_partition = _divide(input_size, world)
        self.weight = _new_weight((output_size, self.input_size_per_partition), config, init_method, 1)
        if bias:
            self.bias = Parameter(torch.zeros(output_size, dtype=getattr(config, "params_dtype", torch.float32)))
            self.bias.sequence_parallel = self.sequence_parallel
        else:
            self.register_parameter("bias", None)

    def forward(self, input_):
        if self.input_is_parallel:
            input_parallel = input_
        else:
            input_parallel = scatter_to_tensor_model_parallel_region(input_)
        output_parallel = F.linear(input_parallel, self.weight)
        if self.sequence_parallel:
            output_ = reduce_scatter_to_sequence_parallel_region(output_parallel)
        else:
            output_ = reduce_from_tensor_model_parallel_region(output_parallel)
        if not self.skip_bias_add:
            output = (output_ + self.bias) if self.bias is not None else output_
            output_bias = None
        else:
            output = output_
            output_bias = self.bias
        return output, output_bias


class VocabParallelEmbedding(torch.nn.Module):
    """Embedding table split along the vocabulary; ids owned by other ranks are masked to zero."""

    def __init__(self, num_embeddings, embedding_dim, *, init_method, config, reduce_scatter_embeddings=False):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.reduce_scatter_embeddings = reduce_scatter_embeddings
        world = ps.get_tensor_model_parallel_world_size()
        rank = ps.get_tensor_model_parallel_rank()
        per_partition = _divide(num_embeddings, world)
        self.vocab_start_index = rank * per_partition
        self.vocab_end_index = self.vocab_start_index + per_partition
        self.num_embeddings_per_partition = per_partition
        self.weight = _new_weight((per_partition, embedding_dim), config, init_method, 0)

    def forward(self, input_):
        world = ps.get_tensor_model_parallel_world_size()
        if world > 1:
            input_mask = (input_ < self.vocab_start_index) | (input_ >= self.vocab_end_index)
            masked_input = input_.clone() - self.vocab_start_index
            masked_input[input_mask] = 0
        else:
            masked_input = input_
        output_parallel = F.embedding(masked_input, self.weight)
        if world > 1:
            output_parallel[input_mask, :] = 0.0
        if self.reduce_scatter_embeddings:
            output_parallel = output_parallel.transpose(0, 1).contiguous()
            return reduce_scatter_to_sequence_parallel_region(output_parallel)
        return reduce_from_tensor_model_parallel_region(output_parallel)
