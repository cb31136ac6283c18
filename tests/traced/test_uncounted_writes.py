"""Writes torch does not count: a collective's result read through a view, and ``.data`` aliases.

``dist.all_reduce`` writes its tensor without bumping torch's version counter, so a view of the
reduced buffer (megatron-core's ``main_grad`` into its gradient buffer) looked current with its
value from before the collective: k6_reduced_buffer_view_bug.py was `verified` (a false verified;
gloo: 2 ranks give twice one device).  And ``w.grad.data`` is an alias torch makes through the
dispatcher and then gives a new version counter, which made the recorder refuse the read
(megatron-core's DDP gradient hook: ``param.main_grad.add_(param.grad.data)``).  A write through such
an alias (``w.data.copy_(block)``, megatron-core's CPU initialization of every weight) does not move
``w``'s own counter either: ``w`` was read as the empty tensor it was made as (k7_data_copy_ok.py was
`unsupported`, "the verifier's model disagrees with torch"; megatron-core's whole training step too);
the same memory bound later through another tensor now gives its name.  Twins k6_* and k7_*, each
backed by plain gloo runs of the file (1 rank against 2, grad mode on: the cases run backward
inside the entry).
"""
from __future__ import annotations

import numpy as np
import pytest
from case_runs import gloo_outputs, translate

pytest.importorskip("torch")

pytestmark = pytest.mark.torch

EXPECTED = {
    "k6_reduced_buffer_view_bug.py": (1, "violations"),
    "k6_reduced_buffer_view_ok.py": (0, "verified"),
    "k6_main_grad_hook_bug.py": (1, "violations"),
    "k6_main_grad_hook_ok.py": (0, "verified"),
    "k7_data_copy_bug.py": (1, "violations"),
    "k7_data_copy_ok.py": (0, "verified"),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_tool_gives_the_stated_verdict(name):
    code, body = translate(name, timeout=900)
    errors = [d["message"] for d in body["diagnostics"] if d["severity"] == "error"]
    assert (code, body["verdict"]) == EXPECTED[name], errors
    if code == 1:
        assert "output 0 differs" in errors[0] and "reproduced by torch" in errors[0], errors


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_gloo_backs_the_stated_verdict(name):
    [one] = gloo_outputs(name, 1)
    agree = all(np.allclose(one, rank, rtol=1e-6, atol=1e-8) for rank in gloo_outputs(name, 2))
    assert agree == (EXPECTED[name][1] == "verified")
