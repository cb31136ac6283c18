"""Which candidate counts as fixing part of a finding (the base of a second edit in the traced repair).

A file with two bugs at once (ring attention whose waits are missing and whose all-gather was dropped)
keeps its forward pass violated after either single edit; the edit that removes every async finding
and leaves only the value finding is the base the second edit builds on.  Measured end to end: that
mutant of examples/realworld/ring_attention_missing_wait.py gets the waits and the all-gather, and
the fix is confirmed on 2 and 4 gloo ranks.
"""
from __future__ import annotations

from verifier.report import ERROR, NOTE, Diagnostic, Report
from verify_agent.repair.headway import improves as _improves, line_map, moves_on as _moves_on, shifts


def _report(*checks: str, passes: dict | None = None, message: str = "") -> Report:
    report = Report("f.py", {"tp": 2})
    for index, check in enumerate(checks):
        report.add(Diagnostic(check, ERROR, message or f"{check} finding", line=10 + index))
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


def test_forward_fixed_and_the_backward_it_hid_violated_is_a_base_for_a_second_edit():
    """A wrong forward hides a backward bug (the run stops at the first counterexample): once the forward
    is right, the backward's finding shows and the forward is left unproven, not violated."""
    before = _report("equivalence", passes={"forward": "violated", "backward": "not proven"})
    after = _report("equivalence", passes={"forward": "not proven", "backward": "violated"})
    assert not _improves(before, after)
    assert _moves_on(before, after)


def test_an_edit_that_leaves_nothing_checked_is_no_base():
    before = _report("equivalence", passes={"forward": "violated", "backward": "not proven"})
    after = _report("unsupported", passes={"forward": "not proven", "backward": "not proven"})
    assert not _moves_on(before, after)


def test_an_edit_that_violates_more_passes_is_no_base():
    before = _report("equivalence", passes={"forward": "violated", "backward": "not proven", "temporal": "proven"})
    after = _report("equivalence", "async", passes={"forward": "not proven", "backward": "violated",
                                                   "temporal": "violated"})
    assert not _moves_on(before, after)


WRONG_AT = "output 0 differs from the single-device run; the values first go wrong at {op} (line {line}) on rank 0"
BEFORE = "h = x @ w\ny = h @ v\nreturn y / world\n"


def _wrong_at(op: str, line: int) -> Report:
    report = Report("f.py", {"tp": 2})
    report.add(Diagnostic("equivalence", ERROR, WRONG_AT.format(op=op, line=line), line=line))
    report.extra["passes"] = {"forward": "violated", "backward": "not proven"}
    return report


def test_lines_are_compared_through_the_edit():
    after = "h = x @ w\ny = h @ v\ndist.all_reduce(y)\nreturn y / world\n"
    assert line_map(BEFORE, after) == {1: 1, 2: 2, 3: 4}


def test_the_same_culprit_on_a_line_the_edit_moved_down_is_no_shift():
    after = "h = x @ w\ny = h @ v\ndist.all_reduce(y)\nreturn y / world\n"
    assert not shifts(_wrong_at("aten.div.Tensor", 3), _wrong_at("aten.div.Tensor", 4), BEFORE, after)


def test_the_run_going_wrong_at_another_op_in_the_same_pass_is_a_shift():
    """``/ world`` removed from a partial sum never reduced: the forward stays violated, but the run now
    goes wrong at the partial sum (the base of the second edit that reduces it)."""
    after = "h = x @ w\ny = h @ v\nreturn y\n"
    assert not _improves(_wrong_at("aten.div.Tensor", 3), _wrong_at("partial", 3))
    assert not _moves_on(_wrong_at("aten.div.Tensor", 3), _wrong_at("partial", 3))
    assert shifts(_wrong_at("aten.div.Tensor", 3), _wrong_at("aten.mm.default", 2), BEFORE, after)


def test_a_rank_that_raises_after_the_edit_is_no_base():
    """A wrong chunk dim makes the product's shapes disagree: nothing is checked any more, which is no
    headway although the forward is no longer 'violated'."""
    before = _wrong_at("aten.div.Tensor", 3)
    after = _report("equivalence", passes={"forward": "not proven", "backward": "not proven"},
                    message="rank 0 of 2 raises where the single-device run does not: RuntimeError: shapes")
    assert not _moves_on(before, after)
    assert not _improves(before, after)
    assert not shifts(before, after, BEFORE, BEFORE.replace("dim=1", "dim=0"))


def test_a_rank_that_raised_and_now_runs_into_a_checked_finding_is_a_base():
    """The converse: a split on the wrong dim made a rank raise (or return a piece of another shape: a
    sequence scattered twice), the edit putting it back lets the run go on to the file's own bug
    (``return y / world`` after the all-reduce).  Measured end to end on that mutant of
    examples/models/dist_rowparallel_sum_divided_by_world.py: both edits, confirmed on 2 and 4 gloo
    ranks (before: no fix, the raise hid the second bug)."""
    before = _report("equivalence", message="rank 0 of 2 raises where the single-device run does not: "
                                            "RuntimeError: shapes")
    before.extra["passes"] = {}   # a run that stopped has no pass checked
    after = _wrong_at("aten.div.Tensor", 3)
    assert _moves_on(before, after)
    nothing = _report("unsupported", passes={"forward": "not proven", "backward": "not proven"})
    assert not _moves_on(before, nothing)
