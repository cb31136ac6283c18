"""`review` turns verified fixes into GitHub pull-request review comments and SARIF."""
from __future__ import annotations

import json
import shutil

import pytest

from verify_agent.pipeline import TranslateOptions
from verify_agent.repair.review import review, suggestion_blocks

from .support import MODELS


def test_insertion_is_suggested_together_with_the_line_above():
    original = "a\nb\nc\n"
    (block,) = suggestion_blocks(original, "a\nb\nnew\nc\n")
    assert (block.start, block.end, block.text) == (2, 2, "b\nnew\n")


def test_nearby_changes_become_one_suggestion():
    (block,) = suggestion_blocks("a\nb\nc\nd\n", "a\nx\nb\nd\n")
    assert (block.start, block.end, block.text) == (2, 3, "x\nb\n")


def test_deleted_line_is_an_empty_suggestion():
    (block,) = suggestion_blocks("a\nb\nc\n", "a\nc\n")
    assert (block.start, block.end, block.text) == (2, 2, "")


@pytest.fixture(scope="module")
def reviewed(tmp_path_factory):
    repo = tmp_path_factory.mktemp("repo")
    (repo / "model").mkdir()
    for name in ("dist_tp_mlp_missing_allreduce.py", "dist_tp_mlp_ok.py"):
        shutil.copy(MODELS / name, repo / "model" / name)
    (repo / "model" / "util.py").write_text("def helper():\n    return 1\n")
    files = ["model/dist_tp_mlp_missing_allreduce.py", "model/dist_tp_mlp_ok.py", "model/util.py"]
    # the static reading's suggestions (traced review runs the same repair as fix, tests/repair)
    return review("origin/main", repo, files=files, options=TranslateOptions(llm="off", no_exec=True))


def test_review_body_is_what_the_create_a_review_call_takes(reviewed):
    body, _ = reviewed
    assert set(body) == {"body", "event", "comments"} and body["event"] == "COMMENT"
    for comment in body["comments"]:
        assert {"path", "line", "side", "body"} <= set(comment) and comment["side"] == "RIGHT"
    assert "dist_tp_mlp_ok.py` | verified" in body["body"]
    assert "Not checked: `model/util.py` (no distributed code)" in body["body"]


def test_violation_gets_a_suggestion_block_with_the_verified_patch(reviewed):
    body, _ = reviewed
    (comment,) = [c for c in body["comments"] if c["path"].endswith("missing_allreduce.py")]
    assert comment["line"] == 24
    assert "```suggestion\n    y = h @ w_down.chunk(world, dim=0)[rank]\n    dist.all_reduce(y)\n```" in comment["body"]


def test_sarif_carries_the_fix(reviewed):
    _, sarif = reviewed
    log = json.loads(sarif)
    assert log["version"] == "2.1.0"
    (result,) = log["runs"][0]["results"]
    (fix,) = result["fixes"]
    (replacement,) = fix["artifactChanges"][0]["replacements"]
    assert replacement["deletedRegion"] == {"startLine": 24, "endLine": 24}
    assert replacement["insertedContent"]["text"].endswith("    dist.all_reduce(y)\n")
