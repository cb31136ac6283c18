"""A violation names the line a user must change (issue 25, "the bug's own line"): where the wrong
value enters, in the file it is in.  Twin cases, gloo ground truth (1 vs 2 ranks):

* k1: another rank's block of a weight (``chunk(w, world)[world - 1 - rank]``): named at that line,
  not at the matmul that reads it nor the all-reduce after it;
* k2: the bug is inside a package of the user's own beside the file (a reduce taking the maximum):
  named at that package file's line (``file`` in JSON), not at this file's call into it;
* k35: a vocabulary-parallel lookup given every world-th row of the table: the ranks' masks and local ids
  differ from one device's by design, so the strided slice, the first wrong value computed from right
  operands that is no index or mask, is named, not the first mask;
* k36: a vocabulary-parallel softmax whose MAX all-reduce of the row maximum comes after the line that
  reads it: each rank's maximum of its block is a piece of that max, so the reader is named, not the amax.

The expected lines are found by the cases' own "the bug" markers (the tool never reads them).
"""
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


def said(body: dict) -> list[str]:
    return [f"{d['severity']} {d['line']}: {d['message']}" for d in body["diagnostics"]]


def errors(body: dict) -> list[dict]:
    return [d for d in body["diagnostics"] if d["severity"] == "error"]


def test_right_shards_are_verified():
    code, body = translate("k1_shard_index_ok.py")
    assert (code, body["verdict"]) == (0, "verified"), said(body)


def test_another_ranks_block_is_named_where_it_is_cut():
    code, body = translate("k1_shard_index_bug.py")
    assert (code, body["verdict"]) == (1, "violations"), said(body)
    first = errors(body)[0]
    assert first["line"] == marked_line(CASES / "k1_shard_index_bug.py"), first
    assert first["file"] is None, first   # the checked file itself


def test_right_package_regions_are_verified():
    code, body = translate("k2_package_regions_ok.py")
    assert (code, body["verdict"]) == (0, "verified"), said(body)


def test_a_bug_inside_the_users_package_is_named_in_that_file():
    code, body = translate("k2_package_regions_bug.py")
    assert (code, body["verdict"]) == (1, "violations"), said(body)
    first = errors(body)[0]
    buggy = CASES / "k2_parallel_regions" / "regions_max.py"
    assert first["line"] == marked_line(buggy), first
    assert first["file"] and Path(REPO / first["file"]).resolve() == buggy.resolve(), first
    assert "called from line 16" in first["message"], first["message"]   # this file's call into it


@pytest.mark.parametrize("name", ["k35_vocab_rows_ok.py", "k36_vocab_softmax_ok.py"])
def test_vocabulary_parallel_twins_are_verified(name):
    code, body = translate(name)
    assert (code, body["verdict"]) == (0, "verified"), said(body)


@pytest.mark.parametrize("name", ["k35_vocab_rows_strided_bug.py", "k36_vocab_softmax_max_late_bug.py"])
def test_a_vocabulary_parallel_bug_is_named_past_the_ranks_own_indices_and_maxima(name):
    code, body = translate(name)
    assert (code, body["verdict"]) == (1, "violations"), said(body)
    first = errors(body)[0]
    assert (first["line"], first["file"]) == (marked_line(CASES / name), None), first
    assert "reproduced by torch" in first["message"], first["message"]


def test_gloo_runs_back_both_pairs():
    sys.path.insert(0, str(REPO / "tests"))
    from groundtruth import realworld_runner as rw

    names = ("k1_shard_index_ok.py", "k1_shard_index_bug.py", "k2_package_regions_ok.py", "k2_package_regions_bug.py",
             "k35_vocab_rows_ok.py", "k35_vocab_rows_strided_bug.py", "k36_vocab_softmax_ok.py",
             "k36_vocab_softmax_max_late_bug.py")
    sys.path.insert(0, str(CASES))   # the k2 files import their package from beside them (spawned ranks too)
    try:
        results = rw.run_jobs([rw.Job(rw.Spec(str(CASES / name), timeout=60.0), 2) for name in names])
    finally:
        sys.path.remove(str(CASES))
    statuses = {name: result.status for name, result in zip(names, results)}
    assert statuses["k1_shard_index_ok.py"] == rw.STATUS_MATCH, statuses
    assert statuses["k2_package_regions_ok.py"] == rw.STATUS_MATCH, statuses
    assert statuses["k1_shard_index_bug.py"] == rw.STATUS_MISMATCH, statuses
    assert statuses["k2_package_regions_bug.py"] == rw.STATUS_MISMATCH, statuses
    for twin in ("k35_vocab_rows", "k36_vocab_softmax"):
        assert [status for name, status in statuses.items() if name.startswith(twin)] \
            == [rw.STATUS_MATCH, rw.STATUS_MISMATCH], statuses
