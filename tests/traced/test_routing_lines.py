"""An all-to-all that delivers other elements than the rank's block of one device's value, where one device's
layout run gives its input back, is named at the layout of its send buffer (verifier/routing_lines.py; issue
25, the bug's own line): k33_ulysses_heads_interleaved_bug.py groups the heads the wrong way before the
exchange; its twin k30_ulysses_transpose_ok.py (verified in test_rearranged_value_lines.py) the right way.
The other side, k30_ulysses_transpose_bug.py (the received buffer transposed: one device's layout scrambles
its values too), stays at the first value after the exchange (test_rearranged_value_lines.py).  Gloo ground
truth 1 vs 2 ranks."""
from __future__ import annotations

from pathlib import Path

import pytest
from case_runs import MATCH, MISMATCH, first_error, gloo_statuses, marked_line

CASES = Path(__file__).parent / "cases"
OK, BUG = "k30_ulysses_transpose_ok.py", "k33_ulysses_heads_interleaved_bug.py"

pytestmark = pytest.mark.torch


def test_wrong_elements_received_are_named_at_the_send_layout():
    pytest.importorskip("torch")
    first = first_error(BUG)
    assert first["line"] == marked_line(CASES / BUG), first
    assert "the layout of an all-to-all's send buffer (line 18)" in first["message"], first["message"]


def test_gloo_runs_back_the_twins():
    pytest.importorskip("torch")
    statuses = gloo_statuses([OK, BUG])
    assert (statuses[OK][0], statuses[BUG][0]) == (MATCH, MISMATCH), statuses
