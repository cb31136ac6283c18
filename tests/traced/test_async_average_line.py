"""An asynchronous all-reduce that averages where it must sum (issue 25's reduce-op mutants of megatron-core's
backward): gloo sums, then divides when the wait is made; the division is the all-reduce's and is named at its
line, not at the wait's.  A dropped wait (issue 25's removed-wait mutants): the finding names the early read,
and its ``repair_line`` is the line after which the wait goes (``frontends/traced/wait_lines.py``): right
before the read in the issuing function, or before the issuing helper's return when the read is its caller's.
Either is shown once torch reproduces it with each async result written at its wait()
(``frontends/traced/late_completion.py``); an early read whose value torch shows no effect of is not.
Twins, gloo ground truth (1 vs 2 ranks), the expected line found by the case's "# the bug" marker (the tool
never reads it)."""
from __future__ import annotations

from pathlib import Path

import pytest
from case_runs import MATCH, MISMATCH, gloo_statuses, marked_line, translate

from frontends.traced.wait_lines import wait_repair_line

CASES = Path(__file__).parent / "cases"

pytestmark = pytest.mark.torch


def test_the_summing_twin_is_verified():
    pytest.importorskip("torch")
    code, body = translate("k17_async_average_ok.py")
    assert (code, body["verdict"]) == (0, "verified"), body["diagnostics"]


def test_an_asynchronous_average_is_named_at_the_all_reduce_not_the_wait():
    pytest.importorskip("torch")
    code, body = translate("k17_async_average_bug.py")
    assert (code, body["verdict"]) == (1, "violations"), body["diagnostics"]
    first = [d for d in body["diagnostics"] if d["severity"] == "error"][0]
    assert first["line"] == marked_line(CASES / "k17_async_average_bug.py"), first
    assert "first go wrong at aten.div_" in first["message"], first["message"]


@pytest.mark.parametrize("name", ["k27_async_wait_dropped_bug.py", "k28_ring_exchange_wait_bug.py"])
def test_a_dropped_wait_is_repaired_right_before_the_read_or_before_the_helper_returns(name):
    pytest.importorskip("torch")
    code, body = translate(name)
    assert (code, body["verdict"]) == (1, "violations"), body["diagnostics"]
    first = [d for d in body["diagnostics"] if d["severity"] == "error"][0]
    assert "before wait(handle=" in first["message"] and first["line"] != marked_line(CASES / name), first
    assert first["repair_line"] == marked_line(CASES / name), first
    # shown because torch, with each async result written at its wait(), computes something else
    assert "reproduced by torch" in first["message"] and "written at its wait()" in first["message"], first


def test_an_early_read_torch_shows_no_difference_for_is_not_a_violation():
    # the twin of k27 whose early read is multiplied by zero: a race by the recorded ops, none in the numbers
    pytest.importorskip("torch")
    code, body = translate("k33_async_read_discarded.py")
    assert (code, body["verdict"]) == (3, "unsupported"), body["diagnostics"]
    first = [d for d in body["diagnostics"] if d["severity"] == "error"][0]
    assert first["check"] == "unsupported" and first["line"] == 13, first
    assert "not reproduced by torch" in first["message"] and "before wait(handle=" in first["message"], first


def test_the_waiting_exchange_is_verified():
    pytest.importorskip("torch")
    code, body = translate("k28_ring_exchange_wait_ok.py")
    assert (code, body["verdict"]) == (0, "verified"), body["diagnostics"]


def test_no_line_where_the_statements_do_not_say_where_the_wait_goes():
    helper = ("def exchange(b, out):\n"                       # 1
              "    work = dist.irecv(out, src=0)\n"            # 2
              "    {tail}\n"                                   # 3
              "def caller(b, out):\n"                         # 4
              "    got = exchange(b, out)\n"                  # 5
              "    return got + 1\n")                         # 6
    assert wait_repair_line(helper.format(tail="return out"), 2, 6) == 2
    assert wait_repair_line(helper.format(tail="return out"), 2, None) == 2
    assert wait_repair_line(helper.format(tail="return out, work"), 2, 6) is None       # the caller holds it
    assert wait_repair_line(helper.format(tail="return caller(b, out)"), 2, 6) is None  # may run the read
    assert wait_repair_line(helper.format(tail="keep.append(work)"), 2, None) is None   # kept elsewhere
    branches = helper.format(tail="if b:\n        return out\n    return b").replace("got + 1", "got")
    assert wait_repair_line(branches, 2, 8) is None                                     # two returns
    assert wait_repair_line(helper.format(tail="return out"), 2, 1) is None              # read before the op


def test_gloo_runs_back_the_twins():
    pytest.importorskip("torch")
    names = ["k17_async_average_ok.py", "k17_async_average_bug.py", "k27_async_wait_dropped_bug.py",
             "k28_ring_exchange_wait_ok.py", "k28_ring_exchange_wait_bug.py", "k33_async_read_discarded.py"]
    statuses = gloo_statuses(names)
    assert statuses["k33_async_read_discarded.py"][0] == MATCH, statuses
    assert statuses["k17_async_average_ok.py"][0] == MATCH, statuses
    assert statuses["k17_async_average_bug.py"][0] == MISMATCH, statuses
    assert statuses["k27_async_wait_dropped_bug.py"][0] == MISMATCH, statuses   # its twin: k17_async_average_ok.py
    assert statuses["k28_ring_exchange_wait_ok.py"][0] == MATCH, statuses
    assert statuses["k28_ring_exchange_wait_bug.py"][0] == MISMATCH, statuses
