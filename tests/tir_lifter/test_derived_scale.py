"""A float argument the caller computes from the sizes (``scale = (D + E) ** -0.5``): at the
reduced sizes it is recomputed from the reduced sizes when it is exactly one size, or the sum of
two, to the power -0.5 at the real ones (and only one such sum gives it), so the reference, which
scales by the reduced shapes, can be compared with.  A kernel built with the wrong sum is then a
violation rather than ``unsupported``.
"""
from __future__ import annotations

import pytest
from lifter_helpers import lift_files

from tir_lifter.instantiate import _derived_scales

SCALED_CONCAT = '''
import torch
import tilelang
import tilelang.language as T


@tilelang.jit
def scaled_concat(M, D, E, block_M, scale, dtype=T.float32):
    assert D > 0 and E > 0
    @T.prim_func
    def main(X: T.Tensor((M, D), dtype), P: T.Tensor((M, E), dtype), Y: T.Tensor((M, D + E), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x_local = T.alloc_fragment((block_M, D), dtype)
            p_local = T.alloc_fragment((block_M, E), dtype)
            T.copy(X[bx * block_M, 0], x_local)
            T.copy(P[bx * block_M, 0], p_local)
            for i, j in T.Parallel(block_M, D):
                Y[bx * block_M + i, j] = x_local[i, j] * scale
            for i, j in T.Parallel(block_M, E):
                Y[bx * block_M + i, D + j] = p_local[i, j] * scale

    return main


def ref_program(x, p):
    return torch.cat([x, p], dim=-1) * (x.shape[-1] + p.shape[-1]) ** -0.5


M, D, E = 256, 64, 16
scale = (D + E) ** -0.5
kernel = scaled_concat(M, D, E, 64, scale)
x = torch.randn(M, D, device="cuda")
p = torch.randn(M, E, device="cuda")
y = torch.empty(M, D + E, device="cuda")
kernel(x, p, y)
torch.testing.assert_close(y, ref_program(x, p), rtol=1e-4, atol=1e-4)
'''

FILES = {
    "scaled_concat.py": SCALED_CONCAT,
    # scaled by D alone where the reference scales by D + E
    "scaled_concat_bad.py": SCALED_CONCAT.replace("scale = (D + E) ** -0.5", "scale = D ** -0.5", 1),
}


def test_a_scale_one_sum_of_two_sizes_gives_is_derived_from_them():
    args = {"dim": 512, "pe_dim": 64, "heads": 128, "block_N": 64, "softmax_scale": (512 + 64) ** -0.5}
    assert _derived_scales(args, {k: v for k, v in args.items() if isinstance(v, int)}, {"block_N": 64}) == \
        {"softmax_scale": ("dim", "pe_dim")}


def test_a_scale_several_sums_give_is_left_at_its_real_value():
    args = {"dim": 64, "pe_dim": 64, "heads": 128, "scale": 128 ** -0.5}  # heads, or dim + pe_dim
    assert _derived_scales(args, {k: v for k, v in args.items() if isinstance(v, int)}, {}) == {}


def test_a_float_no_size_gives_is_left_at_its_real_value():
    args = {"dim": 512, "pe_dim": 64, "eps": 1e-6, "scale": 0.1}
    assert _derived_scales(args, {k: v for k, v in args.items() if isinstance(v, int)}, {}) == {}


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    pytest.importorskip("tilelang")
    return lift_files(tmp_path_factory.mktemp("derived_scale"), FILES)


@pytest.mark.tilelang
def test_a_kernel_scaled_by_the_callers_size_formula_is_verified(reports):
    report = reports["scaled_concat.py"]
    assert report.verdict == "verified", [d.message for d in report.diagnostics]
    assert any("scale = (D + E) ** -0.5" in line and "kernel computes Y" in line for line in report.proven)


@pytest.mark.tilelang
def test_a_kernel_built_with_the_wrong_size_formula_is_a_confirmed_violation(reports):
    report = reports["scaled_concat_bad.py"]
    assert report.verdict == "violations", [d.message for d in report.diagnostics]
    found = [d for d in report.diagnostics if d.check == "spec"]
    assert found and found[0].counterexample and found[0].counterexample.confirmed
