"""A rank that raises because an installed layer was built with the wrong layout flag names two lines
(issue 25, item 4): where the first diverging value is produced (the row layer's call, where the matmul
raises) and where the repair goes (the line that built the layer whose gather or split made the shape
the matmul could not take: ``gather_output=True`` on the column layer, ``input_is_parallel=False`` on
the row layer), in JSON, SARIF and text.  Twin cases on fairscale's layers, gloo ground truth (1 vs 2
ranks); the expected repair line is found by the case's "# the bug" marker (the tool never reads it)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("fairscale")

pytestmark = [pytest.mark.torch, pytest.mark.realcode]

REPO = Path(__file__).resolve().parents[2]
CASES = Path(__file__).parent / "cases"
BUGS = ["f1_fairscale_gather_output_bug.py", "f1_fairscale_input_is_parallel_bug.py"]
CALL_LINE = 18   # ``return self.down(F.gelu(self.up(x)))``: the row layer's matmul raises there


def translate(name: str, fmt: str = "json") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "verify_agent", "translate", str(CASES / name), "--mesh", "tp=2",
                           "--format", fmt], capture_output=True, text=True, cwd=REPO, timeout=300)


def marked_line(name: str) -> int:
    (line,) = [n for n, text in enumerate((CASES / name).read_text().splitlines(), 1) if "# the bug" in text]
    return line


def test_right_flags_are_verified():
    run = translate("f1_fairscale_layout_flags_ok.py")
    assert (run.returncode, json.loads(run.stdout)["verdict"]) == (0, "verified"), run.stdout[-2000:]


@pytest.mark.parametrize("name", BUGS)
def test_a_wrong_flag_names_the_raise_and_the_line_that_built_the_layer(name):
    run = translate(name)
    body = json.loads(run.stdout)
    assert (run.returncode, body["verdict"]) == (1, "violations"), body["diagnostics"]
    first = [d for d in body["diagnostics"] if d["severity"] == "error"][0]
    assert (first["line"], first["repair_line"], first["file"]) == (CALL_LINE, marked_line(name), None), first
    assert "cannot be multiplied" in first["message"], first["message"]
    assert f"installed module built at line {marked_line(name)}" in first["message"], first["message"]


def test_sarif_and_text_carry_the_repair_line():
    name = BUGS[0]
    sarif = json.loads(translate(name, "sarif").stdout)
    (result,) = [r for r in sarif["runs"][0]["results"] if r["level"] == "error"]
    assert result["properties"]["repair_line"] == marked_line(name), result
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == CALL_LINE, result
    text = translate(name, "text").stdout
    assert f"the repair goes at line {marked_line(name)}" in text, text[-2000:]


def test_gloo_runs_back_the_twins():
    sys.path.insert(0, str(REPO / "tests"))
    from groundtruth import realworld_runner as rw

    # fairscale keeps its process groups in module globals: each file in workers of its own
    for name in ["f1_fairscale_layout_flags_ok.py", *BUGS]:
        (result,) = rw.run_jobs([rw.Job(rw.Spec(str(CASES / name), timeout=60.0), 2)])
        if name.endswith("_ok.py"):
            assert result.status == rw.STATUS_MATCH, (name, result.status, result.error)
        else:   # the ranks raise where one device runs
            assert result.status == rw.STATUS_ERROR and "cannot be multiplied" in (result.error or ""), \
                (name, result.status, result.error)
