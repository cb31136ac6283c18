"""Placements of a tensor along one mesh dimension (the DTensor vocabulary).

A distributed value is described, per mesh dim, by how the global tensor relates to the
local tensors the ranks of that dim hold:

* ``Shard(d)``   – rank ``c`` holds the ``c``-th of equal chunks along tensor dim ``d``;
* ``Replicate``  – every rank holds the whole tensor;
* ``Partial(op)``– the global tensor is ``op`` (sum, avg or max) over the ranks' tensors;
* ``Varying``    – rank-dependent data with no known relation to a global tensor (the value
  of ``rank()``, a tensor after a type error).  Never a valid output placement.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Union

@dataclass(frozen=True)
class Shard:
    dim: int

    def __str__(self) -> str:
        return f"S({self.dim})"


@dataclass(frozen=True)
class Replicate:
    def __str__(self) -> str:
        return "R"


@dataclass(frozen=True)
class Partial:
    op: str = "sum"

    def __str__(self) -> str:
        return f"P({self.op})"


@dataclass(frozen=True)
class Varying:
    def __str__(self) -> str:
        return "V"


Placement = Union[Shard, Replicate, Partial, Varying]

R = Replicate()
V = Varying()

_PLACEMENT_RE = re.compile(r"^\s*(?:S\((-?\d+)\)|R|P\((sum|avg|max|min)\)|P|V)\s*$")


def parse_placement(text: str) -> Placement:
    """Parse ``S(1)``, ``R``, ``P``, ``P(max)`` or ``V``; raise ValueError otherwise."""
    match = _PLACEMENT_RE.match(text)
    if not match:
        raise ValueError(f"expected a placement S(d), R, P(sum|avg|max|min) or V, got {text!r}")
    token = text.strip()
    if token.startswith("S"):
        return Shard(int(match.group(1)))
    if token == "R":
        return R
    if token == "V":
        return V
    return Partial(match.group(2) or "sum")
