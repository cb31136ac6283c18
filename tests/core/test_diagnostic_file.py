"""A violation inside a module of the user's own package names that module's file and line
(``Diagnostic.file``), in JSON, SARIF, GitHub annotations and text; ``repair_line`` stays in the
checked file."""
from __future__ import annotations

import io
import json

from rich.console import Console

from verifier.report import ERROR, Diagnostic, Report
from verify_agent.render import render_github, render_json, render_sarif, render_text


def _report(tmp_path) -> Report:
    package = tmp_path / "regions.py"
    package.write_text("import torch.distributed as dist\n\n\ndef reduce(x):\n    dist.all_reduce(x, op=MAX)\n")
    report = Report("driver.py", {"tp": 2})
    report.add(Diagnostic("equivalence", ERROR, "output 0 differs", line=5, file=str(package), repair_line=16))
    return report


def test_json_names_the_other_file(tmp_path):
    (diagnostic,) = json.loads(render_json(_report(tmp_path)))["diagnostics"]
    assert (diagnostic["file"], diagnostic["line"]) == (str(tmp_path / "regions.py"), 5)


def test_a_diagnostic_of_the_checked_file_names_no_other_file():
    body = Diagnostic("equivalence", ERROR, "output 0 differs", line=5).to_json()
    assert body["file"] is None


def test_sarif_locates_the_result_in_the_other_file_and_the_repair_in_the_checked_one(tmp_path):
    (result,) = json.loads(render_sarif([_report(tmp_path)]))["runs"][0]["results"]
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == str(tmp_path / "regions.py")
    assert location["region"]["startLine"] == 5
    related = result["relatedLocations"][0]["physicalLocation"]
    assert (related["artifactLocation"]["uri"], related["region"]["startLine"]) == ("driver.py", 16)


def test_github_annotation_points_into_the_other_file(tmp_path):
    assert f"::error file={tmp_path / 'regions.py'},line=5," in render_github([_report(tmp_path)])


def test_text_shows_the_other_files_line_and_its_code(tmp_path):
    out = io.StringIO()
    render_text(_report(tmp_path), Console(file=out, width=200), source_lines=["unrelated"] * 20)
    text = out.getvalue()
    assert f"{tmp_path / 'regions.py'}:5: output 0 differs" in text
    assert "dist.all_reduce(x, op=MAX)" in text   # read from that file, not the checked one


def test_a_fault_re_run_shows_what_the_run_showed_not_an_empty_value_table():
    from verifier.report import Counterexample
    from verify_agent.render import _counterexample_tables
    fault = Counterexample({"sizes": {"M": 2}}, {}, {}, "line 3 reads acc[0] before anything was written", True,
                           "re-run on floats")
    tables = _counterexample_tables(Diagnostic("uninitialized-read", "error", "m", 3, fault))
    assert [t.title for t in tables] == ["counterexample inputs", "re-run on floats"] and tables[1].row_count == 1
    bare = Counterexample({"sizes": {"M": 2}}, {}, {}, "", True, "re-run on floats")
    assert [t.title for t in _counterexample_tables(Diagnostic("x", "error", "m", 3, bare))] == ["counterexample inputs"]
