"""The mutation campaign's warm tool runs (benchmarks/mutants/tool.py ``WarmTools``: the repair
campaign's worker, fork servers kept between mutants) give the verdict a cold
``verify-agent translate`` process gives, with the same error lines, run after run."""
from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

from mutants import tool  # noqa: E402
from mutants.operators import mutants_of  # noqa: E402

ORIGINAL = REPO / "examples" / "models" / "dist_ring_allgather_ok.py"


@pytest.mark.torch
def test_warm_runs_give_the_cold_verdict_and_lines(tmp_path):
    pytest.importorskip("torch")
    mutant = mutants_of(str(ORIGINAL.relative_to(REPO)), ORIGINAL.read_text(), ["dim"])[0]
    path = tmp_path / ORIGINAL.name
    path.write_text(mutant.source)
    cold = tool.run_tool(str(path), timeout=120)
    assert cold.verdict == tool.VIOLATIONS, cold.detail

    warm = tool.WarmTools()
    try:
        answers = []
        for _ in range(2):   # the second run goes to the same worker and its kept server
            run = warm.submit(str(path), timeout=120)
            while run.poll() is None:
                time.sleep(0.05)
            answers.append(run.result)
        assert warm.starts == 1
    finally:
        warm.close()
    for answer in answers:
        assert (answer.verdict, answer.exit_code, answer.lines, answer.files) == \
            (cold.verdict, cold.exit_code, cold.lines, cold.files), answer.detail
