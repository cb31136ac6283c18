"""The line a violation names when the loads are right and something after them is not.

* A value that only gains input elements, or loses elements its own block read: a condition on
  indices it came through (a ``T.if_then_else`` mask) let them in or kept them out, so the
  condition is named, not the load that read them.
* A value that is the spec's value of another element (its input elements, none of its own
  element's, the same number), every such value stored once: the write put it in the wrong
  place; a load one row off gives other elements' values too, but not a permutation of them.
* Output tiles no block writes in a kernel of a constant number of blocks (one per SM): the loop
  its blocks run over the tiles stopped short, not the grid.
* A read of an accumulator nothing initialized, in a loop over tiles whose every iteration copies
  it out: its initialization belongs inside that loop, before the loop that accumulates.
* A dropped initialization is a statement that is not there: the report gives the lines it
  belongs between (the scope that allocates the buffer, up to the loop that reads it).
* An output dtype the reference does not have: the call of the file that built the kernel so.
* A read of scratch elements a write missed (the write one row off): the lines that write it.

Mutants of the bundled kernels, each a confirmed violation at its mutated line, and the right
kernel verified.
"""
from __future__ import annotations

import re

import pytest
from lifter_helpers import EXAMPLES, lift_files, line_of

pytestmark = pytest.mark.tilelang

TRIL = (EXAMPLES / "causal_tril.py").read_text()
PERSISTENT = (EXAMPLES / "persistent_gemm.py").read_text()
MASK = "T.if_then_else(bx * block_N + j <= by * block_M + i, scores[i, j], 0)"
STORE = "T.copy(scores, B[by * block_M, bx * block_N])"
LOAD = "T.copy(A[by * block_M, bx * block_N], scores)"
CLEAR = "T.clear(C_local)"
SOFTMAX = (EXAMPLES / "two_pass_softmax.py").read_text()
MAX_FILL = "T.fill(row_max, -T.infinity(T.float32))"
TYPED = (EXAMPLES / "typed_elementwise.py").read_text()
TYPED_CALL = "kernel = elementwise_add(M, N, 32, 32, T.float32, T.float32)"
SPLIT = (EXAMPLES / "split_masked_row_sum.py").read_text()
PARTIAL_WRITE = "partial[bm * block_M + i, bs] = total[i]"


def _mutate(source: str, old: str, new: str) -> str:
    assert source.count(old) == 1, old
    return source.replace(old, new)


FILES = {
    "tril_right.py": TRIL,
    "tril_mask_drops.py": _mutate(TRIL, MASK, MASK.replace("<=", "<")),
    "tril_mask_admits.py": _mutate(TRIL, MASK, MASK.replace("by * block_M + i", "by * block_M + i + 1")),
    "tril_store_swapped.py": _mutate(TRIL, STORE, "T.copy(scores, B[bx * block_M, by * block_N])"),
    "tril_load_row_off.py": _mutate(TRIL, LOAD, LOAD.replace("by * block_M", "by * block_M + 1")),
    "persistent_no_clear.py": _mutate(PERSISTENT, CLEAR, "pass"),
    "persistent_short_waves.py": _mutate(PERSISTENT, "T.serial(waves)", "T.serial(waves - 1)"),
    "softmax_no_max_fill.py": _mutate(SOFTMAX, MAX_FILL, "pass  # dropped"),
    "typed_int_output.py": _mutate(TYPED, TYPED_CALL, TYPED_CALL.replace("T.float32)", "T.int32)")),
    "split_partial_row_off.py": _mutate(SPLIT, PARTIAL_WRITE, PARTIAL_WRITE.replace("+ i,", "+ i + 1,")),
}


@pytest.fixture(scope="module")
def lifted(tmp_path_factory):
    pytest.importorskip("tilelang")
    folder = tmp_path_factory.mktemp("conditions")
    return folder, lift_files(folder, FILES)


