"""What a kernel file asks of the GPU during its run, answered by the lifter's stand-in (capture.py).

* ``T.gemm(..., k_pack=2)``: the AMD examples were written for a TileLang whose ``T.gemm`` took
  ``k_pack`` (MFMA packing of K steps); the installed one takes it in its ROCm dialect only, as
  an annotation of the same ``tl.tileop.gemm`` that only the MFMA/WMMA lowering reads. Such a
  kernel stopped at "gemm() got an unexpected keyword argument 'k_pack'"; it is now checked.
* ``torch.cuda.Event`` timing, ``torch.cuda.device(i)`` and streams run (CPU torch refuses them: "Tried
  to instantiate dummy base class Event", "PyTorch was compiled without CUDA support").
* A CUDA C++ extension (``torch.utils.cpp_extension.load`` of ``.cu`` sources) and a triton kernel
  stop the run with that reason, not with the toolkit's or driver's message.
* An eager kernel compiled ahead with a ``T.const`` size (``kernel = f.compile(cols=64)``) and
  launched with tensors returns its ``T.empty`` output, sized by the launch, as an eager call does
  (it returned None: the file's comparison was not recorded, and the kernel was checked against a
  spec inferred from its own tile ops, so a wrong factor was verified).
* A file that needs the values of a large tensor before it asks for its kernel (``nonzero`` of a
  mask of it) stopped on ``meta`` without any kernel; it is run a second time with real values
  for its ``cuda`` tensors (up to ``_MetaDevice.REAL_DATA`` elements each) and checked. A tensor a
  kernel was launched with has no values after the launch (the stand-in kernel writes nothing):
  later ops see it on ``meta``, as in the first run, never with its values from before.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from lifter_helpers import lift_files

KPACK_RIGHT = '''import torch
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[2])
def matmul(M, N, K, block_M=64, block_N=64, block_K=32, k_pack=2):
    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), T.float16)
            B_shared = T.alloc_shared((block_K, block_N), T.float16)
            C_local = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local, k_pack=k_pack)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


a = torch.randn(256, 128, device="cuda", dtype=torch.float16)
b = torch.randn(128, 256, device="cuda", dtype=torch.float16)
torch.testing.assert_close(matmul(256, 256, 128)(a, b), (a.float() @ b.float()))
'''
KPACK_WRONG = KPACK_RIGHT.replace("T.copy(B[k * block_K, bx * block_N], B_shared)",
                                  "T.copy(B[k * block_K, by * block_N], B_shared)")
WRONG_LINE = 17

NEEDS_DATA = '''import torch
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def double(M, N, block_M=32):
    @T.prim_func
    def main(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            for i, j in T.Parallel(block_M, N):
                Y[bx * block_M + i, j] = X[bx * block_M + i, j] * 2

    return main


x = torch.randn(512, 256, device="cuda")
assert torch.nonzero(torch.isnan(x)).numel() == 0
torch.testing.assert_close(double(512, 256)(x), x * 2)
'''
NEEDS_DATA_WRONG = NEEDS_DATA.replace("X[bx * block_M + i, j] * 2", "X[bx * block_M + i, j] * 3")

COMPILED_EAGER = '''import torch
import tilelang
import tilelang.language as T


@tilelang.jit
def double_rows(X, block_M: int = 32):
    rows = T.dynamic("rows")
    cols = T.const("cols")
    X: T.Tensor([rows, cols], T.float32)
    Y = T.empty([rows, cols], T.float32)
    with T.Kernel(T.ceildiv(rows, block_M), threads=128) as bx:
        for i, j in T.Parallel(block_M, cols):
            Y[bx * block_M + i, j] = X[bx * block_M + i, j] * 2
    return Y


kernel = double_rows.compile(cols=64)
x = torch.randn(256, 64, device="cuda")
torch.testing.assert_close(kernel(x), x * 2)
'''
COMPILED_EAGER_WRONG = COMPILED_EAGER.replace("X[bx * block_M + i, j] * 2", "X[bx * block_M + i, j] * 3")

RUNS = {
    "event.py": "import torch\nstart = torch.cuda.Event(enable_timing=True)\nend = torch.cuda.Event(enable_timing=True)\n"
                "start.record()\nx = torch.ones(4, device='cuda') * 2\nend.record()\ntorch.cuda.synchronize()\n"
                "assert start.elapsed_time(end) > 0\n",
    "device.py": "import torch\nx = torch.ones(4, device='cuda')\nwith torch.cuda.device(x.device.index):\n"
                 "    y = x + 1\n",
    "stream.py": "import torch\nside = torch.cuda.Stream()\nwith torch.cuda.stream(side):\n"
                 "    x = torch.ones(4, device='cuda')\nside.synchronize()\n"
                 "torch.cuda.current_stream().wait_stream(side)\n",
    "extension.py": "from torch.utils.cpp_extension import load\n\nops = load(name='scale_rows', "
                    "sources=['scale_rows.cpp', 'scale_rows.cu'])\n",
    "triton_kernel.py": "import torch\nimport triton\nimport triton.language as tl\n\n\n@triton.jit\n"
                        "def double(x_ptr, n: tl.constexpr):\n    offsets = tl.arange(0, n)\n"
                        "    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets) * 2)\n\n\n"
                        "double[(1,)](torch.ones(4, device='cuda'), 4)\n",
}


@pytest.fixture(scope="module")
def kpack_reports(tmp_path_factory):
    pytest.importorskip("tilelang")
    return lift_files(tmp_path_factory.mktemp("k_pack"), {"right.py": KPACK_RIGHT, "wrong.py": KPACK_WRONG,
                                                          "data.py": NEEDS_DATA, "data_wrong.py": NEEDS_DATA_WRONG,
                                                          "eager.py": COMPILED_EAGER,
                                                          "eager_wrong.py": COMPILED_EAGER_WRONG})


@pytest.fixture(scope="module")
def stopped_by(tmp_path_factory):
    """How the run of each file in ``RUNS`` ended (one child: the run patches torch)."""
    pytest.importorskip("tilelang")
    from tir_lifter.elaborate_run import child_env
    folder = tmp_path_factory.mktemp("runs")
    for name, source in RUNS.items():
        (folder / name).write_text(source)
    code = ("import json, sys; from tir_lifter.capture import run_file; "
            "print(json.dumps({p.rsplit('/', 1)[1]: run_file(p, 20.0).stopped_by for p in sys.argv[1:]}))")
    done = subprocess.run([sys.executable, "-c", code, *(str(folder / name) for name in RUNS)], env=child_env(),
                          capture_output=True, text=True, timeout=300, cwd=folder)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.tilelang
def test_a_gemm_with_k_pack_is_checked_as_the_same_product(kpack_reports):
    report = kpack_reports["right.py"]
    assert report.verdict == "verified", [d.message for d in report.diagnostics]
    assert any("kernel computes C = the file's own expected value" in p for p in report.proven)


@pytest.mark.tilelang
def test_a_wrong_tile_read_beside_a_gemm_with_k_pack_is_a_violation_at_its_line(kpack_reports):
    report = kpack_reports["wrong.py"]
    assert report.verdict == "violations", [d.message for d in report.diagnostics]
    assert any(d.check == "spec" and d.line == WRONG_LINE for d in report.diagnostics), \
        [(d.check, d.line) for d in report.diagnostics]


@pytest.mark.tilelang
def test_cuda_event_timing_runs_on_the_stand_in(stopped_by):
    assert stopped_by["event.py"] == "end of file"


@pytest.mark.tilelang
def test_selecting_the_stand_in_device_runs(stopped_by):
    assert stopped_by["device.py"] == "end of file"


@pytest.mark.tilelang
def test_streams_of_the_stand_in_run(stopped_by):
    assert stopped_by["stream.py"] == "end of file"


@pytest.mark.tilelang
def test_a_cuda_extension_stops_the_run_with_that_reason(stopped_by):
    assert stopped_by["extension.py"].startswith(
        "CudaExtensionError: the file builds the CUDA C++ extension scale_rows (scale_rows.cu), which needs the "
        "CUDA toolkit and a GPU"), stopped_by["extension.py"]
    assert stopped_by["extension.py"].endswith("at line 3")


@pytest.mark.tilelang
def test_a_triton_kernel_stops_the_run_with_that_reason(stopped_by):
    pytest.importorskip("triton")
    assert stopped_by["triton_kernel.py"].startswith("a triton kernel, which needs a GPU driver ("), \
        stopped_by["triton_kernel.py"]
    assert stopped_by["triton_kernel.py"].endswith("at line 12")


@pytest.mark.tilelang
def test_a_file_that_needs_values_before_its_launch_is_run_again_with_them_and_checked(kpack_reports):
    report = kpack_reports["data.py"]
    assert report.verdict == "verified", [d.message for d in report.diagnostics]
    assert "in a second run with real values for the tensors on cuda" in report.extra["run"]
    assert "nonzero" in report.extra["run"]


@pytest.mark.tilelang
def test_a_wrong_kernel_of_such_a_file_is_a_violation_at_its_line(kpack_reports):
    report = kpack_reports["data_wrong.py"]
    assert report.verdict == "violations", [d.message for d in report.diagnostics]
    assert any(d.check == "spec" and d.line == 12 for d in report.diagnostics), \
        [(d.check, d.line) for d in report.diagnostics]


@pytest.mark.tilelang
def test_a_compiled_eager_kernel_is_checked_against_the_files_comparison(kpack_reports):
    report = kpack_reports["eager.py"]
    assert report.verdict == "verified", [d.message for d in report.diagnostics]
    assert any("Y = the file's own expected value (line 20)" in p for p in report.proven), report.proven


@pytest.mark.tilelang
def test_a_wrong_compiled_eager_kernel_is_a_violation_at_its_line(kpack_reports):
    report = kpack_reports["eager_wrong.py"]
    assert report.verdict == "violations", [d.message for d in report.diagnostics]
    assert any(d.check == "spec" and d.line == 14 for d in report.diagnostics), \
        [(d.check, d.line) for d in report.diagnostics]
