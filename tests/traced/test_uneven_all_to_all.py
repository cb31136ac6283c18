"""``all_to_all_single`` with split sizes the ranks exchange first (a mixture-of-experts dispatch, a
re-shard of an uneven sequence).  Twin cases, gloo ground truth (1 vs 2 ranks):

* x1: rows split unevenly by the loader, re-sharded evenly: the counts are exchanged with an all-to-all
  and read with ``tolist()`` (which torch's dispatcher does not see: it is reported to the recorder,
  so the real counts are asked of gloo ranks), then the rows with those split sizes (each rank's own);
  the bug twin scales each block by its local positions, named at that line;
* x2: every row on the last rank: the other ranks' all-to-all input is empty, which torch's fake
  process group refuses and gloo runs (it was a false "rank raises" violation).
And a rank that raises only under the simulated group is no violation unless real ranks raise too.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from case_runs import MATCH, MISMATCH, first_error, gloo_statuses, marked_line, translate

CASES = Path(__file__).parent / "cases"
RIGHT = ["x1_uneven_all_to_all_ok.py", "x2_all_to_all_from_one_rank_ok.py"]

pytestmark = pytest.mark.torch


@pytest.mark.parametrize("name", RIGHT)
def test_exchanged_split_sizes_are_verified(name):
    pytest.importorskip("torch")
    code, body = translate(name)
    assert (code, body["verdict"]) == (0, "verified"), body["diagnostics"]


def test_a_wrong_block_scale_after_the_exchange_is_found_at_its_line():
    pytest.importorskip("torch")
    first = first_error("x1_uneven_all_to_all_bug.py")
    assert first["check"] == "equivalence" and "reproduced by torch" in first["message"], first
    assert first["line"] == marked_line(CASES / "x1_uneven_all_to_all_bug.py"), first


def test_gloo_runs_back_the_twins():
    pytest.importorskip("torch")
    statuses = gloo_statuses(RIGHT + ["x1_uneven_all_to_all_bug.py"])
    assert all(statuses[name][0] == MATCH for name in RIGHT), statuses
    assert statuses["x1_uneven_all_to_all_bug.py"][0] == MISMATCH, statuses


def test_a_rank_raise_is_shown_only_when_real_ranks_raise_too(tmp_path):
    """``confirm_raise``: the file run on gloo as it was traced (same seed, backward included)."""
    pytest.importorskip("torch")
    from frontends.traced.confirm import confirm_raise
    from verifier.confirmation import AGREES, REPRODUCED

    raising = tmp_path / "raising.py"
    raising.write_text("import torch\nimport torch.distributed as dist\n\n\n"
                       "def forward(x):\n    if dist.get_rank() == 1:\n        raise ValueError('rank 1 refuses')\n"
                       "    return x * 2\n\n\ndef example_inputs():\n    return (torch.randn(4, 3),)\n")
    real = confirm_raise(2, path=str(raising))
    assert real.outcome == REPRODUCED and "rank 1 raises at line 7" in real.detail, real
    quiet = confirm_raise(2, path=str(CASES / "x2_all_to_all_from_one_rank_ok.py"))
    assert quiet.outcome == AGREES, quiet
