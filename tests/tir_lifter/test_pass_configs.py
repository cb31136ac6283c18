"""Compiler options a file builds its kernels with (``pass_configs``).

``tl.disable_thread_storage_sync`` turns off TileLang's ThreadSync pass: no ``__syncthreads``
between the threads' shared-memory accesses. The lifter reads a block's statements in program
order, an order those barriers make real; without them the rows reversed through shared memory
below race on a GPU (a thread reads an element another thread copied in). It was verified; it
is now ``unsupported`` with that reason.

An option the installed TileLang does not name (``TL_DISABLE_FAST_MATH`` of an example written
for another TileLang version) is given by its string name during the run, as TileLang takes
options; building a kernel's TIR reads none of them. That file stopped at an AttributeError
before; it now verifies.
"""
from __future__ import annotations

import pytest
from lifter_helpers import lift_files

NO_SYNC = 'import torch\nimport tilelang\nimport tilelang.language as T\n\n\n@tilelang.jit(out_idx=[1], pass_configs={tilelang.PassConfigKey.TL_DISABLE_THREAD_STORAGE_SYNC: True})\ndef reverse_rows(M, N, block_M=32):\n    @T.prim_func\n    def main(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32)):\n        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:\n            X_shared = T.alloc_shared((block_M, N), T.float32)\n            T.copy(X[bx * block_M, 0], X_shared)\n            for i, j in T.Parallel(block_M, N):\n                Y[bx * block_M + i, j] = X_shared[i, N - 1 - j]\n\n    return main\n\n\ndef ref_program(x):\n    return x.flip(1)\n\n\nx = torch.randn(256, 64, device="cuda")\ntorch.testing.assert_close(reverse_rows(256, 64)(x), ref_program(x))\n'
UNKNOWN_OPTION = 'import torch\nimport tilelang\nimport tilelang.language as T\n\n\n@tilelang.jit(out_idx=[1], pass_configs={\n                                         tilelang.PassConfigKey.TL_DISABLE_FAST_MATH: True})\ndef reverse_rows(M, N, block_M=32):\n    @T.prim_func\n    def main(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32)):\n        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:\n            X_shared = T.alloc_shared((block_M, N), T.float32)\n            T.copy(X[bx * block_M, 0], X_shared)\n            for i, j in T.Parallel(block_M, N):\n                Y[bx * block_M + i, j] = X_shared[i, N - 1 - j]\n\n    return main\n\n\ndef ref_program(x):\n    return x.flip(1)\n\n\nx = torch.randn(256, 64, device="cuda")\ntorch.testing.assert_close(reverse_rows(256, 64)(x), ref_program(x))\n'
FILES = {"no_thread_sync.py": NO_SYNC, "unknown_option.py": UNKNOWN_OPTION}


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    pytest.importorskip("tilelang")
    return lift_files(tmp_path_factory.mktemp("pass_configs"), FILES)


@pytest.mark.tilelang
def test_a_kernel_built_without_thread_sync_is_unsupported_with_the_reason(reports):
    report = reports["no_thread_sync.py"]
    assert report.verdict == "unsupported", [d.message for d in report.diagnostics]
    assert any("tl.disable_thread_storage_sync" in d.message and "no barrier" in d.message
               for d in report.diagnostics)


@pytest.mark.tilelang
def test_an_option_the_installed_tilelang_does_not_name_does_not_stop_the_run(reports):
    report = reports["unknown_option.py"]
    assert report.verdict == "verified", [d.message for d in report.diagnostics]
    assert any("Y = ref_program(X)" in p for p in report.proven)
