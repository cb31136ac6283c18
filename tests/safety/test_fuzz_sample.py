"""A sampled subset of ``benchmarks/fuzz.py``: random bad inputs end cleanly (hypothesis drives the seed).

Every case must end with an exit code in 0-3 from the console entry: no traceback, no internal
error (exit 4), no hang, a JSON document when JSON was asked for, and no payload executed.
"""
from __future__ import annotations

import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import fuzz_cases as fc


def _check(outcome: fc.Outcome) -> None:
    problems = [name for name in ("traceback", "internal_error", "hang", "document_missing", "payload_ran")
                if getattr(outcome, name)]
    assert problems == [], f"{problems}: {' '.join(outcome.case.argv)} -> {outcome.detail}"
    assert outcome.exit_code in (0, 1, 2, 3)


@settings(max_examples=16, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(min_value=0, max_value=2**32 - 1), kind=st.sampled_from(sorted(fc.GENERATORS)))
@example(seed=176073, kind="python")   # fix on a file libcst cannot read: an internal error once
def test_random_bad_input_ends_cleanly(seed, kind):
    case = fc.GENERATORS[kind](random.Random(seed))
    with tempfile.TemporaryDirectory() as folder:
        _check(fc.run_in_process(case, Path(folder), timeout=90))


@pytest.mark.parametrize("case", [c for c in fc.nested_cases()
                                  if "3000" in c.note or (c.kind == "huge" and "functions" not in c.note)],
                         ids=lambda c: c.note)
def test_deep_and_huge_inputs_end_cleanly(case):
    with tempfile.TemporaryDirectory() as folder:
        _check(fc.run_in_process(case, Path(folder), timeout=90))
