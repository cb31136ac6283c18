"""The repair campaign's --resume: fix runs of the same code are taken, the rest run again; and
--rerun's figures over a run cut by its time limit: the bugs it did not reach count too.

A campaign cut short (its time limit, a killed run) is finished by a second run that takes the first
run's rows when their code digest is the current one (``benchmarks/fix_campaign.py``); a row written
by other code, a bug the first run did not start, or one whose written file is not stored runs again.
"""
from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

import fix_campaign as fc  # noqa: E402


def _bug(name: str) -> fc.Bug:
    return fc.Bug(name, REPO / "examples" / "models" / "dist_rowparallel_ok.py", f"x = {name!r}\n", "gallery", False)


def test_rows_of_the_same_code_are_taken_and_the_rest_run():
    ran = [_bug("fixed"), _bug("missed"), _bug("not started"), _bug("other code")]
    ran[0].exit_code, ran[0].patched, ran[0].seconds, ran[0].description = 0, "x = 1\n", 3.5, "a fix"
    ran[1].exit_code, ran[1].description = 0, "no fix (violations)"
    ran[2].notes.append(fc.NOT_STARTED)
    ran[3].exit_code = 0
    earlier = fc.rows(ran[:3], "same") + fc.rows(ran[3:], "older")
    again = [_bug(b.label) for b in ran] + [_bug("new")]
    left = fc.resume(again, earlier, "same")
    assert [b.label for b in left] == ["not started", "other code", "new"]
    fixed, missed = again[0], again[1]
    assert (fixed.patched, fixed.seconds, fixed.exit_code, fixed.description) == ("x = 1\n", 3.5, 0, "a fix")
    assert fixed.notes == [fc.RESUMED] and missed.patched is None and missed.exit_code == 0


def test_the_digest_follows_the_code(tmp_path, monkeypatch):
    digest = fc.code_digest()
    assert digest == fc.code_digest() and len(digest) == 16
    monkeypatch.setattr(fc, "CODE", ("benchmarks/fix_worker.py",))
    assert fc.code_digest() != digest


def test_rerun_counts_the_bugs_the_run_before_did_not_reach():
    before = [_bug("repaired"), _bug("missed")]
    before[0].exit_code, before[0].patched, before[0].patched_truth, before[0].seconds = 0, "x = 1\n", fc.gt.AGREE, 2.0
    before[1].exit_code = 0
    again = [_bug("missed"), _bug("not reached")]
    again[0].exit_code, again[0].patched, again[0].patched_truth, again[0].seconds = 0, "x = 2\n", fc.gt.AGREE, 4.0
    again[1].exit_code = 0
    text = fc.combined(fc.rows(before, "a"), again)
    assert "(1 of its 2 bugs run again, 1 it had not run)" in text
    assert "bugs: 2 of 3 repaired (67 %); median time to the first verified fix 3.0 s" in text
