"""A reference function named by convention (``ref_program``) that the file never calls (it only
benchmarks the kernel) and whose text the spec translator cannot read (a guard raising an error,
``einsum``): it is bound to the kernel's inputs in order, as TileLang's profiler calls a reference,
and re-run by torch at the reduced sizes.

The right kernel is verified, its one-line mutant (K's tile offset with the other tile size) a
confirmed violation at the mutated line; a reference whose binding would be a guess (a default
argument, parameters named in another order than the kernel's inputs) stays unsupported with the
translator's reason.  A reference handed to ``profiler.assert_allclose`` after ``profiler.run_once()``
(TileLang's: the kernel called once on the profiler's inputs, its outputs returned, which the file
asserts are not None) is the spec, the run going on past that assertion.  A kernel left with no
spec says why: launched only inside a benchmarked function, written in place (the reference takes
the tensor the kernel writes), or the file's run ended before what may be its reference.  A factory
nested in a ``@tilelang.jit`` one (``return kernel_func(block_M)``) builds part of that kernel and is
not recorded as a kernel of its own.
"""
from __future__ import annotations

import pytest
from lifter_helpers import lift_files, line_of

SCORES = 'import torch\nimport tilelang\nimport tilelang.language as T\n\n\n@tilelang.jit(out_idx=[2])\ndef scores(M, N, D, block_M=64, block_N=32):\n    @T.prim_func\n    def main(Q: T.Tensor((M, D), T.float16), K: T.Tensor((N, D), T.float16), S: T.Tensor((M, N), T.float32)):\n        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):\n            Q_shared = T.alloc_shared((block_M, D), T.float16)\n            K_shared = T.alloc_shared((block_N, D), T.float16)\n            acc = T.alloc_fragment((block_M, block_N), T.float32)\n            T.copy(Q[by * block_M, 0], Q_shared)\n            T.copy(K[bx * block_N, 0], K_shared)\n            T.clear(acc)\n            T.gemm(Q_shared, K_shared, acc, transpose_B=True)\n            T.copy(acc, S[by * block_M, bx * block_N])\n\n    return main\n\n\ndef ref_program(q, k):\n    if q.dim() != 2:\n        raise ValueError("expected 2-D queries")\n    return torch.einsum("md,nd->mn", q.float(), k.float())\n\n\nkernel = scores(256, 128, 64)\nprofiler = kernel.get_profiler(tensor_supply_type=tilelang.TensorSupplyType.Randn)\nprint(profiler.do_bench(warmup=10))\n'

# kernels left with no spec, and the message says why
BENCHMARKED_ONLY = '''
import torch
import tilelang
import tilelang.language as T
from tilelang.profiler import do_bench


@tilelang.jit(out_idx=[1])
def shift_rows(M, N, block_M=32, dtype=T.float32):
    @T.prim_func
    def main(X: T.Tensor((M + 1, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            for i, j in T.Parallel(block_M, N):
                Y[bx * block_M + i, j] = X[bx * block_M + i + 1, j]

    return main


x = torch.randn(257, 8, device="cuda")
kernel = shift_rows(256, 8)
print(do_bench(lambda: kernel(x)))
'''

IN_PLACE = '''
import torch
import tilelang
import tilelang.language as T


@tilelang.jit
def copy_head(M, N, dtype=T.float32):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(M, threads=128) as bx:
            for j in T.Parallel(N):
                if j == 0:
                    Y[bx, j] = X[bx, j]

    return main


def ref_copy_head(x, y):
    out = y.clone()
    out[:, 0] = x[:, 0]
    return out


x = torch.randn(64, 8, device="cuda")
y = torch.randn(64, 8, device="cuda")
expected = ref_copy_head(x, y)
copy_head(64, 8)(x, y)
torch.testing.assert_close(y, expected)
'''

RUN_ENDED = '''
import torch
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[2])
def shifted_sum(M, N, block_M=32, dtype=T.float32):
    @T.prim_func
    def main(X: T.Tensor((M + 1, N), dtype), W: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            for i, j in T.Parallel(block_M, N):
                Y[bx * block_M + i, j] = X[bx * block_M + i + 1, j] + W[bx * block_M + i, j]

    return main


def contiguous(t):
    return t if t.stride(-1) == 1 else t.contiguous()


x = contiguous(torch.randn(257, 8, device="cuda"))
w = torch.randn(256, 8, device="cuda")
y = shifted_sum(256, 8)(x, w)
raise RuntimeError("the reference needs a GPU")
'''

# a factory nested in a @tilelang.jit one builds part of that kernel: no kernel of its own
NESTED_FACTORY = '''
import torch
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def triple(M, N, dtype=T.float32):
    def kernel_func(block_M):
        @T.prim_func
        def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
            with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
                for i, j in T.Parallel(block_M, N):
                    Y[bx * block_M + i, j] = X[bx * block_M + i, j] * 3.0

        return main

    return kernel_func(64)


x = torch.randn(256, 8, device="cuda")
torch.testing.assert_close(triple(256, 8)(x), x * 3.0)
'''

