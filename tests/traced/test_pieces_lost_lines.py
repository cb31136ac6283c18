"""A rank's output of another shape whose every value is a block of the single device's (so no op made
a non-block) is named where the ranks' pieces together stopped holding the single device's value: the
op that cut a piece again (issue 25, item 4), not the ``return``.  Campaign mutants: megatron-core's
``scatter_to_sequence_parallel_region`` or ``reduce_scatter_to_sequence_parallel_region`` applied twice.
The converse, an output world times too long because a gather read a value every rank held whole, is
named where that value should have become a piece: the line that bound it to a value made before it
(campaign mutants: the same mappings removed, ``local_out = partial``), not the gather; the value is followed
back through the per-token op, not the weight it reads, which every rank also holds whole.
Twin cases in plain torch, gloo ground truth (1 vs 2 ranks); the expected line is found by the case's
"# the bug" marker (the tool never reads it)."""
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
OK, BUG = "p1_sequence_split_ok.py", "p1_sequence_split_twice_bug.py"
DROPPED = "p2_sequence_split_dropped_bug.py"


def translate(name: str) -> tuple[int, dict]:
    run = subprocess.run([sys.executable, "-m", "verify_agent", "translate", str(CASES / name), "--mesh", "tp=2",
                          "--format", "json"], capture_output=True, text=True, cwd=REPO, timeout=300)
    return run.returncode, json.loads(run.stdout)


def marked_line(name: str) -> int:
    (line,) = [n for n, text in enumerate((CASES / name).read_text().splitlines(), 1) if "# the bug" in text]
    return line


def test_rows_split_once_and_gathered_are_verified():
    code, body = translate(OK)
    assert (code, body["verdict"]) == (0, "verified"), body["diagnostics"]


def test_rows_split_twice_are_named_at_the_second_split():
    code, body = translate(BUG)
    assert (code, body["verdict"]) == (1, "violations"), body["diagnostics"]
    first = [d for d in body["diagnostics"] if d["severity"] == "error"][0]
    assert (first["line"], first["file"]) == (marked_line(BUG), None), first
    assert "has shape (4, 4) on rank 0 but (8, 4) on one device" in first["message"], first["message"]
    assert "stop holding the single device's value" in first["message"], first["message"]


def test_rows_gathered_whole_are_named_where_the_split_was_dropped():
    code, body = translate(DROPPED)
    assert (code, body["verdict"]) == (1, "violations"), body["diagnostics"]
    first = [d for d in body["diagnostics"] if d["severity"] == "error"][0]
    assert (first["line"], first["file"]) == (marked_line(DROPPED), None), first
    assert "has shape (16, 4) on rank 0 but (8, 4) on one device" in first["message"], first["message"]
    assert "gathers a value every rank holds whole, as one device does: it comes from local" in first["message"], \
        first["message"]


def test_gloo_runs_back_the_twins():
    sys.path.insert(0, str(REPO / "tests"))
    from groundtruth import realworld_runner as rw

    ok, bug, dropped = rw.run_jobs([rw.Job(rw.Spec(str(CASES / name), timeout=60.0), 2) for name in (OK, BUG, DROPPED)])
    assert ok.status == rw.STATUS_MATCH, (ok.status, ok.error)
    assert bug.status == rw.STATUS_MISMATCH, (bug.status, bug.error)
    assert dropped.status == rw.STATUS_MISMATCH, (dropped.status, dropped.error)
