"""A sampled run of ``benchmarks/fuzz_sandbox.py``: every payload once, and the detectors shown to fire."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import fuzz_sandbox  # noqa: E402


def test_every_payload_through_the_sandbox_reaches_nothing(monkeypatch):
    monkeypatch.setattr(fuzz_sandbox, "TIMEOUT", 8.0)
    every = sum(len(payloads) for payloads in fuzz_sandbox.CLASSES.values())
    result = fuzz_sandbox.run_all({"sandbox": every}, seed=0, report=None)
    assert result["cases"] >= every - len(fuzz_sandbox.SIGNAL_PAYLOADS)
    assert result["by_level"]["sandbox"]["payload_ran"] >= result["cases"] - 2, result["examples"]
    assert {name: result["counts"].get(name, 0) for name in fuzz_sandbox.COUNTED} == dict.fromkeys(
        fuzz_sandbox.COUNTED, 0), result["examples"]


def test_without_the_sandbox_the_same_payloads_are_caught_by_the_detectors():
    result = fuzz_sandbox.run_all({"control": 14}, seed=0, report=None)
    assert result["counts"]["secret_visible"] >= 1 and result["counts"]["left_behind"] >= 1
    if fuzz_sandbox.machine_has_a_route():
        assert result["counts"]["route"] >= 1


@pytest.mark.torch
def test_payloads_in_a_traced_file_and_in_the_triage_reach_nothing():
    pytest.importorskip("torch")
    result = fuzz_sandbox.run_all({"translate": 4, "triage": 1}, seed=1, report=None)
    assert result["by_level"]["translate"]["payload_ran"] >= 3, result["examples"]
    assert {name: result["counts"].get(name, 0) for name in fuzz_sandbox.COUNTED} == dict.fromkeys(
        fuzz_sandbox.COUNTED, 0), result["examples"]
