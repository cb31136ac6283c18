"""Mutation campaign helpers: source mutation operators, batched ground truth, tool runs.

Used by ``benchmarks/mutate.py`` and ``tests/trust/test_mutation_sample.py``.
"""
