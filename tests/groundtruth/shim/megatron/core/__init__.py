"""Shim of ``megatron.core`` (see ``megatron/__init__.py``)."""
from . import parallel_state, tensor_parallel
from .model_parallel_config import ModelParallelConfig

__all__ = ["parallel_state", "tensor_parallel", "ModelParallelConfig"]
