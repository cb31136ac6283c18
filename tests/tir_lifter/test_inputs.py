"""Bad input is a LiftInputError with one line `file:line: expected ...`; unknown constructs
are `unsupported` diagnostics with their line."""
from __future__ import annotations

import pytest

from tir_lifter import LiftInputError, run_lift

from lifter_helpers import DATA, EXAMPLES, gemm_source, line_of


def test_syntax_error_names_file_and_line(write_kernel):
    path = write_kernel("import tilelang.language as T\n\ndef broken(:\n    pass\n")
    with pytest.raises(LiftInputError) as info:
        run_lift(path, frontend="text")
    assert str(info.value).startswith(f"{path}:3: expected")
    assert "\n" not in str(info.value)


def test_unknown_buffer_in_spec_is_an_input_error():
    with pytest.raises(LiftInputError, match=r"^--spec:1: expected a kernel tensor \(A, B, C\).*'D'"):
        run_lift(str(EXAMPLES / "gemm.py"), spec="C = A @ D", frontend="text")


def test_file_without_kernel_is_an_input_error(write_kernel):
    with pytest.raises(LiftInputError, match="expected a @T.prim_func"):
        run_lift(write_kernel("x = 1\n"), frontend="text")


def test_unknown_shard_tensor_is_an_input_error():
    with pytest.raises(LiftInputError, match="--shard"):
        run_lift(str(EXAMPLES / "gemm.py"), mesh="tp=2", shards=["X=Shard(0)"], frontend="text")


def test_unmodelled_tile_op_is_unsupported_at_its_line(write_kernel):
    path = write_kernel(gemm_source().replace("T.clear(C_local)", "T.clear(C_local)\n            T.cumsum(C_local, dim=0)"))
    report = run_lift(path, frontend="text")
    assert report.verdict == "unsupported"
    [diag] = report.diagnostics
    assert diag.check == "unsupported" and diag.line == line_of(path, "T.cumsum") and "cumsum" in diag.message


def test_kernel_without_recognisable_spec_is_unsupported_not_passed(write_kernel):
    source = gemm_source().replace("T.gemm(A_shared, B_shared, C_local)", "T.gemm(A_shared, B_shared, C_local)\n                T.gemm(A_shared, B_shared, C_local)")
    report = run_lift(write_kernel(source), frontend="text")
    assert report.verdict == "unsupported"
    assert any("no spec" in d.message for d in report.diagnostics)


def test_printed_tvmscript_with_small_literal_sizes_is_verified():
    report = run_lift(str(DATA / "gemm_printed_small.py"), frontend="text")
    assert report.verdict == "verified"


def test_printed_tvmscript_with_large_literal_sizes_is_unsupported():
    report = run_lift(str(DATA / "gemm_printed_1024.py"), frontend="text")
    assert report.verdict == "unsupported"
    assert "literal sizes" in report.diagnostics[0].message
