"""A timing finding (a deadlock, a read before wait()) is shown only as real ranks reproduce it.

``report_timing`` takes what real gloo ranks did (``verifier.confirmation.Confirmation``); the gloo runs
themselves are tested end to end in tests/traced/test_rank_failures.py (a pair that both receive first).
"""
from __future__ import annotations

from verifier.confirmation import AGREES, NOT_RUN, REPRODUCED, Confirmation
from verifier.report import ERROR, NOTE, Diagnostic, Report
from verifier.traced_check import report_timing

DEADLOCK = Diagnostic("deadlock", ERROR, "deadlock, cycle rank 0 -> rank 1 -> rank 0: rank 0 is blocked at line 25.",
                      25, repair_line=25)
ORDER = Diagnostic("deadlock", NOTE, "rank 1 posts its receive first", 26)


def _reported(confirmation):
    report = Report("model.py", {"tp": 2})
    report_timing(report, [DEADLOCK, ORDER], confirmation)
    return report


def test_a_deadlock_real_ranks_reproduce_is_shown_with_what_they_did():
    report = _reported(Confirmation(REPRODUCED, "torch on 2 gloo ranks fails too, by hanging instead", 2))
    (error,) = [d for d in report.diagnostics if d.severity == ERROR]
    assert (error.check, error.line, error.repair_line) == ("deadlock", 25, 25)
    assert error.message.endswith("(torch on 2 gloo ranks fails too, by hanging instead)")
    assert ORDER in report.diagnostics and report.verdict == "violations"


def test_a_deadlock_real_ranks_finish_is_not_a_violation():
    report = _reported(Confirmation(AGREES, "on 2 real gloo ranks with the same inputs no rank raises", 2))
    (error,) = [d for d in report.diagnostics if d.severity == ERROR]
    assert error.check == "unsupported" and error.line == 25 and report.verdict == "unsupported"
    assert "not reproduced by torch" in error.message and "deadlock, cycle" in error.message
    assert report.extra["tool_defects"][0]["kind"] == "timing not reproduced by torch"


def test_a_deadlock_real_ranks_could_not_settle_is_not_reported_as_one():
    report = _reported(Confirmation(NOT_RUN, "torch on one device did not finish either", 2))
    (error,) = [d for d in report.diagnostics if d.severity == ERROR]
    assert error.check == "unsupported" and "not confirmed by torch" in error.message
    assert report.verdict == "unsupported"


def test_without_confirmation_asked_the_findings_are_shown_as_recorded():
    report = _reported(None)
    assert [d.message for d in report.diagnostics] == [DEADLOCK.message, ORDER.message]
