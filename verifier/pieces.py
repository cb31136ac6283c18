"""Whether a rank's value can be judged against the single device's by its shape, and whether a
concatenation put the blocks of one single-device value where they belong.

A rank's value is comparable with its single-device counterpart when it has the same shape or is a
block of it (as many dims, each dividing the single device's): a shard as parallelism makes it.  Any
other shape (an all-to-all's send buffer ``[world, s/world, ...]`` against one device's ``[1, s, ...]``,
a gather's pieces stacked along dim 0) says nothing about the values: such a value is as right as
the values it is made from.

A concatenation of pieces each of which is a block of one single-device value is right when the
blocks lie next to each other along the concatenated dim, in order (a tensor-parallel gather of
column blocks concatenated along the columns); pieces that lie side by side along another dim,
concatenated along this one (the column blocks stacked as rows), make the first wrong value there,
though every piece is right.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

MAX_BLOCKS = 64


def block_counts(got_shape: tuple[int, ...], want_shape: tuple[int, ...]) -> list[int] | None:
    """How many blocks of ``got_shape`` fit along each dim of ``want_shape``, or None when a value of
    ``got_shape`` is no block of one of ``want_shape`` (or there would be more than MAX_BLOCKS)."""
    if len(got_shape) != len(want_shape) or any(g > w or (w % g if g else True) for g, w in zip(got_shape, want_shape)):
        return None
    counts = [w // g for g, w in zip(got_shape, want_shape)]
    return counts if int(np.prod(counts)) <= MAX_BLOCKS else None


def comparable(got: Any, want: Any) -> bool:
    """The same shape, or a block of it."""
    got_shape, want_shape = np.shape(got), np.shape(want)
    return got_shape == want_shape or block_counts(got_shape, want_shape) is not None


def block_positions(piece: Any, whole: Any, close: Callable[[Any, Any], bool]) -> list[tuple[int, ...]]:
    """The positions (block index per dim) of the blocks of ``whole`` that ``piece`` equals."""
    piece, whole = np.asarray(piece), np.asarray(whole)
    counts = block_counts(piece.shape, whole.shape)
    if counts is None:
        return []
    found = []
    for block in np.ndindex(*counts):
        index = tuple(slice(b * g, (b + 1) * g) for b, g in zip(block, piece.shape))
        if close(piece, whole[index]):
            found.append(block)
    return found


def misassembled(pieces: list[Any], whole: Any, dim: int, close: Callable[[Any, Any], bool]) -> bool | None:
    """Concatenating ``pieces`` along ``dim``: False when they are blocks of ``whole`` next to each other
    along ``dim`` in order (each the next block there, the same block along every other dim), True when
    every piece is a block of ``whole`` but no such order exists, None when some piece is no block of
    ``whole`` or each is all of it (copies of a replicated value: nothing to say)."""
    if not pieces or np.ndim(whole) == 0 or any(np.shape(p) != np.shape(pieces[0]) for p in pieces) \
            or np.ndim(pieces[0]) != np.ndim(whole) or np.shape(pieces[0]) == np.shape(whole):
        return None
    dim = dim % np.ndim(whole)
    candidates = [set(block_positions(p, whole, close)) for p in pieces]
    if not all(candidates):
        return None
    for start in candidates[0]:
        if all(tuple(c + i if d == dim else c for d, c in enumerate(start)) in found
               for i, found in enumerate(candidates)):
            return False
    return True
