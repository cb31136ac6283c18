"""Shim of ``megatron.core.transformer.TransformerConfig`` (a ModelParallelConfig with more fields)."""
from ..model_parallel_config import ModelParallelConfig


class TransformerConfig(ModelParallelConfig):
    pass
