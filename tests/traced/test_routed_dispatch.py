"""Code that routes by value (expert parallelism: argmax routing whose counts the code reads into
Python as all_to_all split sizes) runs one path per routing.  The tool used to prove it over every
input and to screen it with random inputs that route elsewhere, so the right dispatch ended
unsupported ("the counterexample may take another path").  A selection whose result steers the path is
now taken as the recorded run made it, per run (``frontends/traced/steering.py``: what is proven holds
for the inputs that select the same way, and the verdict says so); the experts' gradient, which each
rank computes only for the experts it reads (``experts[e]``), is compared block by block, and where no
rank reads the single-device gradient must be zero.  Twins: examples/heldout's h11 (right) and h12 (the
received tokens' experts counted from 0 on every rank), gloo ground truth (1 vs 2 ranks)."""
from __future__ import annotations

import pytest
from case_runs import MATCH, MISMATCH, REPO, first_error, gloo_statuses, translate

pytestmark = pytest.mark.torch

HELDOUT = REPO / "examples" / "heldout"
OK = str(HELDOUT / "h11_moe_all_to_all_single_ok.py")     # absolute: CASES / name keeps it as it is
BUG = str(HELDOUT / "h12_moe_all_to_all_expert_offset.py")


def test_the_right_dispatch_is_verified_for_its_routing():
    pytest.importorskip("torch")
    code, body = translate(OK)
    assert (code, body["verdict"]) == (0, "verified"), body["diagnostics"]
    messages = [d["message"] for d in body["diagnostics"]]
    assert any("line 31 selects by value and line 33 reads what it selected into Python" in m for m in messages), \
        messages
    assert any("gradient of experts: each rank reads only its own disjoint blocks of experts" in m for m in messages)


def test_experts_counted_from_zero_on_every_rank_is_a_violation_torch_reproduces():
    pytest.importorskip("torch")
    first = first_error(BUG)
    assert "reproduced by torch" in first["message"], first


def test_gloo_runs_back_the_twins():
    pytest.importorskip("torch")
    statuses = gloo_statuses([OK, BUG])
    assert statuses[OK][0] == MATCH, statuses
    assert statuses[BUG][0] == MISMATCH, statuses
