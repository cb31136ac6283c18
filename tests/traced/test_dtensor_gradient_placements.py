"""A DTensor gradient is compared as the piece its own placements give, not its parameter's.

DTensor's backward may leave a ``Shard(1)`` weight's gradient ``Replicate`` (the gallery's
`dtensor_softmax_sharded_dim_ok.py`: the rowwise layer consumes a replicated DTensor, so the
weight gradient's matmul reads the whole activation).  Compared as the parameter's block, the
whole gradient looked like a wrong piece: `unsupported` ("the verifier's model ... disagrees with
torch").  Real gloo runs back both twins.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import warm_cli

pytest.importorskip("torch")

pytestmark = pytest.mark.torch

REPO = Path(__file__).resolve().parents[2]
GALLERY = REPO / "examples" / "models"
OK, BUG = "dtensor_softmax_sharded_dim_ok.py", "dtensor_local_output_softmax_sharded_dim.py"


def translate(name: str) -> tuple[int, dict]:
    run = warm_cli.run(["translate", str(GALLERY / name), "--format", "json"], cwd=REPO, timeout=300)
    return run.returncode, json.loads(run.stdout)


def test_a_replicated_gradient_of_a_sharded_weight_is_proven_whole():
    code, body = translate(OK)
    assert (code, body["verdict"]) == (0, "verified"), body["diagnostics"]
    assert body["passes"]["backward"] == "proven", body["passes"]
    assert any(p.startswith("backward:") and "down.weight" in p for p in body["proven"]), body["proven"]


def test_its_twin_stays_a_violation():
    code, body = translate(BUG)
    assert (code, body["verdict"]) == (1, "violations"), body["diagnostics"]


def test_gloo_runs_back_both():
    sys.path.insert(0, str(REPO / "tests"))
    from groundtruth import runner as gt

    jobs = [gt.Job(gt.JobSpec(str(GALLERY / name), mode="grad"), 2) for name in (OK, BUG)]
    ok, bug = gt.run_jobs(jobs)
    assert ok.status == "match", (ok.error, ok.details)
    assert any(d.name.startswith("grad[param") for d in ok.details), ok.details
    assert bug.status == "mismatch", (bug.error, bug.details)
