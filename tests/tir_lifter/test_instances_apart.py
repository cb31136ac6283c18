"""Instances of one kernel kept apart, and kernels launched by autograd's backward.

A factory built twice with arguments that are no size (a flag, a scale) builds two kernels: each
is checked, against the reference the file compares its own launch with. Before, the instances
counted as one reduced instance (only sizes and tiles were compared), and the references of all
launches were tried on each: the right file below was a false violation (the doubling instance
checked against the copy's reference), and a wrong second instance could go unchecked. An
instance given its reference through its own profiler (``profiler.assert_allclose(ref)``) is
checked against that one only.

A kernel launched in the backward of a ``torch.autograd.Function`` computes values the file
compares only through the gradients autograd returns (``x.grad``): composing kernels along
autograd is not modelled, so such a launch is ``unsupported`` with that reason, never checked
against a forward reference (the forward kernel reused as a wrong backward was verified).
"""
from __future__ import annotations

import pytest
from lifter_helpers import lift_files

FLAGS = 'import torch\nimport tilelang\nimport tilelang.language as T\n\n\n@tilelang.jit(out_idx=[1])\ndef copy_or_double(M, N, double, block_M=32):\n    @T.prim_func\n    def main(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32)):\n        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:\n            for i, j in T.Parallel(block_M, N):\n                if double:\n                    Y[bx * block_M + i, j] = X[bx * block_M + i, j] + X[bx * block_M + i, j]\n                else:\n                    Y[bx * block_M + i, j] = X[bx * block_M + i, j]\n\n    return main\n\n\ndef ref_double(x):\n    return x * 2\n\n\ndef ref_copy(x):\n    return x.clone()\n\n\nx = torch.randn(256, 64, device="cuda")\nz = torch.randn(256, 64, device="cuda")\ntorch.testing.assert_close(copy_or_double(256, 64, True)(x), ref_double(x))\ntorch.testing.assert_close(copy_or_double(256, 64, False)(z), ref_copy(z))\n'
SCALE = 'import torch\nimport tilelang\nimport tilelang.language as T\n\n\n@tilelang.jit(out_idx=[1])\ndef scale(M, N, factor, block_M=32):\n    @T.prim_func\n    def main(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32)):\n        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:\n            for i, j in T.Parallel(block_M, N):\n                Y[bx * block_M + i, j] = X[bx * block_M + i, j] * factor\n\n    return main\n\n\nclass _Scale(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n        M, N = x.shape\n        return scale(M, N, 3.0)(x)\n\n    @staticmethod\n    def backward(ctx, dy):\n        M, N = dy.shape\n        return scale(M, N, 3.0)(dy.contiguous())\n\n\ndef ref_program(x):\n    return x * 3.0\n\n\nx = torch.randn(256, 64, device="cuda", requires_grad=True)\ndy = torch.randn(256, 64, device="cuda")\ny = _Scale.apply(x)\ny.backward(dy)\ndx, x.grad = x.grad.clone(), None\ny_ref = ref_program(x)\ny_ref.backward(dy)\ntorch.testing.assert_close(y, y_ref)\ntorch.testing.assert_close(dx, x.grad)\n'
EAGER_SCALE = 'import torch\nimport tilelang\nimport tilelang.language as T\n\n\n@tilelang.jit\ndef scale(X, block_M, factor):\n    M, N = T.const("M, N")\n    X: T.Tensor((M, N), T.float32)\n    Y = T.empty((M, N), T.float32)\n\n    with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:\n        for i, j in T.Parallel(block_M, N):\n            if bx * block_M + i < M:\n                Y[bx * block_M + i, j] = X[bx * block_M + i, j] * factor\n    return Y\n\n\nclass _Scale(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n        return scale(x, 32, 3.0)\n\n    @staticmethod\n    def backward(ctx, dy):\n        return scale(dy.contiguous(), 32, 2.0)\n\n\ndef ref_program(x):\n    return x * 3.0\n\n\nx = torch.randn(256, 64, device="cuda", requires_grad=True)\ndy = torch.randn(256, 64, device="cuda")\ny = _Scale.apply(x)\ny.backward(dy)\ndx, x.grad = x.grad.clone(), None\ny_ref = ref_program(x)\ny_ref.backward(dy)\ntorch.testing.assert_close(y, y_ref)\ntorch.testing.assert_close(dx, x.grad)\n'
FILES = {
    "flags.py": FLAGS,
    "flags_wrong.py": FLAGS.replace("copy_or_double(256, 64, False)(z)", "copy_or_double(256, 64, True)(z)"),
    "flags_profiler.py": FLAGS.split("x = torch.randn")[0] + (
        "for double, ref in ((True, ref_double), (False, ref_copy)):\n"
        "    copy_or_double(256, 64, double).get_profiler().assert_allclose(ref, rtol=0.01, atol=0.01)\n"),
    "scale_autograd.py": SCALE,
    "scale_autograd_wrong_backward.py": SCALE.replace("return scale(M, N, 3.0)(dy.contiguous())",
                                                      "return scale(M, N, 2.0)(dy.contiguous())"),
    "eager_scale_autograd_wrong_backward.py": EAGER_SCALE,
}


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    pytest.importorskip("tilelang")
    return lift_files(tmp_path_factory.mktemp("instances_apart"), FILES)


def _messages(report) -> list[str]:
    return [d.message for d in report.diagnostics]


@pytest.mark.tilelang
def test_two_instances_differing_in_a_flag_are_each_checked_against_their_own_reference(reports):
    report = reports["flags.py"]
    assert report.verdict == "verified", _messages(report)
    proven = " ".join(report.proven)
    assert "Y = ref_double(X)" in proven and "Y = ref_copy(X)" in proven


@pytest.mark.tilelang
def test_each_instance_is_checked_against_the_reference_its_own_profiler_was_given(reports):
    report = reports["flags_profiler.py"]
    assert report.verdict == "verified", _messages(report)
    proven = " ".join(report.proven)
    assert "Y = ref_double(X)" in proven and "Y = ref_copy(X)" in proven


@pytest.mark.tilelang
def test_the_second_instance_built_with_the_wrong_flag_is_a_confirmed_violation(reports):
    report = reports["flags_wrong.py"]
    assert report.verdict == "violations", _messages(report)
    spec = [d for d in report.diagnostics if d.check == "spec"]
    assert spec and "ref_copy" in spec[0].message and spec[0].counterexample.confirmed


@pytest.mark.tilelang
@pytest.mark.parametrize("name", ["scale_autograd.py", "scale_autograd_wrong_backward.py",
                                  "eager_scale_autograd_wrong_backward.py"])
def test_a_kernel_launched_by_autograds_backward_is_unsupported_never_verified(reports, name):
    report = reports[name]
    assert report.verdict == "unsupported", _messages(report)
    assert any("launched in the backward of _ScaleBackward (by autograd)" in m for m in _messages(report))
