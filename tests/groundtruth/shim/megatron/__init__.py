"""Test-only stand-in for the parts of Megatron-core that the sample programs use.

It is put on ``sys.path`` only inside the ground-truth runner's worker processes.
Every collective is a real ``torch.distributed`` call over the tensor-parallel group,
written after ``megatron/core/tensor_parallel/{mappings,layers,cross_entropy}.py``.
"""
