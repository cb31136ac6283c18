"""User specs in NumPy/PyTorch notation are proven against the example kernels."""
from __future__ import annotations

import json

import pytest

from tir_lifter import LiftInputError, run_lift

from lifter_helpers import EXAMPLES, gemm_source


@pytest.mark.parametrize("name,spec", [
    ("gemm.py", "C = A @ B"),
    ("row_sum.py", "B = A.sum(1)"),
    ("elementwise_add.py", "C = A + B"),
    ("softmax_rows.py", "B = softmax(A, 1)"),
    ("gemm_relu.py", "C = relu(A @ B)"),
])
def test_user_spec_is_proven(name, spec):
    report = run_lift(str(EXAMPLES / name), spec=spec, frontend="text")
    assert report.verdict == "verified"
    assert any(spec in p for p in report.proven)


def test_report_is_json_serialisable_with_its_counterexample():
    report = run_lift(str(EXAMPLES / "gemm_relu.py"), mesh="tp=4", shards=["A=Shard(1)", "B=Shard(0)"],
                      frontend="text")
    body = json.loads(json.dumps(report.to_json()))
    assert body["verdict"] == "violations"
    assert body["diagnostics"][0]["counterexample"]["confirmed_by_evaluation"] is True


def test_two_kernels_are_all_checked_without_kernel_option_and_it_selects_one(write_kernel):
    source = gemm_source() + "\n\n" + gemm_source().replace("def matmul(", "def matmul2(").replace(
        "func = matmul(", "func2 = matmul2(")
    path = write_kernel(source)
    both = run_lift(path, frontend="text")
    assert both.verdict == "verified"
    assert {p.split(":")[0] for p in both.proven} == {"matmul", "matmul2"}
    one = run_lift(path, kernel="matmul2", frontend="text")
    assert one.verdict == "verified" and not any(p.startswith("matmul:") for p in one.proven)


def test_a_kernel_spec_applies_to_its_kernel_only(write_kernel):
    source = gemm_source() + "\n\n" + gemm_source().replace("def matmul(", "def matmul2(").replace(
        "func = matmul(", "func2 = matmul2(")
    path = write_kernel(source)
    report = run_lift(path, spec=["matmul2=C = A @ B.T"], frontend="text")
    assert report.verdict == "violations"
    assert all(d.message.startswith("matmul2:") for d in report.diagnostics if d.severity == "error")
