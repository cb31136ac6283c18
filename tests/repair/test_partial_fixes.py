"""Which candidate counts as fixing part of a finding (the base of a second edit in the traced repair).

A file with two bugs at once (ring attention whose waits are missing and whose all-gather was dropped)
keeps its forward pass violated after either single edit; the edit that removes every async finding
and leaves only the value finding is the base the second edit builds on.  Measured end to end: that
mutant of examples/realworld/ring_attention_missing_wait.py gets the waits and the all-gather, and
the fix is confirmed on 2 and 4 gloo ranks.
"""
from __future__ import annotations

from verifier.report import ERROR, NOTE, Diagnostic, Report
from verify_agent.repair.traced_fixes import _improves


def _report(*checks: str, passes: dict | None = None) -> Report:
    report = Report("f.py", {"tp": 2})
    for index, check in enumerate(checks):
        report.add(Diagnostic(check, ERROR, f"{check} finding", line=10 + index))
    report.add(Diagnostic("assumption", NOTE, "a note is no finding"))
    report.extra["passes"] = passes or {"forward": "violated", "temporal": "proven"}
    return report


def test_async_findings_gone_and_the_value_finding_left_is_a_partial_fix():
    before = _report("async", "async", "async", "equivalence")
    assert _improves(before, _report("equivalence"))


def test_a_new_kind_of_finding_is_not_a_partial_fix():
    before = _report("async", "equivalence")
    assert not _improves(before, _report("equivalence", "p2p"))


def test_the_same_findings_are_not_a_partial_fix():
    before = _report("async", "equivalence")
    assert not _improves(before, _report("async", "equivalence"))


def test_a_violated_pass_proven_is_a_partial_fix():
    before = _report("equivalence", passes={"forward": "violated", "backward": "violated"})
    after = _report("equivalence", passes={"forward": "proven", "backward": "violated"})
    assert _improves(before, after)
