"""Shim of ``megatron.core.tensor_parallel`` (public names as in Megatron-core)."""
from .cross_entropy import vocab_parallel_cross_entropy
from .layers import ColumnParallelLinear, RowParallelLinear, VocabParallelEmbedding
from .mappings import (all_gather_last_dim_from_tensor_parallel_region, copy_to_tensor_model_parallel_region,
                       gather_from_sequence_parallel_region, gather_from_tensor_model_parallel_region,
                       reduce_from_tensor_model_parallel_region, reduce_scatter_last_dim_to_tensor_parallel_region,
                       reduce_scatter_to_sequence_parallel_region, scatter_to_sequence_parallel_region,
                       scatter_to_tensor_model_parallel_region)

__all__ = [
    "ColumnParallelLinear", "RowParallelLinear", "VocabParallelEmbedding", "vocab_parallel_cross_entropy",
    "copy_to_tensor_model_parallel_region", "reduce_from_tensor_model_parallel_region",
    "scatter_to_tensor_model_parallel_region", "gather_from_tensor_model_parallel_region",
    "scatter_to_sequence_parallel_region", "gather_from_sequence_parallel_region",
    "reduce_scatter_to_sequence_parallel_region", "all_gather_last_dim_from_tensor_parallel_region",
    "reduce_scatter_last_dim_to_tensor_parallel_region",
]
