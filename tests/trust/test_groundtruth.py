"""Real gloo runs (1 rank against N ranks, CPU) of the Python trust cases: the claims their
docstrings make, and so the verdicts ``test_wrong_verdict_patterns.py`` expects, hold."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

try:
    from groundtruth import runner as gt
except ImportError:  # imported under another rootdir/import mode
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from groundtruth import runner as gt

pytestmark = pytest.mark.torch

CASES = Path(__file__).parent / "cases"
# (case, world, expected status of the N-rank run against the 1-rank run; p13: outputs and gradients)
EXPECTED = [
    ("p03_broadcast_src_by_world_ok.py", 2, "match"),
    ("p03_broadcast_src_by_world_ok.py", 4, "match"),
    ("p03_broadcast_src_by_world_bug.py", 2, "mismatch"),
    ("p04_scatter_list_on_source_only_ok.py", 2, "match"),
    ("p04_scatter_list_on_every_rank_bug.py", 2, "error"),
    ("p04_gather_list_on_destination_only_ok.py", 2, "match"),
    ("p04_gather_list_on_every_rank_bug.py", 2, "error"),
    ("p05_p2p_tags_isend_ok.py", 2, "match"),
    ("p05_p2p_tags_blocking_deadlock.py", 2, "deadlock/timeout"),
    ("p09_module_level_plan_outside_entry.py", 2, "match"),
    ("p11_return_in_rank_branch_ok.py", 2, "match"),
    ("p11_return_in_rank_branch_bug.py", 2, "mismatch"),
    ("p13_sequence_sharded_input_grad_ok.py", 2, "match"),
    ("p13_sequence_sharded_input_grad_ok.py", 4, "match"),
    ("p13_sequence_sharded_input_grad_bug.py", 2, "mismatch"),
]


@pytest.fixture(scope="module")
def outcomes():
    # runs that fail or hang leave the other ranks waiting: a short time limit keeps this fast
    # (the others keep a long one: a job after a restart also pays for starting the processes)
    jobs = [gt.Job(gt.JobSpec(str(CASES / name), mode="grad" if name.startswith("p13") else "forward",
                              timeout=10.0 if status in ("error", "deadlock/timeout") else 30.0),
                   world)
            for name, world, status in EXPECTED]
    return {(name, world): result for (name, world, _), result in zip(EXPECTED, gt.run_jobs(jobs))}


@pytest.mark.parametrize("name, world, status", EXPECTED)
def test_gloo_run_behaves_as_the_case_says(outcomes, name, world, status):
    result = outcomes[(name, world)]
    assert result.status == status, result.summary() + (f" ({result.error})" if result.error else "")
    if status == "error":
        assert "ValueError" in (result.error or "") and "must NOT be specified" in (result.error or "")
