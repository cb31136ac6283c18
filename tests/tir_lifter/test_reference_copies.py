"""Specs the file gives a kernel in ways the lifter once missed:

- an expected value for only some of the kernel's outputs (an attention's output, not its
  ``lse``): the others are said not compared, provided each compared output is compared with
  exactly one value;
- a reference called with unchanged copies of the tensors the kernel reads (``q_ref`` and
  ``q_tl`` both ``query.detach().clone()``, the autograd tests' pattern): bound to the kernel's
  inputs, and said so; a copy changed in place is not;
- an eager kernel whose ``T.empty`` outputs have a run-time size (``T.dynamic``): the launch
  returns them with the size of the tensors it was given, in the order the kernel returns them.

Each right kernel is verified, its one-line mutant a confirmed violation naming the mutated line,
and each refused case is unsupported with its reason.
"""
from __future__ import annotations

import pytest
from lifter_helpers import lift_files, line_of

torch = pytest.importorskip("torch")

from tir_lifter.capture import Capture, Derivation  # noqa: E402
from tir_lifter.reference import same_value_inputs  # noqa: E402

HEAD = '''
import torch

import tilelang
import tilelang.language as T


@tilelang.jit
def shift_rows(X, block_M, dtype=T.float32):
    M, N = T.const("M, N")
    X: T.Tensor((M, N), dtype)
    Y = T.empty((M, N), dtype)
    R = T.empty((M,), dtype)
    with T.Kernel(T.ceildiv(M, block_M), threads=128) as bm:
        tile = T.alloc_fragment((block_M, N), dtype)
        row_max = T.alloc_fragment((block_M,), dtype)
        T.copy(X[bm * block_M, 0], tile)
        T.reduce_max(tile, row_max, dim=1, clear=True)
        T.copy(row_max, R[bm * block_M])
        for i, j in T.Parallel(block_M, N):
            tile[i, j] = tile[i, j] - row_max[i]
        T.copy(tile, Y[bm * block_M, 0])
    return Y, R


'''

PARTIAL = HEAD + '''def main(M=96, N=48):
    x = torch.randn(M, N, device="cuda")
    y, r = shift_rows(x, 32)
    torch.testing.assert_close(y, x - x.max(dim=1, keepdim=True).values)


main()
'''

COPIES = HEAD + '''def shifted(x):
    return x - x.max(dim=1, keepdim=True).values, x.max(dim=1).values


def main(M=96, N=48):
    x = torch.randn(M, N, device="cuda")
    x_kernel = x.detach().clone()
    x_check = x.detach().clone().requires_grad_(True)
    y, r = shift_rows(x_kernel, 32)
    y_ref, r_ref = shifted(x_check)
    torch.testing.assert_close(y, y_ref)
    torch.testing.assert_close(r, r_ref)


main()
'''

DYNAMIC = COPIES.replace('M, N = T.const("M, N")', 'M = T.dynamic("M")\n    N = T.const("N")').replace(
    "    x_kernel = x.detach().clone()\n    x_check = x.detach().clone().requires_grad_(True)\n", "").replace(
    "shift_rows(x_kernel, 32)", "shift_rows(x, 32)").replace("shifted(x_check)", "shifted(x)")

WHOLE_SLICE = PARTIAL.replace("torch.testing.assert_close(y, x - x.max(dim=1, keepdim=True).values)",
                              "torch.testing.assert_close(y, (x - x.max(dim=1, keepdim=True).values)[..., :M, :N])")

COMBINED = HEAD + '''def same(x):
    return x.clone()


def main(M=96, N=48):
    x = torch.randn(M, N, device="cuda")
    y, r = shift_rows(x, 32)
    torch.testing.assert_close(y + r[:, None], same(x))


main()
'''

STOPPED = '''
import torch

import tilelang
import tilelang.language as T


@tilelang.jit
def rotate_rows(X, block_M):
    M, N = T.const("M, N")
    X: T.Tensor((M, N), T.float32)
    Y = T.empty((M, N), T.float32)
    with T.Kernel(T.ceildiv(M, block_M), threads=128) as bm:
        for i, j in T.Parallel(block_M, N):
            Y[bm * block_M + i, j] = X[bm * block_M + i, (j + 1) % N]
    return Y


def rolled(x):
    return torch.roll(x, -1, dims=1)


x = torch.randn(96, 48, device="cuda")
y = rotate_rows(x, 32)
nonzero = torch.nonzero(y)  # the run's stand-in holds no values for this: the run stops here
torch.testing.assert_close(y, rolled(x))
'''

