"""A parameter's gradient that no collective reduces is named at the line that made the parameter
(where it is marked for the reduction or its module swapped), not at the entry.  Twin cases k3
(a sequence-parallel LayerNorm whose gradients are not all-reduced, and its fixed twin), gloo
ground truth (1 vs 2 ranks, parameters' gradients)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from case_runs import marked_line, translate as translate_case

pytest.importorskip("torch")

pytestmark = pytest.mark.torch

REPO = Path(__file__).resolve().parents[2]
CASES = Path(__file__).parent / "cases"


def translate(name: str) -> tuple[int, dict]:
    return translate_case(name, "--mesh", "tp=2")


def test_norm_whose_gradients_are_all_reduced_is_verified():
    code, body = translate("k3_sp_norm_grad_ok.py")
    assert (code, body["verdict"]) == (0, "verified"), body["diagnostics"]


def test_unreduced_parameter_gradient_is_named_where_the_parameter_is_made():
    code, body = translate("k3_sp_norm_grad_bug.py")
    assert (code, body["verdict"]) == (1, "violations"), body["diagnostics"]
    first = next(d for d in body["diagnostics"] if d["severity"] == "error")
    assert first["line"] == marked_line(CASES / "k3_sp_norm_grad_bug.py"), first
    assert "gradient of norm." in first["message"] and "partial sum" in first["message"], first["message"]


def test_gloo_runs_back_the_pair():
    sys.path.insert(0, str(REPO / "tests"))
    from groundtruth import realworld_runner as rw

    names = ("k3_sp_norm_grad_ok.py", "k3_sp_norm_grad_bug.py")
    results = dict(zip(names, rw.run_jobs([rw.Job(rw.Spec(str(CASES / name), timeout=60.0), 2) for name in names])))
    ok, bug = results["k3_sp_norm_grad_ok.py"], results["k3_sp_norm_grad_bug.py"]
    assert ok.status == rw.STATUS_MATCH, ok
    assert bug.status == rw.STATUS_MISMATCH, bug
    differing = [d.name for d in bug.details if not d.matches]
    assert differing and all(name.startswith("grad[param norm.") for name in differing), bug.details
