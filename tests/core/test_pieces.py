"""verifier/pieces.py: which rank values can be judged by their shape, and whether a concatenation puts blocks of
one value where they lie (the culprit walk's judgement of a gather's concatenation, issue 25)."""
from __future__ import annotations

import numpy as np

from verifier.pieces import comparable, misassembled


def close(a, b):
    return np.shape(a) == np.shape(b) and np.allclose(a, b)


WHOLE = np.arange(24.0).reshape(4, 6)
COLUMNS = [WHOLE[:, :3], WHOLE[:, 3:]]


def test_a_shard_is_comparable_and_a_world_sized_dim_is_not():
    assert comparable(np.zeros((2, 6)), WHOLE) and comparable(np.zeros((4, 6)), WHOLE)
    assert not comparable(np.zeros((2, 2, 3)), WHOLE)        # another number of dims
    assert not comparable(np.zeros((8, 3)), WHOLE)           # column blocks stacked as rows
    assert not comparable(np.zeros((6, 4, 2, 4, 7)), np.zeros((12, 4, 1, 8, 7)))


def test_column_blocks_concatenated_along_the_columns_are_in_place_and_along_the_rows_are_not():
    assert misassembled(COLUMNS, WHOLE, 1, close) is False
    assert misassembled(COLUMNS, WHOLE, -1, close) is False
    assert misassembled(COLUMNS, WHOLE, 0, close) is True
    assert misassembled(COLUMNS[::-1], WHOLE, 1, close) is True   # out of order


def test_nothing_is_said_of_pieces_that_are_no_block_or_copies_of_the_whole():
    assert misassembled([WHOLE[:, :3], WHOLE[:, 3:] + 1], WHOLE, 1, close) is None
    assert misassembled([WHOLE, WHOLE], WHOLE, 0, close) is None    # a replicated value gathered
    assert misassembled([WHOLE[:2, :3], WHOLE[2:, :3]], WHOLE, 0, close) is False   # part of a column, in order