WRONG = "T.copy(K[bx * block_M, 0], K_shared)"
# the reference handed to the profiler after ``profiler.run_once()``, which the file asserts is not None
RUN_ONCE = SCORES.replace("def ref_program(q, k):", "def scores_of(q, k):").replace(
    "print(profiler.do_bench(warmup=10))",
    "out = profiler.run_once()\nassert out is not None\nprofiler.assert_allclose(scores_of, rtol=1e-2, atol=1e-2)")
FILES = {
    "scores.py": SCORES,
    "scores_wrong_offset.py": SCORES.replace("T.copy(K[bx * block_N, 0], K_shared)", WRONG),
    "scores_default_argument.py": SCORES.replace("def ref_program(q, k):", "def ref_program(q, k=None):"),
    "scores_other_names.py": SCORES.replace("def ref_program(q, k):", "def ref_program(k, q):"),
    "scores_run_once.py": RUN_ONCE,
    "scores_run_once_wrong_offset.py": RUN_ONCE.replace("T.copy(K[bx * block_N, 0], K_shared)", WRONG),
    "benchmarked_only.py": BENCHMARKED_ONLY,
    "in_place.py": IN_PLACE,
    "run_ended.py": RUN_ENDED,
    "nested_factory.py": NESTED_FACTORY,
}


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    pytest.importorskip("tilelang")
    folder = tmp_path_factory.mktemp("named_reference")
    return folder, lift_files(folder, FILES)


def _messages(report) -> list[str]:
    return [d.message for d in report.diagnostics]


@pytest.mark.tilelang
def test_a_reference_the_file_never_calls_is_re_run_and_verifies_the_right_kernel(reports):
    report = reports[1]["scores.py"]
    assert report.verdict == "verified", _messages(report)
    proven = " ".join(report.proven)
    assert "S = ref_program(Q, K)" in proven
    assert "not called by the file: bound to the kernel's inputs in order" in proven


@pytest.mark.tilelang
def test_the_wrong_tile_offset_is_a_confirmed_violation_at_its_line(reports):
    folder, found = reports
    report = found["scores_wrong_offset.py"]
    assert report.verdict == "violations", _messages(report)
    spec = [d for d in report.diagnostics if d.check == "spec"]
    assert spec and spec[0].counterexample and spec[0].counterexample.confirmed
    assert spec[0].line == line_of(str(folder / "scores_wrong_offset.py"), WRONG)


@pytest.mark.tilelang
def test_a_reference_with_a_default_argument_is_not_bound_by_guess(reports):
    report = reports[1]["scores_default_argument.py"]
    assert report.verdict == "unsupported", _messages(report)
    assert any("ref_program is not translatable" in m for m in _messages(report))
    assert not any("ref_program" in p for p in report.proven)


@pytest.mark.tilelang
def test_a_reference_whose_parameters_are_not_the_kernels_inputs_by_name_is_not_bound(reports):
    report = reports[1]["scores_other_names.py"]
    assert report.verdict == "unsupported", _messages(report)
    assert not any("ref_program" in p for p in report.proven)


@pytest.mark.tilelang
def test_the_reference_handed_to_the_profiler_after_run_once_verifies_the_right_kernel(reports):
    # run_once returns the kernel's outputs on the profiler's inputs: the file's run reaches its check
    report = reports[1]["scores_run_once.py"]
    assert report.verdict == "verified", _messages(report)
    assert "S = scores_of(Q, K)" in " ".join(report.proven)


@pytest.mark.tilelang
def test_the_wrong_tile_offset_after_run_once_is_a_confirmed_violation_at_its_line(reports):
    folder, found = reports
    report = found["scores_run_once_wrong_offset.py"]
    assert report.verdict == "violations", _messages(report)
    spec = [d for d in report.diagnostics if d.check == "spec"]
    assert spec and spec[0].counterexample and spec[0].counterexample.confirmed
    assert spec[0].line == line_of(str(folder / "scores_run_once_wrong_offset.py"), WRONG)


@pytest.mark.tilelang
def test_a_kernel_launched_only_inside_a_benchmark_has_no_spec_and_the_message_says_so(reports):
    report = reports[1]["benchmarked_only.py"]
    assert report.verdict == "unsupported", _messages(report)
    assert any("the file's run launches it nowhere" in m for m in _messages(report)), _messages(report)


@pytest.mark.tilelang
def test_a_reference_given_the_tensor_the_kernel_writes_in_place_is_refused_and_said_so(reports):
    report = reports[1]["in_place.py"]
    assert report.verdict == "unsupported", _messages(report)
    assert any("writes Y, which the file passes in" in m and "in place" in m for m in _messages(report)), \
        _messages(report)


@pytest.mark.tilelang
def test_no_spec_after_a_run_that_ended_early_names_the_error_that_ended_it(reports):
    report = reports[1]["run_ended.py"]
    assert report.verdict == "unsupported", _messages(report)
    assert any("contiguous is called with only some of the kernel's inputs" in m
               and "the file's run ended before its end, with RuntimeError" in m for m in _messages(report)), \
        _messages(report)


@pytest.mark.tilelang
def test_a_factory_nested_in_a_jit_factory_is_no_kernel_of_its_own(reports):
    report = reports[1]["nested_factory.py"]
    assert report.verdict == "verified", _messages(report)
    assert report.proven and all(p.startswith("triple: ") for p in report.proven), report.proven
