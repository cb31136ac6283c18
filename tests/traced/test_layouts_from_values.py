"""Twin programs for the parameter correspondence by value and for DDP's gradient averaging.

Each rank's parameter is related to the single-device parameter by the slice its recorded values
are (never by its shape alone); a layout nothing confirmed is never the basis of `verified`.  DDP's
gradient bucket is averaged from the gradients the recorder saw, on one device too.  Each case's
docstring states its expected verdict; real gloo runs (1 against 2 ranks, tests/groundtruth/runner.py)
back it in the last tests.
"""
from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

pytestmark = pytest.mark.torch

REPO = Path(__file__).resolve().parents[2]
CASES = Path(__file__).parent / "cases"

# case -> (verdict, exit code, words of the first error or None)
EXPECTED = {
    "l1_strided_pairs_ok.py": ("verified", 0, None),
    "l1_strided_pairs_bug.py": ("violations", 1, "output 0 differs"),
    "l2_drawn_per_rank.py": ("unsupported", 3, "parameter up.weight"),
    "d1_ddp_module_step_ok.py": ("verified", 0, None),
    "d1_ddp_module_step_bug.py": ("violations", 1, "gradient of model.module"),
}


def translate(name: str, *extra: str) -> tuple[int, dict]:
    """(exit code, JSON report) of ``translate`` on the case; each command line runs once per test run
    (l1_strided_pairs_ok.py is read by three tests, l1_strided_pairs_bug.py and l2_drawn_per_rank.py by
    two): every caller gets its own copy of the report."""
    code, text = _translate(name, *extra)
    return code, json.loads(text)


@functools.cache
def _translate(name: str, *extra: str) -> tuple[int, str]:
    run = subprocess.run([sys.executable, "-m", "verify_agent", "translate", *extra, str(CASES / name),
                          "--format", "json"], capture_output=True, text=True, cwd=REPO, timeout=300)
    return run.returncode, run.stdout


def notes(body: dict) -> list[str]:
    return [d["message"] for d in body["diagnostics"] if d["severity"] == "note"]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_tool_gives_the_verdict_the_case_states(name):
    verdict, code, words = EXPECTED[name]
    got_code, body = translate(name)
    errors = [d for d in body["diagnostics"] if d["severity"] == "error"]
    assert (got_code, body["verdict"]) == (code, verdict), errors
    if words is not None:
        assert words in errors[0]["message"], errors


def test_strided_pieces_are_read_from_the_values_and_said():
    _, body = translate("l1_strided_pairs_ok.py")
    said = notes(body)
    assert any(n.startswith("parameter up.weight: rank r holds positions r, r + 2") and "as its values show" in n
               for n in said), said
    assert any(n.startswith("parameter down.weight: rank r holds positions r, r + 2, r + 4, ... of dim 1")
               for n in said), said


def test_a_bias_of_zeros_takes_the_piece_its_weight_shows_and_says_so():
    _, body = translate("l1_strided_pairs_ok.py")
    bias = [n for n in notes(body) if n.startswith("parameter up.bias")]
    assert bias and "positions r, r + 2" in bias[0] and "cannot tell" in bias[0] \
        and "a sibling parameter's values show" in bias[0], bias


def test_the_contiguous_piece_the_values_show_is_the_one_proven():
    _, body = translate("l1_strided_pairs_bug.py")
    assert any(n.startswith("parameter down.weight: rank r holds chunk r of 2 contiguous chunks of dim 1")
               for n in notes(body)), notes(body)


def test_pieces_drawn_on_each_rank_are_not_verified_until_the_layout_is_stated():
    code, body = translate("l2_drawn_per_rank.py")
    error = next(d for d in body["diagnostics"] if d["severity"] == "error")
    assert code == 3 and "NOT confirmed" in error["message"] and "--param-layout up.weight=" in error["message"]
    code, body = translate("l2_drawn_per_rank.py", "--param-layout", "up.weight=Shard(0)",
                           "--param-layout", "down.weight=Shard(1)")
    assert (code, body["verdict"]) == (0, "verified"), body["diagnostics"]
    assert any("as stated by --param-layout" in n for n in notes(body))


def _ground_truth(names: list[str], mode: str):
    sys.path.insert(0, str(REPO / "tests"))
    from groundtruth import runner as gt

    return dict(zip(names, gt.run_jobs([gt.Job(gt.JobSpec(str(CASES / name), mode=mode), 2) for name in names])))


def test_gloo_runs_back_the_layout_verdicts():
    results = _ground_truth(["l1_strided_pairs_ok.py", "l1_strided_pairs_bug.py", "l2_drawn_per_rank.py"],
                            "forward")
    assert {name: result.status for name, result in results.items()} == {
        "l1_strided_pairs_ok.py": "match", "l1_strided_pairs_bug.py": "mismatch",
        "l2_drawn_per_rank.py": "mismatch"}   # other numbers on the ranks: no proof can rest on them


def test_gloo_runs_back_the_ddp_verdicts():
    """DDP's convention scales input gradients by the world size (only parameters are averaged), and
    the cases say requires_grad=False for the input: the parameters' gradients are what is compared."""
    results = _ground_truth(["d1_ddp_module_step_ok.py", "d1_ddp_module_step_bug.py"], "grad")
    for name, result in results.items():
        outputs = [d for d in result.details if d.name.startswith("out")]
        parameters = [d for d in result.details if d.name.startswith("grad[param")]
        assert outputs and all(d.matches for d in outputs), (name, result.error, result.details)
        assert len(parameters) == 4, (name, result.details)
        assert all(d.matches for d in parameters) == name.endswith("_ok.py"), (name, result.details)
