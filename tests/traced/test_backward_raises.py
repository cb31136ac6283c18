"""A custom Function backward of the user's package that breaks the backward pass on the ranks.

Twins in tests/traced/cases/k4_* (the Functions in k4_row_regions/): a backward that returns the
gradient of one rank's rows (autograd rejects its shape), and one that uses a list before making it.
Both are the program's backward failing on the ranks (a violation named at the Function's line in the
package file), not the backward this tool adds being refused (which left gradients unchecked);
real gloo runs back all three.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

pytestmark = pytest.mark.torch

REPO = Path(__file__).resolve().parents[2]
CASES = Path(__file__).parent / "cases"
BUGGY = CASES / "k4_row_regions" / "rows_bugs.py"


def translate(name: str) -> tuple[int, dict]:
    run = subprocess.run([sys.executable, "-m", "verify_agent", "translate", str(CASES / name), "--format", "json"],
                         capture_output=True, text=True, cwd=REPO, timeout=300)
    return run.returncode, json.loads(run.stdout)


def _lines_marked(path: Path) -> list[int]:
    return [n for n, text in enumerate(path.read_text().splitlines(), 1) if "# the bug" in text]


def test_the_right_regions_are_verified_forward_and_backward():
    code, body = translate("k4_package_backward_ok.py")
    assert (code, body["verdict"]) == (0, "verified"), body["diagnostics"]
    assert body["passes"]["backward"] == "proven", body["passes"]


@pytest.mark.parametrize("name, marked, words", [
    ("k4_package_backward_shape_bug.py", 0, "returned an invalid gradient"),
    ("k4_package_backward_raises_bug.py", 1, "UnboundLocalError"),
])
def test_a_broken_package_backward_is_named_at_its_line(name, marked, words):
    code, body = translate(name)
    errors = [d for d in body["diagnostics"] if d["severity"] == "error"]
    assert (code, body["verdict"]) == (1, "violations"), errors
    first = errors[0]
    assert words in first["message"], first
    assert first["line"] == _lines_marked(BUGGY)[marked], first
    assert first["file"] and (REPO / first["file"]).resolve() == BUGGY.resolve(), first


def test_gloo_runs_back_the_three():
    """Inputs trainable, as the tool takes them (mode "grad"): the ranks' backward raises on both bugs."""
    sys.path.insert(0, str(REPO / "tests"))
    from groundtruth import runner as gt

    names = ("k4_package_backward_ok.py", "k4_package_backward_shape_bug.py", "k4_package_backward_raises_bug.py")
    sys.path.insert(0, str(CASES))   # the files import their package from beside them (spawned ranks too)
    try:
        results = gt.run_jobs([gt.Job(gt.JobSpec(str(CASES / name), mode="grad"), 2) for name in names])
    finally:
        sys.path.remove(str(CASES))
    statuses = {name: result.status for name, result in zip(names, results)}
    assert statuses == {"k4_package_backward_ok.py": gt.STATUS_MATCH,
                        "k4_package_backward_shape_bug.py": gt.STATUS_ERROR,
                        "k4_package_backward_raises_bug.py": gt.STATUS_ERROR}, \
        {name: (r.status, (r.error or "")[-300:]) for name, r in zip(names, results)}
    assert any(d.name.startswith("grad") for d in results[0].details), results[0].details