SUBTRACT = "tile[i, j] = tile[i, j] - row_max[i]"
FILES = {
    "partial.py": PARTIAL,
    "partial_adds.py": PARTIAL.replace(SUBTRACT, "tile[i, j] = tile[i, j] + row_max[i]"),
    "partial_twice.py": PARTIAL.replace(
        "    torch.testing.assert_close(y, x - x.max(dim=1, keepdim=True).values)\n",
        "    torch.testing.assert_close(y, x - x.max(dim=1, keepdim=True).values)\n"
        "    torch.testing.assert_close(y, x - x.amax(dim=1, keepdim=True))\n"),
    "copies.py": COPIES,
    "copies_adds.py": COPIES.replace(SUBTRACT, "tile[i, j] = tile[i, j] + row_max[i]"),
    "copy_changed.py": COPIES.replace("    x_check = x.detach().clone().requires_grad_(True)\n",
                                      "    x_check = x.detach().clone()\n    x_check.mul_(2)\n"),
    "dynamic.py": DYNAMIC,
    "whole_slice.py": WHOLE_SLICE,
    "whole_slice_adds.py": WHOLE_SLICE.replace(SUBTRACT, "tile[i, j] = tile[i, j] + row_max[i]"),
    "ones_sized.py": PARTIAL.replace("x - x.max(dim=1, keepdim=True).values)",
                                     "x - x.max(dim=1, keepdim=True).values * torch.ones(M, N, device=\"cuda\"))"),
    "combined.py": COMBINED,
    "stopped.py": STOPPED,
}


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    pytest.importorskip("tilelang")
    folder = tmp_path_factory.mktemp("reference_copies")
    return folder, lift_files(folder, FILES)


def _messages(report) -> list[str]:
    return [d.message for d in report.diagnostics]


def _confirmed_violation_at(folder, name, report, needle) -> None:
    assert report.verdict == "violations", _messages(report)
    spec = [d for d in report.diagnostics if d.check == "spec"]
    assert spec and spec[0].counterexample and spec[0].counterexample.confirmed
    line = line_of(str(folder / name), needle)
    assert spec[0].line == line or f" {line}," in spec[0].message or f" {line} " in spec[0].message, spec[0]


@pytest.mark.tilelang
def test_an_output_the_file_compares_with_no_value_is_said_not_compared(reports):
    report = reports[1]["partial.py"]
    assert report.verdict == "verified", _messages(report)
    proven = " ".join(report.proven)
    assert "kernel computes Y = the file's own expected value" in proven
    assert "R not compared (the file compares no value with it; it compares Y)" in proven


@pytest.mark.tilelang
def test_a_wrong_compared_output_is_a_confirmed_violation(reports):
    folder, found = reports
    _confirmed_violation_at(folder, "partial_adds.py", found["partial_adds.py"], "tile[i, j] = tile[i, j] + row_max")


@pytest.mark.tilelang
def test_an_output_compared_with_two_values_while_another_is_not_compared_is_refused(reports):
    report = reports[1]["partial_twice.py"]
    assert report.verdict == "unsupported", _messages(report)
    assert any("compares Y but not R" in m and "Y with more than one value" in m for m in _messages(report))


@pytest.mark.tilelang
def test_a_reference_given_copies_of_the_kernels_inputs_is_its_spec_and_says_so(reports):
    report = reports[1]["copies.py"]
    assert report.verdict == "verified", _messages(report)
    proven = " ".join(report.proven)
    assert "kernel computes Y, R = shifted(X)" in proven
    assert "x given the kernel's input, of which the file passes an unchanged copy" in proven


@pytest.mark.tilelang
def test_a_wrong_kernel_checked_against_copies_is_a_confirmed_violation(reports):
    folder, found = reports
    _confirmed_violation_at(folder, "copies_adds.py", found["copies_adds.py"], "tile[i, j] = tile[i, j] + row_max")


@pytest.mark.tilelang
def test_a_copy_changed_in_place_is_not_the_kernels_input(reports):
    report = reports[1]["copy_changed.py"]
    assert report.verdict == "unsupported", _messages(report)
    assert not any("shifted" in p for p in report.proven)


