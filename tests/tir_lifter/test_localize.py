"""The faulty statement's line and column in a violation (tir_lifter/localize.py).

One-line mutants of the bundled eager GEMM; each violation's own line (not only the list of
lines its value came through) must be the mutated statement, with the statement's column.
All mutants go through one elaboration child.
"""
from __future__ import annotations

import pytest
from lifter_helpers import EXAMPLES, line_of

pytestmark = pytest.mark.tilelang

GEMM = (EXAMPLES / "eager_gemm.py").read_text()
A_LOAD, B_LOAD = "T.copy(A[by * block_M, ko * block_K], A_tile)", "T.copy(B[ko * block_K, bx * block_N], B_tile)"
LOOP, STORE = "for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):", "T.copy(acc, C[by * block_M, bx * block_N])"

# name -> (mutated source line, its replacement, the words of the reason)
MUTANTS = {
    "a_row_tile.py": (A_LOAD, "T.copy(A[by * block_K, ko * block_K], A_tile)", "reads A elements the spec does not use"),
    "a_col_shift.py": (A_LOAD, "T.copy(A[by * block_M, ko * block_K + 1], A_tile)", "reads past the edge of A"),
    "b_row_tile.py": (B_LOAD, "T.copy(B[ko * block_N, bx * block_N], B_tile)", "reads past the edge of B"),
    "k_loop_short.py": (LOOP, "for ko in T.Pipelined(T.ceildiv(K, block_K) - 1, num_stages=2):",
                        "the loop or condition stops"),
    "store_shift.py": (STORE, "T.copy(acc, C[by * block_M, bx * block_N + 1])", "another element should have"),
}
# a dropped statement: the violation names the place it belongs, not the read it leaves uninitialized
DROPPED = {"no_clear.py": ("T.clear(acc)", "pass")}


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    pytest.importorskip("tilelang")
    from tir_lifter.elaborate_run import report_from_json, run_batch
    folder = tmp_path_factory.mktemp("localize")
    paths = {}
    for name, (old, new, _) in list(MUTANTS.items()) + [(n, (o, w, "")) for n, (o, w) in DROPPED.items()]:
        assert old in GEMM
        (folder / name).write_text(GEMM.replace(old, new))
        paths[name] = str(folder / name)
    bodies = {body["file"]: body for body in run_batch(list(paths.values()), timeout=900.0)}
    return {name: (report_from_json(bodies[path]), path) for name, path in paths.items()}


def test_a_dropped_clear_is_located_where_the_clear_belongs_with_its_column(reports):
    report, path = reports["no_clear.py"]
    [diag] = [d for d in report.diagnostics if d.check == "uninitialized-read"]
    assert report.verdict == "violations" and diag.counterexample.confirmed
    assert (diag.line, diag.column) == (line_of(path, "        pass"), 9)
    assert f"(line {line_of(path, 'T.gemm(')})" in diag.message and \
        f"before the loop at line {line_of(path, 'T.Pipelined(')}" in diag.message


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_the_violation_is_located_at_the_mutated_statement_with_its_column(reports, name):
    report, path = reports[name]
    old, new, why = MUTANTS[name]
    line = line_of(path, new.split("(", 1)[0] if new.startswith("for") else new)
    column = next(t for n, t in enumerate(open(path).read().splitlines(), 1) if n == line).index(new[:5]) + 1
    spec = [d for d in report.diagnostics if d.check == "spec" and d.severity == "error"]
    assert report.verdict == "violations", [d.message for d in report.diagnostics]
    assert spec and spec[0].line == line and spec[0].column == column, [(d.line, d.column, d.message) for d in spec]
    assert f"line {line} is where it goes wrong: " in spec[0].message and why in spec[0].message
    assert spec[0].counterexample is not None and spec[0].counterexample.confirmed


def test_a_column_is_carried_through_the_json_report(reports):
    report, _ = reports["a_row_tile.py"]
    (spec,) = [d for d in report.diagnostics if d.check == "spec"]
    assert spec.to_json()["column"] == spec.column == 13
