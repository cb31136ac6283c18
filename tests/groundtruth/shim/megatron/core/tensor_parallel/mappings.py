"""Shim of ``megatron.core.tensor_parallel.mappings``: the autograd-aware collectives.

Forward/backward pairs as in Megatron-core:
copy (identity / all-reduce), reduce (all-reduce / identity), scatter (split / all-gather),
gather (all-gather / split), along the last dim for tensor parallelism and along the
first dim for sequence parallelism.
"""
import torch
import torch.distributed as dist

from .. import parallel_state as ps


def _world():
    return ps.get_tensor_model_parallel_world_size()


def _group():
    return ps.get_tensor_model_parallel_group()


def _reduce(input_):
    if _world() == 1:
        return input_
    input_ = input_.contiguous()
    dist.all_reduce(input_, group=_group())
    return input_


def _split_along_last_dim(input_):
    world = _world()
    if world == 1:
        return input_
    return input_.chunk(world, dim=-1)[ps.get_tensor_model_parallel_rank()].contiguous()


def _split_along_first_dim(input_):
    world = _world()
    if world == 1:
        return input_
    if input_.size(0) % world:
        raise RuntimeError("first dimension of the tensor should be divisible by tensor parallel size")
    return input_.chunk(world, dim=0)[ps.get_tensor_model_parallel_rank()].contiguous()


def _gather_along_last_dim(input_):
    world = _world()
    if world == 1:
        return input_
    size = list(input_.size())
    size[0] *= world
    output = torch.empty(size, dtype=input_.dtype, device=input_.device)
    dist.all_gather_into_tensor(output, input_.contiguous(), group=_group())
    return torch.cat(output.chunk(world, dim=0), dim=-1).contiguous()


def _gather_along_first_dim(input_):
    world = _world()
    if world == 1:
        return input_
    size = list(input_.size())
    size[0] *= world
    output = torch.empty(size, dtype=input_.dtype, device=input_.device)
    dist.all_gather_into_tensor(output, input_.contiguous(), group=_group())
    return output


def _reduce_scatter_along_first_dim(input_):
    world = _world()
    if world == 1:
        return input_
    size = list(input_.size())
    if size[0] % world:
        raise RuntimeError("first dimension of the tensor should be divisible by tensor parallel size")
    size[0] //= world
    output = torch.empty(size, dtype=input_.dtype, device=input_.device)
    dist.reduce_scatter_tensor(output, input_.contiguous(), group=_group())
    return output


def _reduce_scatter_along_last_dim(input_):
    world = _world()
    if world == 1:
        return input_
    target_shape = list(input_.size())
    target_shape[-1] //= world
    input_ = input_.reshape(-1, input_.shape[-1])
    split = torch.cat(input_.chunk(world, dim=-1), dim=0)
    output = _reduce_scatter_along_first_dim(split)
    return output.reshape(target_shape)


class _CopyToModelParallelRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_):
        return input_

    @staticmethod
    def backward(ctx, grad_output):
        return _reduce(grad_output)


class _ReduceFromModelParallelRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_):
        return _reduce(input_)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output


class _ScatterToModelParallelRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_):
        return _split_along_last_dim(input_)

    @staticmethod
    def backward(ctx, grad_output):
        return _gather_along_last_dim(grad_output)


class _GatherFromModelParallelRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_):
        return _gather_along_last_dim(input_)

    @staticmethod
    def backward(ctx, grad_output):
        return _split_along_last_dim(grad_output)


class _ScatterToSequenceParallelRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_):
        return _split_along_first_dim(input_)

    @staticmethod
    def backward(ctx, grad_output):
        return _gather_along_first_dim(grad_output)


class _GatherFromSequenceParallelRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_, tensor_parallel_output_grad=True):
        ctx.tensor_parallel_output_grad = tensor_parallel_output_grad
        return _gather_along_first_dim(input_)

    @staticmethod
    def backward(ctx, grad_output):
        # If the consumer of the gathered tensor is tensor-parallel, every rank holds a
        # partial gradient: reduce-scatter it.  Otherwise the gradient is replicated: split it.
        if ctx.tensor_parallel_output_grad:
            return _reduce_scatter_along_first_dim(grad_output), None
        return _split_along_first_dim(grad_output), None


class _ReduceScatterToSequenceParallelRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_):
        return _reduce_scatter_along_first_dim(input_)

    @staticmethod
    def backward(ctx, grad_output):
        return _gather_along_first_dim(grad_output)


class _AllGatherFromTensorParallelRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_):
        return _gather_along_last_dim(input_)

    @staticmethod
    def backward(ctx, grad_output):
        return _reduce_scatter_along_last_dim(grad_output)


class _ReduceScatterToTensorParallelRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input_):
        return _reduce_scatter_along_last_dim(input_)

    @staticmethod
    def backward(ctx, grad_output):
        return _gather_along_last_dim(grad_output)


def copy_to_tensor_model_parallel_region(input_):
    return _CopyToModelParallelRegion.apply(input_)


def reduce_from_tensor_model_parallel_region(input_):
    return _ReduceFromModelParallelRegion.apply(input_)


def scatter_to_tensor_model_parallel_region(input_):
    return _ScatterToModelParallelRegion.apply(input_)


def gather_from_tensor_model_parallel_region(input_):
    return _GatherFromModelParallelRegion.apply(input_)


def scatter_to_sequence_parallel_region(input_):
    return _ScatterToSequenceParallelRegion.apply(input_)


def gather_from_sequence_parallel_region(input_, tensor_parallel_output_grad=True, group=None,
                                         output_split_sizes=None, use_global_buffer=False):
    if group is not None or output_split_sizes is not None:
        raise NotImplementedError("the Megatron shim supports the default tensor-parallel group only")
    return _GatherFromSequenceParallelRegion.apply(input_, tensor_parallel_output_grad)


def reduce_scatter_to_sequence_parallel_region(input_, group=None, input_split_sizes=None,
                                               use_global_buffer=False):
    if group is not None or input_split_sizes is not None:
        raise NotImplementedError("the Megatron shim supports the default tensor-parallel group only")
    return _ReduceScatterToSequenceParallelRegion.apply(input_)


def all_gather_last_dim_from_tensor_parallel_region(input_):
    return _AllGatherFromTensorParallelRegion.apply(input_)


def reduce_scatter_last_dim_to_tensor_parallel_region(input_):
    return _ReduceScatterToTensorParallelRegion.apply(input_)
