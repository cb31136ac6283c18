"""A buffer torch.empty made and nothing wrote is where the values go wrong (a dropped collective that
should have filled it): twins k5_reduce_scatter_buffer_{ok,bug}.py, backed by real gloo runs.  When the
frame ran a branch between the allocation and the read (k32_exchange_branch_{ok,bug}.py: the exchange runs
only with several ranks and fills another buffer), the missing write belongs in that branch: its last
statement that ran is named, not the allocation."""
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
OK, BUG = "k5_reduce_scatter_buffer_ok.py", "k5_reduce_scatter_buffer_bug.py"
BRANCH_OK, BRANCH_BUG = "k32_exchange_branch_ok.py", "k32_exchange_branch_bug.py"


def translate(name: str) -> tuple[int, dict]:
    run = subprocess.run([sys.executable, "-m", "verify_agent", "translate", str(CASES / name), "--format", "json"],
                         capture_output=True, text=True, cwd=REPO, timeout=300)
    return run.returncode, json.loads(run.stdout)


@pytest.mark.parametrize("name", [OK, BRANCH_OK])
def test_the_filled_buffer_is_verified(name):
    code, body = translate(name)
    assert (code, body["verdict"]) == (0, "verified"), body["diagnostics"]


def _first_error(name: str) -> tuple[dict, int]:
    code, body = translate(name)
    errors = [d for d in body["diagnostics"] if d["severity"] == "error"]
    assert (code, body["verdict"]) == (1, "violations"), errors
    (marked,) = [n for n, text in enumerate((CASES / name).read_text().splitlines(), 1) if "# the bug" in text]
    return errors[0], marked


def test_the_unfilled_buffer_is_named_at_its_allocation():
    first, marked = _first_error(BUG)
    assert first["line"] == marked and "nothing wrote before it was read" in first["message"], first


def test_a_write_missing_from_a_branch_that_ran_is_named_in_that_branch():
    first, marked = _first_error(BRANCH_BUG)
    assert first["line"] == marked, first
    assert "nothing wrote before aten.view.default read it at line 24" in first["message"], first["message"]
    assert "belongs in the branch that ran between them (from line 20)" in first["message"], first["message"]


def test_gloo_runs_back_both():
    sys.path.insert(0, str(REPO / "tests"))
    from groundtruth import runner as gt

    names = (OK, BUG, BRANCH_OK, BRANCH_BUG)
    runs = gt.run_jobs([gt.Job(gt.JobSpec(str(CASES / name), mode="forward"), 2) for name in names])
    assert [run.status for run in runs] == [gt.STATUS_MATCH, gt.STATUS_MISMATCH] * 2, [run.error for run in runs]


def test_the_branch_is_named_only_for_a_buffer_made_in_the_reading_frame():
    """Unit test of verifier/unwritten_lines.write_slot on recorded ops: a buffer allocated at line 3, read at
    line 9 through the name bound there, after a branch from line 5 whose last statement that ran is line 6:
    line 6.  The same read of a buffer a call handed back (allocated at another line than the one binding
    the name: in another frame), or with the last statement in the allocation's own block: no answer (the
    allocation stands)."""
    from verifier.ir import Op, Span
    from verifier.unwritten_lines import write_slot

    made = Op(("buf",), "aten.empty_like.default", (), {}, Span(3))
    unwritten = Op(("buf",), "memory allocated by aten.empty_like.default ...", (), {}, Span(3))

    def reader(bound_line: int, after: tuple) -> Op:
        return Op(("out",), "aten.view.default", ("buf",), {}, Span(9, bound=(("buf", "output", bound_line),),
                                                                      after=after))

    found = write_slot(reader(3, (6, 5)), unwritten, {"buf": made})
    assert found is not None and found.span.place() == (6, None) and "from line 5" in found.kind, found
    # bound on line 6 to what a call returned (the allocation ran in the callee, at its line 3), a branch from 7
    assert write_slot(reader(6, (8, 7)), unwritten, {"buf": made}) is None
    assert write_slot(reader(3, (6, None)), unwritten, {"buf": made}) is None   # no branch: the same block
