"""Shim of ``megatron.core.model_parallel_config.ModelParallelConfig``.

Only the fields the shim layers read have a meaning; other keyword arguments are kept
as attributes so that configs written for real Megatron-core construct unchanged.
"""
import torch

_DEFAULTS = {
    "tensor_model_parallel_size": 1,
    "pipeline_model_parallel_size": 1,
    "sequence_parallel": False,
    "params_dtype": torch.float32,
    "use_cpu_initialization": False,
    "perform_initialization": True,
    "gradient_accumulation_fusion": False,
    "async_tensor_model_parallel_allreduce": False,
    "tp_comm_overlap": False,
}


class ModelParallelConfig:
    def __init__(self, **kwargs):
        for name, value in _DEFAULTS.items():
            setattr(self, name, value)
        for name, value in kwargs.items():
            setattr(self, name, value)

    def __repr__(self):
        return f"ModelParallelConfig({self.__dict__!r})"
