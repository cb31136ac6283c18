"""A seeded sample of the fuzzer's LLM-answer and ``fix --write`` classes (``benchmarks/fuzz_llm_and_write.py``).

Every malformed answer ends as exit 3 with a document; every ``fix --write`` changes the fix's
line and nothing else; of two racing writers exactly one writes.
"""
from __future__ import annotations

import collections
import random
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import fuzz_llm_and_write as fuzz  # noqa: E402

BAD = ("traceback", "internal_error", "hang", "document_missing", "payload_ran")


class Tally:
    """What ``benchmarks/fuzz.py`` counts, kept for the assertions."""

    def __init__(self) -> None:
        self.runs: collections.Counter = collections.Counter()
        self.codes: collections.Counter = collections.Counter()
        self.problems: list[str] = []

    def add(self, outcome) -> None:
        self.runs[outcome.case.kind] += 1
        self.problems += [f"{name}: {outcome.case.note} {outcome.detail}" for name in BAD if getattr(outcome, name)]

    def lost(self, kind: str, ok: bool, note: str) -> None:
        self.runs[kind] += 1
        if not ok:
            self.problems.append(f"file lost or changed outside the fix: {kind}: {note}")


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch):
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "VERIFY_AGENT_MODEL", "HTTP_PROXY", "HTTPS_PROXY",
                 "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


def test_generated_malformed_llm_answers_all_end_as_exit_3_with_a_document():
    tally = Tally()
    fuzz.run_malformed_llm(tally, random.Random(1), 8)
    assert tally.runs["llm-malformed"] == 8 and tally.problems == []


def test_fix_write_on_random_endings_boms_and_hard_links_changes_only_the_fix():
    tally = Tally()
    fuzz.run_fix_write_exact(tally, random.Random(2), 6)
    assert tally.runs["fix-write-exact"] == 12 and tally.problems == []


def test_racing_writers_leave_exactly_one_write():
    tally = Tally()
    fuzz.run_write_lock_race(tally, random.Random(3), 3)
    fuzz.run_fix_write_race(tally, random.Random(4), 1)
    assert tally.runs["write-lock-race"] == 3 and tally.runs["fix-write-race"] == 3 and tally.problems == []
