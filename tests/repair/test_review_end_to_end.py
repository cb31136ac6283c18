"""`verify-agent review` on a git change that introduces a bug, end to end on a temporary repository.

A commit holds a correct picotron-style tensor-parallel MLP and a training step that calls it; the
working change drops the all-reduce of the input gradient from the MLP's custom backward.  The
review must post a GitHub suggestion block at the line of that backward (the fix real gloo ranks
confirmed), attach the same fix to its SARIF result, summarise every file in a table, and check the
unchanged training step too because it calls the changed code.
"""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.slow]

CASES = Path(__file__).parent / "cases"
CALLER = '''"""A training step that calls the tensor-parallel MLP of tp_mlp.py."""
import torch
import torch.distributed as dist

from tp_mlp import forward as mlp

TOKENS, HIDDEN, FFN = 4, 8, 16


def forward(x, w_up, w_down):
    return mlp(x, w_up, w_down).tanh()


def example_inputs():
    return torch.randn(TOKENS, HIDDEN), torch.randn(HIDDEN, FFN), torch.randn(FFN, HIDDEN)
'''


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                   check=True, capture_output=True)


@pytest.fixture(scope="module")
def reviewed(tmp_path_factory):
    repo = tmp_path_factory.mktemp("repo")
    _git(repo, "init", "-q", "-b", "main")
    shutil.copyfile(CASES / "tp_mlp_fixed.py", repo / "tp_mlp.py")
    (repo / "train.py").write_text(CALLER)
    _git(repo, "add", "tp_mlp.py", "train.py")
    _git(repo, "commit", "-q", "-m", "correct")
    shutil.copyfile(CASES / "tp_mlp_backward_missing_allreduce.py", repo / "tp_mlp.py")
    done = subprocess.run(["verify-agent", "review", "--base", "main", "--repo", str(repo),
                           "--review-json", str(repo / "review.json"), "--sarif", str(repo / "review.sarif")],
                          capture_output=True, text=True, timeout=1800)
    return repo, done, json.loads((repo / "review.json").read_text()), json.loads((repo / "review.sarif").read_text())


def test_review_exits_with_violations(reviewed):
    _, done, _, _ = reviewed
    assert done.returncode == 1, done.stderr[-2000:]


def test_suggestion_is_posted_at_the_backward_that_lost_its_all_reduce(reviewed):
    repo, _, body, _ = reviewed
    lines = (repo / "tp_mlp.py").read_text().splitlines()
    backward = next(i for i, text in enumerate(lines, 1) if "def backward(ctx, grad_output)" in text)
    suggestions = [c for c in body["comments"] if "```suggestion" in c["body"]]
    assert len(suggestions) == 1, body
    (comment,) = suggestions
    assert comment["path"] == "tp_mlp.py" and comment["side"] == "RIGHT"
    assert comment["line"] == backward
    assert "dist.all_reduce(grad_output)" in comment["body"]
    assert "confirmed on 2 and 4 gloo ranks" in comment["body"]


def test_sarif_result_carries_the_same_fix(reviewed):
    _, _, _, sarif = reviewed
    fixed = [r for r in sarif["runs"][0]["results"] if r.get("fixes")]
    assert fixed
    inserted = fixed[0]["fixes"][0]["artifactChanges"][0]["replacements"][0]["insertedContent"]["text"]
    assert "dist.all_reduce(grad_output)" in inserted
    assert "confirmed" in fixed[0]["fixes"][0]["description"]["text"]


def test_summary_table_lists_the_change_and_its_caller(reviewed):
    _, _, body, _ = reviewed
    table = body["body"]
    assert "| file | verdict | violations | verified fixes | fix on real ranks | checked because |" in table
    assert "| `tp_mlp.py` | violations |" in table and "| confirmed | changed |" in table
    caller = next(line for line in table.splitlines() if line.startswith("| `train.py`"))
    assert "| violations |" in caller and "calls `tp_mlp.py`" in caller
