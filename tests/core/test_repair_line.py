"""A violation names where its first diverging value is produced (``line``) and, when a verified fix
was found, where the repair goes (``repair_line``: the fix's first change), in text, JSON and SARIF."""
from __future__ import annotations

import io
import json

from rich.console import Console

from verifier.report import ERROR, Diagnostic, Fix, Report
from verify_agent.render import first_changed_line, render_json, render_sarif, render_text

INSERTION = "--- a/m.py\n+++ b/m.py\n@@ -22,2 +22,3 @@\n     y = h @ w\n+    dist.all_reduce(y)\n     return y\n"
CHANGE = "--- a/m.py\n+++ b/m.py\n@@ -9,3 +9,3 @@\n a = 1\n b = 2\n-c = x.chunk(2, dim=0)\n+c = x.chunk(2, dim=1)\n"


def _report(patch: str | None) -> Report:
    report = Report("m.py", {"tp": 2}, proven=["forward"])
    report.add(Diagnostic("equivalence", ERROR, "output y differs", line=30))
    if patch is not None:
        report.fixes.append(Fix("insert an all-reduce", patch, 1.0))
    return report


def test_an_insertion_names_the_line_after_which_it_goes():
    assert first_changed_line(INSERTION) == 22


def test_a_changed_line_is_named_itself():
    assert first_changed_line(CHANGE) == 11


def test_an_insertion_hunk_without_context_names_its_anchor_line():
    assert first_changed_line("@@ -17,0 +18,1 @@\n+    dist.all_reduce(y)\n") == 17


def test_json_carries_both_lines():
    body = json.loads(render_json(_report(INSERTION)))
    assert [(d["line"], d["repair_line"]) for d in body["diagnostics"]] == [(30, 22)]


def test_without_a_fix_there_is_no_repair_line():
    body = json.loads(render_json(_report(None)))
    assert body["diagnostics"][0]["repair_line"] is None


def test_sarif_points_at_the_repair_as_a_related_location():
    result = json.loads(render_sarif([_report(CHANGE)]))["runs"][0]["results"][0]
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == 30
    assert result["relatedLocations"][0]["physicalLocation"]["region"]["startLine"] == 11
    assert result["properties"]["repair_line"] == 11


def test_text_says_where_the_repair_goes():
    out = io.StringIO()
    render_text(_report(CHANGE), Console(file=out, width=200), source_lines=[f"line{i}" for i in range(1, 40)])
    assert "the repair goes at line 11: line11" in out.getvalue()
