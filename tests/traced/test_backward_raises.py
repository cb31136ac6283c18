"""A custom Function backward of the user's package that breaks the backward pass on the ranks.

Twins in tests/traced/cases/k4_* (the Functions in k4_row_regions/): a backward that returns the
gradient of one rank's rows (autograd rejects its shape), and one that uses a list before making it.
Both are the program's backward failing on the ranks (a violation named at the Function's line in the
package file), not the backward this tool adds being refused (which left gradients unchecked);
real gloo runs back all three.

A custom backward that returns its gradient as it was handed it where the gradient needed a reduction
or a scaling (issue 25: the finding names the line where the fix goes): the package's copy into the
parallel region that does not all-reduce (k4_package_copy_bug.py, twin k4_package_copy_ok.py: the
first error at that ``return`` in rows_bugs.py; it named the checked file's matmul) and
examples/heldout's h31, an average over the ranks whose backward does not divide (twin h30: the first
error and its repair line at that ``return``, line 40; it named line 56, no repair line).  Gloo ground
truth for both pairs (1 vs 2 ranks, gradients).

The forward's counterpart: a custom Function's forward whose ``_reduce`` hands the rank's partial sum back
without the all-reduce (k4_reduce_forward_bug.py: named, line and repair line, after the statement before
that ``return``, where the all-reduce goes; it named the entry's return), twin k4_reduce_forward_ok.py
(all-reduces in place and returns the same tensor: verified, not taken for a tensor handed back as it
was given).  Gloo ground truth with the package cases.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

pytestmark = pytest.mark.torch

REPO = Path(__file__).resolve().parents[2]
CASES = Path(__file__).parent / "cases"
BUGGY = CASES / "k4_row_regions" / "rows_bugs.py"


def translate(name: str) -> tuple[int, dict]:
    run = subprocess.run([sys.executable, "-m", "verify_agent", "translate", str(CASES / name), "--format", "json"],
                         capture_output=True, text=True, cwd=REPO, timeout=300)
    return run.returncode, json.loads(run.stdout)


def _lines_marked(path: Path) -> list[int]:
    return [n for n, text in enumerate(path.read_text().splitlines(), 1) if "# the bug" in text]


def test_the_right_regions_are_verified_forward_and_backward():
    code, body = translate("k4_package_backward_ok.py")
    assert (code, body["verdict"]) == (0, "verified"), body["diagnostics"]
    assert body["passes"]["backward"] == "proven", body["passes"]


@pytest.mark.parametrize("name, marked, words", [
    ("k4_package_backward_shape_bug.py", 0, "returned an invalid gradient"),
    ("k4_package_backward_raises_bug.py", 1, "UnboundLocalError"),
])
def test_a_broken_package_backward_is_named_at_its_line(name, marked, words):
    code, body = translate(name)
    errors = [d for d in body["diagnostics"] if d["severity"] == "error"]
    assert (code, body["verdict"]) == (1, "violations"), errors
    first = errors[0]
    assert words in first["message"], first
    assert first["line"] == _lines_marked(BUGGY)[marked], first
    assert first["file"] and (REPO / first["file"]).resolve() == BUGGY.resolve(), first


def test_the_package_copy_whose_backward_reduces_is_verified():
    code, body = translate("k4_package_copy_ok.py")
    assert (code, body["verdict"]) == (0, "verified"), body["diagnostics"]


def test_a_package_copy_whose_backward_passes_the_partial_gradient_on_is_named_at_that_return():
    code, body = translate("k4_package_copy_bug.py")
    errors = [d for d in body["diagnostics"] if d["severity"] == "error"]
    assert (code, body["verdict"]) == (1, "violations"), errors
    first = errors[0]
    assert first["line"] == _lines_marked(BUGGY)[2], first
    assert first["file"] and (REPO / first["file"]).resolve() == BUGGY.resolve(), first
    assert "partial sum of one device's, passed on there unreduced" in first["message"], first


class _PassOn:
    """Autograd Functions for the test below, built when torch is there."""

    @staticmethod
    def functions():
        import torch

        class PassOn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 1

            @staticmethod
            def backward(ctx, g):
                return g   # passes its gradient on

        class DoubleInPlace(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                g.mul_(2)
                return g   # the same tensor, another value

        return PassOn, DoubleInPlace


def test_only_a_backward_returning_its_gradient_as_it_was_handed_is_recorded_as_passing_it_on():
    import torch
    from frontends.traced.backward_raises import BackwardReturns

    pass_on, double = _PassOn.functions()
    seen = []
    x, w = torch.ones(3, requires_grad=True), torch.arange(3.0)
    with BackwardReturns(lambda tensor, frame: seen.append(frame.f_code.co_qualname), lambda t: t._version):
        (double.apply(pass_on.apply(x)) * w).sum().backward()
    assert len(seen) == 1 and seen[0].endswith(".PassOn.backward"), seen   # not DoubleInPlace's
    assert x.grad.tolist() == [0.0, 2.0, 4.0]
    seen.clear()   # a value the recorder did not name anew (an in-place write it missed): the version counter tells
    with BackwardReturns(lambda tensor, frame: seen.append(frame.f_code.co_qualname), lambda t: "the same"):
        (double.apply(pass_on.apply(x)) * w).sum().backward()
    assert len(seen) == 1 and seen[0].endswith(".PassOn.backward"), seen


class _ReduceForward:
    """Autograd Functions for the test below: a forward that calls ``_reduce``, which hands its input back
    as it was given it (the all-reduce missing) or after changing it in place (as ``dist.all_reduce`` does)."""

    @staticmethod
    def functions():
        import torch

        def handed_back(x):
            return x

        def changed_in_place(x):
            x.mul_(2)
            return x

        def function(reduce):
            class Reduce(torch.autograd.Function):
                @staticmethod
                def forward(ctx, x):
                    return reduce(x)

                @staticmethod
                def backward(ctx, g):
                    return g
            return Reduce

        return function(handed_back), function(changed_in_place)


def test_only_a_forward_returning_its_input_as_it_was_given_is_noted_innermost_first():
    import torch
    from frontends.traced.forward_returns import ForwardReturns, noting_forward_returns

    handed, changed = _ReduceForward.functions()
    seen = []
    returns = ForwardReturns(lambda filename: filename == __file__, lambda t: "value",
                             lambda tensor, frame: seen.append(frame.f_code.co_name))
    x = torch.ones(3, requires_grad=True)
    with noting_forward_returns(returns):
        changed.apply(handed.apply(x * 1))
    assert seen == ["handed_back", "forward"], seen   # the innermost return first; not changed_in_place's


def test_a_forward_that_hands_its_partial_sum_back_unreduced_is_named_where_the_reduction_belongs():
    """The file's own reduce from the parallel region: its ``_reduce`` returns the partial sum without the
    all-reduce (k4_reduce_forward_bug.py), named where the all-reduce belongs, the statement before that
    return (it named the entry's return); the twin that all-reduces in place and returns the same tensor is
    verified."""
    code, body = translate("k4_reduce_forward_bug.py")
    errors = [d for d in body["diagnostics"] if d["severity"] == "error"]
    assert (code, body["verdict"]) == (1, "violations"), errors
    (line,) = _lines_marked(CASES / "k4_reduce_forward_bug.py")
    assert (errors[0]["line"], errors[0]["file"], errors[0]["repair_line"]) == (line, None, line), errors[0]
    assert "partial sum of one device's, passed on unreduced toward the output" in errors[0]["message"], errors[0]
    assert f"belongs after line {line}, before that return" in errors[0]["message"], errors[0]
    code, body = translate("k4_reduce_forward_ok.py")
    assert (code, body["verdict"]) == (0, "verified"), body["diagnostics"]


HELDOUT = REPO / "examples" / "heldout"
AVERAGE_OK, AVERAGE_BUG = (HELDOUT / "h30_fsdp_linear_ok.py", HELDOUT / "h31_fsdp_linear_average_backward_unscaled.py")


def test_an_average_whose_backward_does_not_divide_is_repaired_at_that_return():
    code, body = translate(str(AVERAGE_BUG))   # absolute: CASES / name keeps it as it is
    errors = [d for d in body["diagnostics"] if d["severity"] == "error"]
    assert (code, body["verdict"]) == (1, "violations"), errors
    (line,) = [n for n, text in enumerate(AVERAGE_BUG.read_text().splitlines(), 1) if text.strip() == "return g"]
    assert (errors[0]["line"], errors[0]["file"], errors[0]["repair_line"]) == (line, None, line), errors[0]
    assert "the world size times one device's" in errors[0]["message"], errors[0]


def test_the_average_whose_backward_divides_is_verified():
    code, body = translate(str(AVERAGE_OK))
    assert (code, body["verdict"]) == (0, "verified"), body["diagnostics"]


def test_gloo_runs_back_the_average_twins():
    from case_runs import MATCH, MISMATCH, gloo_statuses

    statuses = gloo_statuses([str(AVERAGE_OK), str(AVERAGE_BUG)])
    assert statuses[str(AVERAGE_OK)][0] == MATCH, statuses
    assert statuses[str(AVERAGE_BUG)][0] == MISMATCH, statuses


def test_gloo_runs_back_the_package_cases():
    """Inputs trainable, as the tool takes them (mode "grad"): the ranks' backward raises on both broken backwards;
    the copy that does not reduce gives another gradient of x."""
    sys.path.insert(0, str(REPO / "tests"))
    from groundtruth import runner as gt

    names = ("k4_package_backward_ok.py", "k4_package_backward_shape_bug.py", "k4_package_backward_raises_bug.py",
             "k4_package_copy_ok.py", "k4_package_copy_bug.py", "k4_reduce_forward_ok.py", "k4_reduce_forward_bug.py")
    sys.path.insert(0, str(CASES))   # the files import their package from beside them (spawned ranks too)
    try:
        results = gt.run_jobs([gt.Job(gt.JobSpec(str(CASES / name), mode="grad"), 2) for name in names])
    finally:
        sys.path.remove(str(CASES))
    statuses = {name: result.status for name, result in zip(names, results)}
    assert statuses == {"k4_package_backward_ok.py": gt.STATUS_MATCH,
                        "k4_package_backward_shape_bug.py": gt.STATUS_ERROR,
                        "k4_package_backward_raises_bug.py": gt.STATUS_ERROR,
                        "k4_package_copy_ok.py": gt.STATUS_MATCH, "k4_package_copy_bug.py": gt.STATUS_MISMATCH,
                        "k4_reduce_forward_ok.py": gt.STATUS_MATCH, "k4_reduce_forward_bug.py": gt.STATUS_MISMATCH}, \
        {name: (r.status, (r.error or "")[-300:]) for name, r in zip(names, results)}
    assert any(d.name.startswith("grad") for d in results[0].details), results[0].details
