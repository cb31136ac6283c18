"""A mixture-of-experts layer's all-reduce is cut by normal forms: each rank ``index_add_``s its
row-parallel partial sums of the experts' outputs into the token rows named by symbolic ids, the
ranks' sum is all-reduced, and that value equals the single device's element by element once the
writes are a flat sum of ``If(id == row, value, 0)`` and the branches of one condition merge
(transformers' eager experts loop: mixtral's 1-layer check went from no answer within 600 s to
verified in 12 CPU s).  No solver is given (``equal=None``): normal forms alone close it."""
from __future__ import annotations

import numpy as np
import z3

import verifier.rules.aten  # noqa: F401  (registers the aten rules)
from verifier.backends import Z3Backend
from verifier.registry import REGISTRY
from verifier.traced_check import _block_of

TOKENS, HIDDEN, PICKED, INTERMEDIATE = 4, 2, 3, 32  # 32: the product Z3's default som_blowup left unexpanded


def _experts_output(columns: range) -> np.ndarray:
    """zeros.index_add_(0, ids, (act[:, columns] @ down[:, columns]^T) * weight): one expert's rows."""
    xp = Z3Backend()
    ids = np.array([z3.Int(f"ids[{k}]") for k in range(PICKED)], dtype=object)
    act = np.array([[z3.Real(f"act[{k},{f}]") for f in range(INTERMEDIATE)] for k in range(PICKED)], dtype=object)
    down = np.array([[z3.Real(f"down[{h},{f}]") for f in range(INTERMEDIATE)] for h in range(HIDDEN)], dtype=object)
    weight = [z3.Real(f"weight[{k}]") for k in range(PICKED)]
    rows = np.array([[z3.Sum([act[k, f] * down[h, f] for f in columns]) * weight[k] for h in range(HIDDEN)]
                     for k in range(PICKED)], dtype=object)
    zeros = np.full((TOKENS, HIDDEN), z3.RealVal(0), dtype=object)
    return np.asarray(REGISTRY.get("aten.index_add.default").evaluate(xp, [zeros, ids, rows], {"dim": 0}, None)[0],
                      dtype=object)


def test_the_ranks_all_reduced_expert_rows_equal_one_devices_by_normal_forms():
    half = INTERMEDIATE // 2
    all_reduced = _experts_output(range(half)) + _experts_output(range(half, INTERMEDIATE))
    whole = tuple(slice(None) for _ in range(2))
    assert _block_of(all_reduced, _experts_output(range(INTERMEDIATE)), True, None, by_solver=True) == whole


def test_one_ranks_partial_sum_is_not_the_single_devices_value():
    half = INTERMEDIATE // 2
    assert _block_of(_experts_output(range(half)), _experts_output(range(INTERMEDIATE)), True, None,
                     by_solver=True) is None
