"""Shim of ``megatron.core.parallel_state``: tensor- and data-parallel groups over torch.distributed.

Rank layout follows Megatron-core: tensor-parallel groups are blocks of consecutive
ranks, data-parallel groups take one rank from each block.  Pipeline parallelism is
not modelled (size 1).
"""
import torch.distributed as dist

_TENSOR_MODEL_PARALLEL_GROUP = None
_DATA_PARALLEL_GROUP = None
_MPU_TENSOR_MODEL_PARALLEL_WORLD_SIZE = None
_MPU_TENSOR_MODEL_PARALLEL_RANK = None


def initialize_model_parallel(tensor_model_parallel_size=1, pipeline_model_parallel_size=1, *args, **kwargs):
    global _TENSOR_MODEL_PARALLEL_GROUP, _DATA_PARALLEL_GROUP
    if pipeline_model_parallel_size != 1:
        raise NotImplementedError("the Megatron shim models pipeline_model_parallel_size == 1 only")
    world = dist.get_world_size()
    tp = tensor_model_parallel_size
    if world % tp:
        raise RuntimeError(f"world size ({world}) is not divisible by tensor_model_parallel_size ({tp})")
    rank = dist.get_rank()
    for start in range(0, world, tp):
        ranks = list(range(start, start + tp))
        group = dist.new_group(ranks) if tp != world else dist.group.WORLD
        if rank in ranks:
            _TENSOR_MODEL_PARALLEL_GROUP = group
    dp = world // tp
    for offset in range(tp):
        ranks = list(range(offset, world, tp))
        group = dist.new_group(ranks) if dp != world else dist.group.WORLD
        if rank in ranks:
            _DATA_PARALLEL_GROUP = group


def model_parallel_is_initialized():
    return _TENSOR_MODEL_PARALLEL_GROUP is not None


def destroy_model_parallel():
    global _TENSOR_MODEL_PARALLEL_GROUP, _DATA_PARALLEL_GROUP
    global _MPU_TENSOR_MODEL_PARALLEL_WORLD_SIZE, _MPU_TENSOR_MODEL_PARALLEL_RANK
    _TENSOR_MODEL_PARALLEL_GROUP = None
    _DATA_PARALLEL_GROUP = None
    _MPU_TENSOR_MODEL_PARALLEL_WORLD_SIZE = None
    _MPU_TENSOR_MODEL_PARALLEL_RANK = None


def get_tensor_model_parallel_group(check_initialized=True):
    if check_initialized and _TENSOR_MODEL_PARALLEL_GROUP is None:
        raise AssertionError("tensor model parallel group is not initialized")
    return _TENSOR_MODEL_PARALLEL_GROUP


def get_data_parallel_group(*args, **kwargs):
    if _DATA_PARALLEL_GROUP is None:
        raise AssertionError("data parallel group is not initialized")
    return _DATA_PARALLEL_GROUP


def set_tensor_model_parallel_world_size(world_size):
    global _MPU_TENSOR_MODEL_PARALLEL_WORLD_SIZE
    _MPU_TENSOR_MODEL_PARALLEL_WORLD_SIZE = world_size


def set_tensor_model_parallel_rank(rank):
    global _MPU_TENSOR_MODEL_PARALLEL_RANK
    _MPU_TENSOR_MODEL_PARALLEL_RANK = rank


def get_tensor_model_parallel_world_size():
    if _MPU_TENSOR_MODEL_PARALLEL_WORLD_SIZE is not None:
        return _MPU_TENSOR_MODEL_PARALLEL_WORLD_SIZE
    return dist.get_world_size(group=get_tensor_model_parallel_group())


def get_tensor_model_parallel_rank():
    if _MPU_TENSOR_MODEL_PARALLEL_RANK is not None:
        return _MPU_TENSOR_MODEL_PARALLEL_RANK
    return dist.get_rank(group=get_tensor_model_parallel_group())


def get_data_parallel_world_size(*args, **kwargs):
    return dist.get_world_size(group=get_data_parallel_group())


def get_data_parallel_rank(*args, **kwargs):
    return dist.get_rank(group=get_data_parallel_group())


def get_pipeline_model_parallel_world_size():
    return 1


def get_pipeline_model_parallel_rank():
    return 0