@pytest.mark.tilelang
def test_an_eager_kernel_with_a_run_time_size_returns_its_outputs_in_order(reports):
    report = reports[1]["dynamic.py"]
    assert report.verdict == "verified", _messages(report)
    assert "kernel computes Y, R = shifted(X)" in " ".join(report.proven)


def test_a_tensor_two_inputs_are_copies_of_binds_neither():
    capture = Capture()
    source = torch.zeros(3)
    k, v, other = source.clone(), source.clone(), torch.zeros(3)
    capture.derivations.update({id(k): Derivation(torch.Tensor.clone, (source,), {}),
                                id(v): Derivation(torch.Tensor.clone, (source,), {})})
    bound = same_value_inputs({"K": k, "V": v, "W": other}, ["K", "V", "W"], capture)
    assert bound == {id(k): "K", id(v): "V", id(other): "W"}
    capture.derivations.pop(id(v))
    assert same_value_inputs({"K": k, "W": other}, ["K", "W"], capture)[id(source)] == "K"
    capture.derivations[id(source)] = Derivation(None, (), {})  # changed in place: no longer the copy's value
    assert id(source) not in same_value_inputs({"K": k, "W": other}, ["K", "W"], capture)


@pytest.mark.tilelang
def test_a_slice_keeping_every_element_of_an_expected_value_is_replayed_whole(reports):
    report = reports[1]["whole_slice.py"]
    assert report.verdict == "verified", _messages(report)
    assert "kernel computes Y = the file's own expected value" in " ".join(report.proven)


@pytest.mark.tilelang
def test_a_wrong_kernel_against_a_whole_slice_is_a_confirmed_violation(reports):
    folder, found = reports
    _confirmed_violation_at(folder, "whole_slice_adds.py", found["whole_slice_adds.py"],
                            "tile[i, j] = tile[i, j] + row_max")


@pytest.mark.tilelang
def test_a_factory_call_with_real_sizes_is_refused_naming_it(reports):
    report = reports[1]["ones_sized.py"]
    assert report.verdict == "unsupported", _messages(report)
    assert any("from ones(96, 48)" in m and "48, 96, real sizes that the reduced sizes change" in m
               for m in _messages(report)), _messages(report)


@pytest.mark.tilelang
def test_a_value_computed_from_several_outputs_together_is_no_spec(reports):
    report = reports[1]["combined.py"]
    assert report.verdict == "unsupported", _messages(report)
    assert any("computes from the kernel's outputs R, Y together" in m for m in _messages(report)), _messages(report)


def test_a_function_compared_with_a_view_of_the_outputs_but_called_with_other_tensors_is_named():
    from tir_lifter.capture import Comparison, Instance, Launch, ReferenceCall
    from tir_lifter.reference import references_of_other_tensors

    def pipeline_ref(x):  # the reference of two kernels together: x -> Y (first kernel) -> Z (this one)
        return x * 2 + 1
    x, y, z = torch.zeros(4, 3), torch.zeros(4, 3), torch.zeros(4, 3)
    instance = Instance("add_one", 1)
    capture = Capture()
    capture.launches.append(Launch(instance, named=(("Y", y), ("Z", z))))
    capture.references.append(ReferenceCall(pipeline_ref, (("x", x),)))
    expected = pipeline_ref(x).view(-1)
    capture.results[0] = expected
    flat = z.view(-1)
    capture.derivations[id(flat)] = Derivation(torch.Tensor.view, (z, -1), {})
    capture.comparisons.append(Comparison(flat, expected, 9))
    assert references_of_other_tensors([instance], ["Y", "Z"], ["Z"], capture) == ["pipeline_ref"]
    capture.comparisons.clear()  # compared with nothing of this kernel: not named
    assert references_of_other_tensors([instance], ["Y", "Z"], ["Z"], capture) == []


@pytest.mark.tilelang
def test_a_kernel_without_spec_says_the_run_stopped_before_the_files_checks(reports):
    report = reports[1]["stopped.py"]
    assert report.verdict == "unsupported", _messages(report)
    assert any("no spec for kernel rotate_rows" in m and "the file's run ended before its end, with "
               "NotImplementedError" in m and "at line 25" in m for m in _messages(report)), _messages(report)
