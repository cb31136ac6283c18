"""`review` posts suggestion blocks only for fixes real ranks confirmed, and checks the callers of changed code."""
from __future__ import annotations

import subprocess

from verifier.report import Diagnostic, Report
from verify_agent.repair.fixes import SourceFix
from verify_agent.repair.review import FileResult, callers, review_body, review_comments, sarif_with_fixes

ORIGINAL = "import torch.distributed as dist\n\n\ndef f(y):\n    return y\n"
PATCHED = "import torch.distributed as dist\n\n\ndef f(y):\n    dist.all_reduce(y)\n    return y\n"


def _result(confirmation: str | None) -> FileResult:
    report = Report("m.py", {"tp": 2})
    report.add(Diagnostic("equivalence", "error", "output differs from the single-device run", 5))
    fixed = Report("m.py", {"tp": 2})
    if confirmation is not None:
        fixed.extra["fix_confirmation"] = confirmation
    fix = SourceFix("all-reduce `y` before line 5", PATCHED, "", 1.0, fixed)
    return FileResult("m.py", report, [fix], ORIGINAL)


def test_a_fix_real_ranks_confirmed_is_a_suggestion():
    comments, _ = review_comments([_result("confirmed on 2 gloo ranks")], {"m.py": None})
    assert any("```suggestion" in c["body"] for c in comments)


def test_a_fix_not_confirmed_on_real_ranks_is_no_suggestion():
    result = _result("not confirmed on real ranks: the real-rank run failed")
    comments, elsewhere = review_comments([result], {"m.py": None})
    assert not any("```suggestion" in c["body"] for c in comments)
    assert any("not confirmed" in item for item in elsewhere)
    assert [c["line"] for c in comments] == [5]            # the finding itself is still commented
    sarif = sarif_with_fixes([result])
    assert '"fixes"' not in sarif


def test_summary_table_says_how_real_ranks_judged_the_fix():
    body = review_body([_result("confirmed on 2 gloo ranks")], [], [])
    assert "| `m.py` | violations | 1 | 1 | confirmed | changed |" in body


def test_files_importing_a_changed_module_are_its_callers(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "layers.py").write_text("X = 1\n")
    (tmp_path / "pkg" / "model.py").write_text("from .layers import X\n")
    (tmp_path / "train.py").write_text("from pkg import layers\n")
    (tmp_path / "other.py").write_text("import os\n")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "add", "."], cwd=tmp_path, check=True)
    assert callers(["pkg/layers.py"], tmp_path) == {"pkg/model.py": "pkg/layers.py", "train.py": "pkg/layers.py"}
