"""Bug lines around an all-to-all (issue 25): values the rank regroups where one device does not.

Ulysses-style code views a value ``[s, b, h/p, d]`` as ``[world, s/world, b, h/p, d]`` before its
all-to-all; one device, running the same code with ``world == 1``, views it as ``[1, s, b, h, d]``.
The rank's value is no block of that (its first dim is larger), though it holds the right numbers:
merged back (``world * s/world``) it is one device's value for the rank's heads.  Judged so, the first
value that really goes wrong is found:

* ``merged_consistent``: a regrouped value compared with its counterpart after merging the same runs
  of adjacent dims in both, the fewest merges that make one a block shape of the other;
* ``laid_out_for``: an all-to-all whose result goes wrong though its input agrees moved the wrong
  pieces: what the code laid out for it (the permute, transpose or view before it, through copies)
  is where the repair goes, not the exchange itself.
"""
from __future__ import annotations

from itertools import combinations
from typing import Any, Callable

import numpy as np

from .ir import Op

_COPIES = ("aten.clone.", "aten.contiguous.", "aten.alias.", "aten._to_copy.")
_LAYOUTS = ("aten.permute.", "aten.transpose.", "aten.t.", "aten.view.", "aten._unsafe_view.", "aten.reshape.")
REGROUPS = _LAYOUTS + _COPIES + ("all_to_all",)


def regrouped(op: Op | None, rank_value: Any, reference_value: Any) -> bool:
    """``op`` moves or regroups elements (a view, permute, copy, all-to-all) and the rank's value, of
    as many dims as its counterpart, has no shape a block of the counterpart's has."""
    if op is None or not op.kind.startswith(REGROUPS):
        return False
    got, want = np.shape(rank_value), np.shape(reference_value)
    return len(got) == len(want) and not _block_shape(got, want)


def merged_consistent(rank_value: Any, reference_value: Any, consistent: Callable[[Any, Any], bool]) -> bool | None:
    """Whether the rank's value is ``consistent`` with its counterpart once the same runs of adjacent
    dims are merged in both (the fewest merges that give block shapes; any of those groupings); None
    when no grouping does."""
    got, want = np.asarray(rank_value), np.asarray(reference_value)
    if got.ndim != want.ndim or got.ndim < 2:
        return None
    for merges in range(1, got.ndim):
        found = False
        for cuts in combinations(range(1, got.ndim), got.ndim - 1 - merges):
            shape_got, shape_want = _merged(got.shape, cuts), _merged(want.shape, cuts)
            if not _block_shape(shape_got, shape_want):
                continue
            found = True
            if consistent(got.reshape(shape_got), want.reshape(shape_want)):
                return True
        if found:
            return False
    return None


def laid_out_for(op: Op, producer: dict[str, Op]) -> Op | None:
    """The op that laid out an all-to-all's input (through copies): a permute, transpose or view."""
    if not op.kind.startswith("all_to_all") or not op.args:
        return None
    source = producer.get(op.args[0])
    while source is not None and source.kind.startswith(_COPIES) and source.args:
        source = producer.get(source.args[0])
    return source if source is not None and source.kind.startswith(_LAYOUTS) else None


def _block_shape(got: tuple, want: tuple) -> bool:
    return all(0 < g <= w and w % g == 0 for g, w in zip(got, want))


def _merged(shape: tuple, cuts: tuple) -> tuple:
    """``shape`` with the dims between consecutive ``cuts`` (dim indices where a group starts) multiplied."""
    bounds = (0, *cuts, len(shape))
    return tuple(int(np.prod(shape[a:b])) for a, b in zip(bounds, bounds[1:]))
