"""A launch that passes overlapping memory for two parameters, one of which the kernel writes.

``shift_rows(256, 64)(x, x)`` writes each row with the next row of X: in place, block 0 reads
row 32 while block 1 overwrites it, a race on a GPU. The lifter runs X and Y as separate
tensors, so the file was verified; it is now ``unsupported`` (in-place launches are not
modelled). The same kernel out of place verifies, and two disjoint halves of one tensor are no
overlap.
"""
from __future__ import annotations

import pytest
from lifter_helpers import lift_files

IN_PLACE = 'import torch\nimport tilelang\nimport tilelang.language as T\n\n\n@tilelang.jit\ndef shift_rows(M, N, block_M=32):\n    @T.prim_func\n    def main(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32)):\n        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:\n            for i, j in T.Parallel(block_M, N):\n                Y[bx * block_M + i, j] = X[(bx * block_M + i + 1) % M, j]\n\n    return main\n\n\ndef shifted(x):\n    return torch.cat([x[1:], x[:1]], 0)\n\n\nx = torch.randn(256, 64, device="cuda")\nx0 = x.clone()\nshift_rows(256, 64)(x, x)\ntorch.testing.assert_close(x, shifted(x0))\n'
OUT_OF_PLACE = IN_PLACE.replace("shift_rows(256, 64)(x, x)", "y = torch.empty_like(x)\nshift_rows(256, 64)(x, y)") \
    .replace("assert_close(x, shifted(x0))", "assert_close(y, shifted(x0))")
HALVES = 'import torch\nimport tilelang\nimport tilelang.language as T\n\n\n@tilelang.jit\ndef double(M, N, block_M=32):\n    @T.prim_func\n    def main(X: T.Tensor((M, N), T.float32), Y: T.Tensor((M, N), T.float32)):\n        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:\n            for i, j in T.Parallel(block_M, N):\n                Y[bx * block_M + i, j] = X[bx * block_M + i, j] * 2\n\n    return main\n\n\nhalves = torch.randn(512, 64, device="cuda")\nexpected = halves[:256] * 2\ndouble(256, 64)(halves[:256], halves[256:])\ntorch.testing.assert_close(halves[256:], expected)\n'
FILES = {"in_place.py": IN_PLACE, "out_of_place.py": OUT_OF_PLACE, "halves.py": HALVES}


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    pytest.importorskip("tilelang")
    return lift_files(tmp_path_factory.mktemp("in_place"), FILES)


@pytest.mark.tilelang
def test_a_kernel_launched_in_place_is_unsupported_not_verified(reports):
    report = reports["in_place.py"]
    assert report.verdict == "unsupported", [d.message for d in report.diagnostics]
    assert any("overlapping memory as X and Y" in d.message for d in report.diagnostics)


@pytest.mark.tilelang
@pytest.mark.parametrize("name", ["out_of_place.py", "halves.py"])
def test_separate_or_disjoint_memory_is_checked_as_usual(reports, name):
    report = reports[name]
    assert report.verdict == "verified", [d.message for d in report.diagnostics]
