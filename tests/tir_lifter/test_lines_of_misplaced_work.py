"""The line a violation names when the work is misplaced rather than missing.

* Elements no block writes although the blocks issued as many stores as the output has: the
  write's index sends some onto others or past the edge (swapped block indices, a store one
  row off), so the write is named, not the grid; a grid that is too small (floor division on a
  size that is not a multiple) still names the grid.
* A value missing elements of several tensors: the loop around all their reads stopped short,
  even when another statement reads past an edge on purpose (an im2col's padding); a value
  missing elements of one tensor read past its edge: that read is shifted.
* A store through a flat view of the output (``T.Tensor(shape, dtype, out.data)``) keeps the
  lines the value came through, as a store to the output itself does.

Mutants of the bundled kernels, each a confirmed violation at its mutated line.
"""
from __future__ import annotations

import pytest
from lifter_helpers import EXAMPLES, lift_files, line_of

pytestmark = pytest.mark.tilelang

ROW_BIAS = (EXAMPLES / "row_bias_view.py").read_text()
CONV = (EXAMPLES / "conv2d_im2col.py").read_text()
BIAS_STORE = "Y[by * block_M + i, bx * block_N + j] = X[by * block_M + i, bx * block_N + j] + b[bx * block_N + j]"
CONV_LOOP = "for kt in T.Pipelined(T.ceildiv(taps * taps * channels, block_K), num_stages=2):"
CONV_FILTER = "T.copy(filters_2d[kt * block_K, bf * block_N], weight)"
CONV_STORE = "T.copy(acc, out_2d[bp * block_M, bf * block_N])"


def _mutate(source: str, old: str, new: str) -> str:
    assert source.count(old) == 1, old
    return source.replace(old, new)


FILES = {
    "bias_swapped_blocks.py": _mutate(ROW_BIAS, BIAS_STORE, BIAS_STORE.replace("by * block_M", "@").replace(
        "bx * block_N", "by * block_N").replace("@", "bx * block_M")),
    "bias_floor_grid.py": _mutate(_mutate(ROW_BIAS, "T.ceildiv(M, block_M)", "M // block_M"),
                                  "add_bias(64, 96, 16, 32)", "add_bias(72, 96, 16, 32)").replace(
        "torch.randn(64, 96", "torch.randn(72, 96"),
    "conv_short_k_loop.py": _mutate(CONV, CONV_LOOP, CONV_LOOP.replace("block_K), num", "block_K) - 1, num")),
    "conv_filter_row_off.py": _mutate(CONV, CONV_FILTER, CONV_FILTER.replace("kt * block_K", "kt * block_K + 1")),
    "conv_store_row_off.py": _mutate(CONV, CONV_STORE, CONV_STORE.replace("bp * block_M", "bp * block_M + 1")),
}


@pytest.fixture(scope="module")
def lifted(tmp_path_factory):
    pytest.importorskip("tilelang")
    folder = tmp_path_factory.mktemp("misplaced_work")
    return folder, lift_files(folder, FILES)


def _first_error(lifted, name: str):
    folder, reports = lifted
    report = reports[name]
    assert report.verdict == "violations", [d.message for d in report.diagnostics]
    errors = [d for d in report.diagnostics if d.severity == "error"]
    assert any(d.counterexample is not None and d.counterexample.confirmed for d in errors)
    return str(folder / name), errors


@pytest.mark.parametrize("name,needle", [
    ("bias_swapped_blocks.py", "Y[bx * block_M + i, by * block_N + j]"),
    ("conv_store_row_off.py", "out_2d[bp * block_M + 1"),
])
def test_unwritten_elements_after_enough_stores_name_the_write(lifted, name, needle):
    path, errors = _first_error(lifted, name)
    coverage = [d for d in errors if d.check == "coverage"]
    assert coverage and coverage[0].line == line_of(path, needle), [(d.check, d.line) for d in errors]
    assert "puts some twice or past the edge" in coverage[0].message
    assert all(d.line == line_of(path, needle) for d in errors), [(d.check, d.line) for d in errors]


def test_too_few_blocks_still_name_the_grid(lifted):
    path, errors = _first_error(lifted, "bias_floor_grid.py")
    coverage = [d for d in errors if d.check == "coverage"]
    assert coverage and coverage[0].line == line_of(path, "with T.Kernel(")
    assert "size the grid with T.ceildiv" in coverage[0].message


def test_a_value_short_of_both_operands_names_the_loop_around_their_reads(lifted):
    path, errors = _first_error(lifted, "conv_short_k_loop.py")
    spec = [d for d in errors if d.check == "spec"]
    assert spec and spec[0].line == line_of(path, "for kt in T.Pipelined("), [(d.check, d.line) for d in errors]


def test_a_value_short_of_one_operand_read_past_its_edge_names_that_read(lifted):
    path, errors = _first_error(lifted, "conv_filter_row_off.py")
    spec = [d for d in errors if d.check == "spec"]
    assert spec and spec[0].line == line_of(path, "filters_2d[kt * block_K + 1"), [(d.check, d.line) for d in errors]
