"""Smaller sizes for the proof: module-level integer constants re-chosen before the entry runs.

The solver's work grows with tensor sizes; the code's meaning usually does not.  Every
module-level UPPER_CASE integer >= 2 gets a smaller value: a multiple of ``2 * world`` (so
``SEQ // world`` stays >= 2), distinct constants stay distinct and equal ones stay equal, a
constant that divided another still divides it, one that was the product of two others stays
their product, and no value grows.  A run at the smaller sizes
that fails or cannot be related falls back to the file's own sizes; the sizes used are stated.
"""
from __future__ import annotations

import math
from typing import Any

MAX_ELEMENTS = 256    # reference leaf elements above which a smaller run is tried


def size_constants(module: Any) -> dict[str, int]:
    return {name: value for name, value in vars(module).items()
            if name.isupper() and not name.startswith("_") and type(value) is int and value >= 2}


def reduced_sizes(constants: dict[str, int], world: int) -> dict[str, int]:
    """New values for the constants that can shrink (only those that change)."""
    step = 2 * max(world, 1)
    new_of_value: dict[int, int] = {}
    previous = 1
    for value in sorted(set(constants.values())):
        unit = step
        for smaller, chosen in new_of_value.items():
            if value % smaller == 0:
                unit = unit * chosen // math.gcd(unit, chosen)
        candidate = unit * (previous // unit + 1)
        chosen = candidate if candidate < value else value
        new_of_value[value] = chosen
        previous = chosen
    _keep_products(new_of_value)
    return {name: new_of_value[value] for name, value in constants.items() if new_of_value[value] != value}


def _keep_products(new_of_value: dict[int, int]) -> None:
    """A constant that is the product of two others (``VOCAB = BATCH * SEQ``, a table viewed as a
    batch) stays the product of their new values when that is smaller and no other's value."""
    values = sorted(new_of_value)
    for value in values:
        for a in values:
            b = value // a if a > 1 and value % a == 0 else None
            if b is None or b not in new_of_value or a > b or value in (a, b):
                continue
            product = new_of_value[a] * new_of_value[b]
            if product < value and product not in (new_of_value[v] for v in values if v != value):
                new_of_value[value] = product
                break


def apply_sizes(module: Any, sizes: dict[str, int]) -> None:
    for name, value in sizes.items():
        if name in vars(module):
            setattr(module, name, value)


def describe(sizes: dict[str, int], original: dict[str, int]) -> str:
    parts = ", ".join(f"{name}={value} (file: {original.get(name)})" for name, value in sorted(sizes.items()))
    return f"proven at reduced sizes {parts}: module-level constants were made smaller before running"
