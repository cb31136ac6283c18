"""Every counterexample of the traced path is confirmed by torch before it is a violation.

The verifier finds differences with its own model of the recorded ops; before one is printed,
the user's code runs for real (one device, and the ranks on gloo) with the counterexample's
values, and torch's numbers are compared.  Torch differs: a violation showing torch's values.
Torch agrees: ``unsupported``, listed under ``tool_defects`` (a defect of the verifier).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from frontends.traced import TraceOptions, trace_file  # noqa: E402
from frontends.traced.confirm import confirm_on_ranks  # noqa: E402
from frontends.traced.message import MessageError, pack, unpack  # noqa: E402
from verifier import registry  # noqa: E402
from verifier.report import UNSUPPORTED, VERIFIED, VIOLATIONS  # noqa: E402
from verifier.traced_check import check_traced  # noqa: E402
from verify_agent.traced import trace_and_verify  # noqa: E402

pytestmark = pytest.mark.torch

REPO = Path(__file__).resolve().parents[2]
CORRECT = REPO / "examples" / "models" / "dist_custom_autograd_f_ok.py"   # f/g operators: forward and backward right
MISSING_ALL_REDUCE = REPO / "examples" / "realworld" / "explicit_tp_mlp_missing_allreduce.py"


def _translate(path: Path):
    result = trace_and_verify(path.read_text(), str(path), entry=None, mesh=None, inputs={}, layouts=[], timeout=300)
    assert result is not None and result.report is not None
    return result.report


@pytest.fixture
def mm_off_by_one(monkeypatch):
    """The verifier's NumPy rule of aten.mm made wrong on purpose: every product gains 1."""
    rule = registry.get_rule("aten.mm.default")

    def wrong(xp, args, attrs, ctx):
        (out,) = rule.evaluate(xp, args, attrs, ctx)
        return [out + 1.0]

    monkeypatch.setitem(registry.REGISTRY, "aten.mm.default", dataclasses.replace(rule, evaluate=wrong))


def test_a_wrong_op_rule_gives_unsupported_naming_the_op_not_a_violation(mm_off_by_one):
    program = trace_file(CORRECT, TraceOptions(world=2, timeout=120))
    report = check_traced(program, timeout_s=60, prove=False,
                          confirm=lambda p, f: confirm_on_ranks(p, f, path=str(CORRECT), timeout=120))
    assert report.verdict == UNSUPPORTED
    [message] = [d.message for d in report.diagnostics if d.check == "unsupported"]
    assert "the verifier's model of op aten.mm.default disagrees with torch at line" in message
    [defect] = report.extra["tool_defects"]
    assert defect["kind"] == "model disagrees with torch" and defect["op"] == "aten.mm.default"
    assert "confirmed_by_torch" not in report.extra


def test_without_confirmation_the_same_wrong_rule_would_be_a_violation(mm_off_by_one):
    program = trace_file(CORRECT, TraceOptions(world=2, timeout=120))
    assert check_traced(program, timeout_s=60, prove=False).verdict == VIOLATIONS


def test_a_missing_all_reduce_is_still_a_violation_shown_with_torchs_values():
    report = _translate(MISSING_ALL_REDUCE)
    assert report.verdict == VIOLATIONS
    [violation] = [d for d in report.diagnostics if d.check == "equivalence" and d.severity == "error"]
    assert "reproduced by torch" in violation.message and "2 gloo ranks" in violation.message
    assert violation.counterexample.note.startswith("torch on one device computes output 0")
    [confirmed] = report.extra["confirmed_by_torch"]
    assert confirmed["world"] == 2
    assert not np.isclose(confirmed["reference"], confirmed["rank_value"], rtol=1e-4)
    assert "tool_defects" not in report.extra


def test_a_correct_file_stays_verified_and_runs_no_confirmation():
    report = _translate(CORRECT)
    assert report.verdict == VERIFIED
    assert "confirmed_by_torch" not in report.extra and "tool_defects" not in report.extra


def test_messages_from_children_are_data_only():
    meta, arrays = unpack(pack({"status": "ok"}, {"a": np.arange(6.0).reshape(2, 3), "b": np.int64(3)}))
    assert meta == {"status": "ok"} and arrays["a"].shape == (2, 3) and arrays["b"].shape == ()
    forged = pack({"status": "ok"}, {"a": np.zeros(2)}).replace(b'"float64"', b'"object0"')
    with pytest.raises(MessageError):
        unpack(forged)
    with pytest.raises(MessageError):
        unpack(b"\x80\x04pickle")


def _sharded_program():
    from verifier.ir import Op, TensorSpec
    from verifier.traced_ir import TracedProgram

    def piece(rank):
        return (Op(("w@local",), "aten.slice.Tensor", ("w",),
                   {"dim": 0, "start": 2 * rank, "end": 2 * rank + 2, "step": 1, "layout_source": "shape"}),)

    return TracedProgram(world=2, mesh={"tp": 2}, inputs=(TensorSpec("w", (4, 2), "f32"),), reference=(),
                         ranks=(piece(0), piece(1)), comparisons=())


def test_a_parameter_the_code_builds_as_another_piece_contradicts_the_assumed_layout():
    from frontends.traced.confirm import _layout_contradicted

    whole = np.arange(8.0).reshape(4, 2)
    swapped = [{"w@local": whole[2:4]}, {"w@local": whole[0:2]}]
    assert "parameter w" in _layout_contradicted(_sharded_program(), {"w": whole}, {"w": whole}, 0, swapped)


def test_pieces_every_rank_draws_alike_or_as_assumed_are_no_contradiction():
    from frontends.traced.confirm import _layout_contradicted

    whole = np.arange(8.0).reshape(4, 2)
    for owns in ([{"w@local": whole[0:2]}, {"w@local": whole[0:2]}], [{"w@local": whole[0:2]}, {"w@local": whole[2:4]}]):
        assert all(_layout_contradicted(_sharded_program(), {"w": whole}, {"w": whole}, r, owns) is None
                   for r in range(2))


def test_float32_rounding_between_one_device_and_the_ranks_is_agreement():
    from frontends.traced.confirm import _first_difference

    want = np.array([1000.0, -3.5], dtype=np.float32)
    assert _first_difference(want, want * np.float32(1 + 3e-7), ()) is None
    assert _first_difference(want, want + np.float32(0.5), ()) == (0,)


def test_a_run_whose_answer_says_raised_is_recognised_so_its_peers_are_stopped():
    import subprocess
    import sys
    import threading

    from frontends.traced.confirm_child import _Run

    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait()
    status = {}
    for answer in ({"status": "raised", "error": "ValueError: x"}, {"status": "ok"}):
        run = _Run(2, 0, b"")
        run.process, run.data = finished, pack(answer)
        run.readers = [threading.Thread(target=lambda: None) for _ in range(3)]
        for thread in run.readers:
            thread.start()
        status[answer["status"]] = run.raised()
    assert status == {"raised": True, "ok": False}
