"""``T.reshape`` of an on-chip buffer: another shape of the block's same memory, as a NumPy view
of the block's array (element ``t`` of the flat view is element ``divmod(t, width)`` of the tile).
A kernel scaling its tile through a flat view is verified; a wrong column or a loop one short
is a confirmed violation named at the store through the view.
"""
from __future__ import annotations

import pytest
from lifter_helpers import lift_files

FLAT_SCALE = '''
import torch
import tilelang
import tilelang.language as T


@tilelang.jit
def flat_scale(X, W, block_M, width, dtype=T.float32):
    M = T.const("M")
    X: T.Tensor((M, width), dtype)
    W: T.Tensor((width,), dtype)
    Y = T.empty((M, width), dtype)
    with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
        x_shared = T.alloc_shared((block_M, width), dtype)
        x_flat = T.reshape(x_shared, (block_M * width,))
        T.copy(X[bx * block_M, 0], x_shared)
        for t in T.Parallel(block_M * width):
            x_flat[t] = x_flat[t] * W[t % width]
        T.copy(x_shared, Y[bx * block_M, 0])
    return Y


x = torch.randn(256, 32, device="cuda")
w = torch.randn(32, device="cuda")
torch.testing.assert_close(flat_scale(x, w, 64, 32), x * w, rtol=1e-4, atol=1e-4)
'''


def _mutate(before: str, after: str) -> str:
    assert before in FLAT_SCALE, before
    return FLAT_SCALE.replace(before, after, 1)


STORE_LINE = FLAT_SCALE.splitlines().index("            x_flat[t] = x_flat[t] * W[t % width]") + 1
FILES = {
    "flat_scale.py": FLAT_SCALE,
    # the column of flat element t taken as t // block_M
    "flat_scale_column.py": _mutate("W[t % width]", "W[t // block_M]"),
    # the last element of the tile is left unscaled
    "flat_scale_short.py": _mutate("T.Parallel(block_M * width)", "T.Parallel(block_M * width - 1)"),
}


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    pytest.importorskip("tilelang")
    return lift_files(tmp_path_factory.mktemp("onchip_reshape"), FILES)


def _messages(report) -> list[str]:
    return [d.message for d in report.diagnostics]


@pytest.mark.tilelang
def test_a_tile_scaled_through_its_flat_reshape_is_verified(reports):
    report = reports["flat_scale.py"]
    assert report.verdict == "verified", _messages(report)
    assert any("kernel computes Y" in line for line in report.proven), report.proven


@pytest.mark.tilelang
@pytest.mark.parametrize("name", ["flat_scale_column.py", "flat_scale_short.py"])
def test_a_wrong_store_through_the_reshape_is_a_confirmed_violation(reports, name):
    report = reports[name]
    assert report.verdict == "violations", _messages(report)
    found = [d for d in report.diagnostics if d.check == "spec"]
    assert found and found[0].counterexample and found[0].counterexample.confirmed, _messages(report)


@pytest.mark.tilelang
def test_the_wrong_value_is_followed_through_the_reshape_to_its_store(reports):
    # the store writes x_flat, the copy out reads x_shared: one memory, so the store's line is named
    found = [d for d in reports["flat_scale_column.py"].diagnostics if d.check == "spec"]
    assert f"line {STORE_LINE} is where it goes wrong" in found[0].message or found[0].line == STORE_LINE, \
        found[0].message
