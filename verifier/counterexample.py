"""Turn a concrete mismatch into a counterexample a person can read (and JSON can carry)."""
from __future__ import annotations

from typing import Any

import numpy as np

from .engine import rank_coords
from .equivalence import ConcreteOutcome
from .ir import Program
from .report import Counterexample

MAX_LISTED = 32


def plain(value: Any) -> Any:
    """Small nested lists of rounded numbers; large arrays are cut with a marker."""
    array = np.asarray(value)
    if array.dtype.kind == "O":
        return str(value)
    if array.size > MAX_LISTED:
        return {"shape": list(array.shape), "first": [_scalar(v) for v in array.reshape(-1)[:MAX_LISTED]],
                "truncated": True}
    return _round(array.tolist())


def _scalar(value: Any) -> Any:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    return round(float(value), 6)


def _round(value: Any) -> Any:
    return [_round(v) for v in value] if isinstance(value, list) else _scalar(value)


def _at(value: Any, index: tuple[int, ...]) -> Any:
    """The element at ``index`` when the array has that shape, else the whole (small) array."""
    array = np.asarray(value)
    if index and array.ndim == len(index) and all(i < n for i, n in zip(index, array.shape)):
        return _scalar(array[index])
    return plain(array)


def build(program: Program, inputs: dict[str, np.ndarray], outcome: ConcreteOutcome) -> Counterexample:
    name, index, reference, per_rank_values, got = outcome.mismatch
    where = f"{name}[{','.join(map(str, index))}]" if index else name
    labels = [",".join(f"{k}={v}" for k, v in coords.items()) for coords in rank_coords(program.mesh)]
    expected, actual = _at(reference, index), _at(got, index)
    return Counterexample(
        inputs={key: plain(value) for key, value in inputs.items()},
        reference={where: expected},
        per_rank={f"rank {label}": {f"local {name}": plain(value)} for label, value in zip(labels, per_rank_values)},
        value=where,
        confirmed=True,
        note=f"single device computes {where} = {expected}; the ranks together give {actual}",
    )
