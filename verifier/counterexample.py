"""Turn a concrete mismatch into a counterexample a person can read (and JSON can carry)."""
from __future__ import annotations

from typing import Any

import numpy as np

from .engine import rank_coords
from .equivalence import ConcreteOutcome
from .ir import Program
from .report import Counterexample

MAX_LISTED = 32


def _plain(value: Any) -> Any:
    """Small nested lists of rounded numbers; large arrays are cut with a marker."""
    array = np.asarray(value)
    if array.dtype.kind == "O":
        return str(value)
    if array.size > MAX_LISTED:
        flat = array.reshape(-1)[:MAX_LISTED]
        return {"shape": list(array.shape), "first": [_scalar(v) for v in flat], "truncated": True}
    return _round(array.tolist())


def _scalar(value: Any) -> Any:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    return round(float(value), 6)


def _round(value: Any) -> Any:
    if isinstance(value, list):
        return [_round(v) for v in value]
    return _scalar(value)


def _element(value: Any, index: tuple[int, ...]) -> Any:
    array = np.asarray(value)
    try:
        return _scalar(array[index]) if index and array.ndim == len(index) else _plain(array)
    except (IndexError, TypeError):
        return _plain(array)


def build(program: Program, inputs: dict[str, np.ndarray], outcome: ConcreteOutcome, note: str = ""
          ) -> Counterexample:
    name, index, reference, per_rank_values = outcome.mismatch
    labels = [",".join(f"{k}={v}" for k, v in coords.items()) for coords in rank_coords(program.mesh)]
    per_rank = {f"rank {label}": {name: _plain(value)} for label, value in zip(labels, per_rank_values)}
    where = f"{name}[{','.join(map(str, index))}]" if index else name
    summary = {where: _element(reference, index)} if index else {name: _plain(reference)}
    return Counterexample(
        inputs={key: _plain(value) for key, value in inputs.items()},
        reference={name: _plain(reference), **({"element " + where: _element(reference, index)} if index else {})},
        per_rank=per_rank,
        value=where,
        confirmed=True,
        note=note or f"the parallel program's {where} differs from the single-device program's "
                     f"({summary[where] if index else 'see values'})",
    )
