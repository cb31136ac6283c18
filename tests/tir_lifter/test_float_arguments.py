"""A kernel built with a float the file computed from the real sizes: a difference from a
reference that recomputes it from the reduced shapes is not the kernel's."""
from __future__ import annotations

from tir_lifter.capture import Instance
from tir_lifter.elaborate import _unattributable_spec_differences
from tir_lifter.reference import Argument, TracedSpec
from verifier.report import ERROR, Diagnostic, Report


def attention(batch, heads, dim, softmax_scale, block_N=64):  # the factory the file calls
    raise NotImplementedError


def _report() -> Report:
    report = Report(file="k.py", mesh={})
    report.add(Diagnostic("spec", ERROR, "kernel does not compute O = ref(Q, K, V): O[0] is 1 but the spec gives 2", 3))
    return report


def test_a_float_the_reference_does_not_receive_makes_a_difference_unattributable():
    instance = Instance("attention", 3, args=(2, 8, 64, 0.125), factory=attention)
    report = _report()
    _unattributable_spec_differences(instance, TracedSpec("O = ref(Q, K, V)", ("Q", "K", "V"), ("O",), "ref"), report)
    assert report.verdict == "unsupported"
    assert "softmax_scale=0.125" in report.diagnostics[0].message


def test_a_float_the_reference_also_receives_keeps_the_violation():
    instance = Instance("attention", 3, args=(2, 8, 64, 0.125), factory=attention)
    spec = TracedSpec("O = ref(Q, K, V, 0.125)", ("Q", "K", "V"), ("O",), "ref",
                      arguments=(Argument("scale", None, 0.125),))
    report = _report()
    _unattributable_spec_differences(instance, spec, report)
    assert report.verdict == "violations"


def test_without_float_arguments_the_violation_stands():
    report = _report()
    _unattributable_spec_differences(Instance("attention", 3, args=(2, 8, 64), factory=attention),
                                     TracedSpec("O = ref(Q, K, V)", ("Q", "K", "V"), ("O",), "ref"), report)
    assert report.verdict == "violations"