def _errors(lifted, name: str):
    folder, reports = lifted
    report = reports[name]
    assert report.verdict == "violations", [d.message for d in report.diagnostics]
    errors = [d for d in report.diagnostics if d.severity == "error"]
    assert any(d.counterexample is not None and d.counterexample.confirmed for d in errors)
    return str(folder / name), errors


def test_right_kernel_verified(lifted):
    _, reports = lifted
    assert reports["tril_right.py"].verdict == "verified", [d.message for d in reports["tril_right.py"].diagnostics]


@pytest.mark.parametrize("name,why", [
    ("tril_mask_drops.py", "its condition keeps A elements the spec uses"),
    ("tril_mask_admits.py", "its condition lets A elements the spec does not use here into the value"),
])
def test_a_mask_is_named_not_the_load(lifted, name, why):
    path, errors = _errors(lifted, name)
    spec = [d for d in errors if d.check == "spec"]
    assert spec and spec[0].line == line_of(path, "T.if_then_else("), [(d.line, d.message) for d in errors]
    assert why in spec[0].message


def test_another_elements_value_names_the_write(lifted):
    path, errors = _errors(lifted, "tril_store_swapped.py")
    spec = [d for d in errors if d.check == "spec"]
    assert spec and spec[0].line == line_of(path, "T.copy(scores, B["), [(d.line, d.message) for d in errors]
    assert "the value the spec gives B[" in spec[0].message


def test_a_shifted_load_of_a_masked_kernel_names_the_load(lifted):
    path, errors = _errors(lifted, "tril_load_row_off.py")
    spec = [d for d in errors if d.check == "spec"]
    assert spec and spec[0].line == line_of(path, "T.copy(A["), [(d.line, d.message) for d in errors]


def test_clear_of_a_persistent_kernel_belongs_inside_its_tile_loop(lifted):
    path, errors = _errors(lifted, "persistent_no_clear.py")
    uninitialized = [d for d in errors if d.check == "uninitialized-read"]
    assert uninitialized, [(d.check, d.line) for d in errors]
    k_loop = line_of(path, "for k in T.Pipelined(")
    assert f"before the loop at line {k_loop}" in uninitialized[0].message
    assert line_of(path, "if bx < m_tiles:") <= uninitialized[0].line < k_loop


def test_tiles_left_unwritten_by_a_persistent_kernel_name_its_tile_loop(lifted):
    path, errors = _errors(lifted, "persistent_short_waves.py")
    coverage = [d for d in errors if d.check == "coverage"]
    assert coverage and coverage[0].line == line_of(path, "for w in T.serial("), [(d.check, d.line) for d in errors]
    assert "stops before writing them" in coverage[0].message


def test_a_dropped_first_initialization_is_placed_between_its_scope_and_its_reading_loop(lifted):
    path, errors = _errors(lifted, "softmax_no_max_fill.py")
    uninitialized = [d for d in errors if d.check == "uninitialized-read"]
    assert uninitialized, [(d.check, d.line) for d in errors]
    dropped, loop = line_of(path, "pass  # dropped"), line_of(path, "for nt in T.serial(")
    window = re.search(r"between lines (\d+) and (\d+)", uninitialized[0].message)
    assert window, uninitialized[0].message
    start, end = map(int, window.groups())
    assert start < dropped < end == loop and start >= line_of(path, "with T.Kernel("), uninitialized[0].message


def test_an_integer_output_dtype_names_the_call_that_built_it(lifted):
    path, errors = _errors(lifted, "typed_int_output.py")
    spec = [d for d in errors if d.check == "spec"]
    assert spec and f"int32 as the file builds it at line {line_of(path, 'kernel = elementwise_add(')}" \
        in spec[0].message, [d.message for d in errors]


def test_scratch_elements_a_write_missed_name_that_write(lifted):
    path, errors = _errors(lifted, "split_partial_row_off.py")
    uninitialized = [d for d in errors if d.check == "uninitialized-read"]
    assert uninitialized, [(d.check, d.line) for d in errors]
    written = line_of(path, "partial[bm * block_M + i + 1, bs]")
    assert f"partial is written at line {written}, which misses that element" in uninitialized[0].message, \
        uninitialized[0].message
