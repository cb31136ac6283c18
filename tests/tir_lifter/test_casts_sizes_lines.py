"""Soundness of the TileLang path on what the reduced instance could hide: dtype conversions
(a float truncated through int32, an integer output for a float reference), constants a count
is compared with (a K loop capped at 8 tiles), equal tiles made distinct (a bug the file's
sizes never show), and the source line each violation names.

Each wrong kernel is a one-line mutant of a bundled one; all go through one elaboration child.
"""
from __future__ import annotations

import numpy as np
import pytest
import z3

from lifter_helpers import EXAMPLES, line_of

ELEMENTWISE, GEMM = "typed_elementwise.py", "capped_k_gemm.py"
K_LOOP = "T.Pipelined(T.min(T.ceildiv(K, block_K), 64), num_stages=2)"


def _mutate(name: str, *pairs: tuple[str, str]) -> str:
    source = (EXAMPLES / name).read_text()
    for before, after in pairs:
        assert before in source, f"{before!r} not in {name}"
        source = source.replace(before, after, 1)
    return source


MUTANTS = {
    # the A element truncated toward zero through int32 before the add (TileLang's C does so)
    "cast_truncates.py": _mutate(ELEMENTWISE, ("C_local[i, j] = A_shared[i, j] + B_shared[i, j]",
                                               "C_local[i, j] = T.Cast(in_dtype, T.Cast(T.int32, A_shared[i, j])) + "
                                               "B_shared[i, j]")),
    # the same kernel built with an int32 output: the float reference's values do not survive
    "int_output.py": _mutate(ELEMENTWISE, ("T.float32, T.float32)", "T.float32, T.int32)")),
    # fp8 saturates at 448: A scaled by 1000 through float8_e4m3fn loses every |A| > 0.448
    "fp8_saturates.py": _mutate(ELEMENTWISE, ("C_local[i, j] = A_shared[i, j] + B_shared[i, j]",
                                               "C_local[i, j] = T.Cast(in_dtype, T.Cast(T.float8_e4m3fn, "
                                               "A_shared[i, j] * 1000.0)) / 1000.0 + B_shared[i, j]")),
    # a float8 output the reference converts to as well: a sum above 448 is 448 on both sides (the
    # kernel saturates, and so does torch's conversion), not a difference
    "fp8_output.py": _mutate(ELEMENTWISE, ("return A + B", "return (A + B).to(torch.float8_e4m3fn)"),
                             ("import tilelang\n", "import tilelang\nimport torch\n"),
                             ("T.float32, T.float32)", "T.float32, T.float8_e4m3fn)")),
    # the K loop capped at 8 tiles where the file's K has 16 (T.min)
    "cap_min.py": _mutate(GEMM, (K_LOOP, "T.Pipelined(T.min(T.ceildiv(K, block_K), 8), num_stages=2)")),
    # ... written with T.max
    "cap_max.py": _mutate(GEMM, (K_LOOP, "T.Pipelined(T.ceildiv(K, block_K) - T.max(T.ceildiv(K, block_K) - 8, 0), "
                                         "num_stages=2)")),
    # ... as a constant trip count
    "cap_loop_bound.py": _mutate(GEMM, (K_LOOP, "T.Pipelined(8, num_stages=2)")),
    # ... as a condition on the K tile
    "cap_condition.py": _mutate(GEMM, (K_LOOP, "T.Pipelined(T.ceildiv(K, block_K), num_stages=2)"),
                                ("                T.gemm(A_tile, B_tile, acc)",
                                 "                if ko < 8:\n                    T.gemm(A_tile, B_tile, acc)")),
    # the rows of A's tile stepped by block_N: right only because the file builds block_M = block_N
    "equal_tiles_mixed.py": _mutate(ELEMENTWISE, ("T.copy(A[by * block_M, bx * block_N], A_shared)",
                                                  "T.copy(A[by * block_N, bx * block_N], A_shared)")),
    # ... and with the file building them apart, the same line is a plain violation
    "unequal_tiles_mixed.py": _mutate(ELEMENTWISE, ("T.copy(A[by * block_M, bx * block_N], A_shared)",
                                                    "T.copy(A[by * block_N, bx * block_N], A_shared)"),
                                      ("elementwise_add(M, N, 32, 32,", "elementwise_add(M, N, 16, 32,")),
}
MUTATED_LINE = {"cast_truncates.py": "T.Cast(T.int32", "cap_min.py": "T.Pipelined(", "cap_max.py": "T.Pipelined(",
                "cap_loop_bound.py": "T.Pipelined(", "cap_condition.py": "if ko < 8:",
                "unequal_tiles_mixed.py": "T.copy(A[by * block_N"}


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    pytest.importorskip("tilelang")
    from tir_lifter.elaborate_run import report_from_json, run_batch
    folder = tmp_path_factory.mktemp("kernels")
    paths = {name: str(EXAMPLES / name) for name in (ELEMENTWISE, GEMM)}
    for name, source in MUTANTS.items():
        (folder / name).write_text(source)
        paths[name] = str(folder / name)
    bodies = {body["file"]: body for body in run_batch(list(paths.values()), timeout=1200.0)}
    out = {}
    for name, path in paths.items():
        assert "internal_error" not in bodies[path], bodies[path]
        out[name] = (report_from_json(bodies[path]), path)
    return out


def _errors(report):
    return [d for d in report.diagnostics if d.severity == "error"]


@pytest.mark.parametrize("name", [ELEMENTWISE, GEMM])
def test_kernels_whose_conversions_and_caps_change_nothing_are_verified(reports, name):
    report, _ = reports[name]
    assert report.verdict == "verified", [d.message for d in report.diagnostics]


@pytest.mark.parametrize("name", ["cast_truncates.py", "int_output.py", "fp8_saturates.py", "cap_min.py", "cap_max.py",
                                  "cap_loop_bound.py", "cap_condition.py", "unequal_tiles_mixed.py"])
def test_a_conversion_or_cap_that_changes_values_is_a_confirmed_violation(reports, name):
    report, _ = reports[name]
    assert report.verdict == "violations", [d.message for d in report.diagnostics]
    assert any(d.check == "spec" and d.counterexample and d.counterexample.confirmed for d in _errors(report))


@pytest.mark.parametrize("name", sorted(MUTATED_LINE))
def test_the_violation_names_the_mutated_line_among_the_lines_its_value_came_through(reports, name):
    report, path = reports[name]
    line = line_of(path, MUTATED_LINE[name])
    spec = [d for d in _errors(report) if d.check == "spec"]
    factory = "def matmul" if name.startswith("cap_") else "def elementwise_add"
    assert spec and all(d.line != line_of(path, factory) for d in spec)
    assert any(d.line == line or f" {line}," in d.message or f" {line} and" in d.message for d in spec), \
        [(d.line, d.message) for d in spec]


def test_an_integer_output_for_a_float_reference_is_named_in_the_violation(reports):
    report, path = reports["int_output.py"]
    built = line_of(path, "kernel = elementwise_add(")
    assert any(f"the kernel's output C is int32 as the file builds it at line {built}, the reference's float32"
               in d.message for d in _errors(report)), [d.message for d in _errors(report)]


def test_a_capped_count_is_reduced_on_the_side_of_the_cap_it_is_at_the_real_sizes(reports):
    message = " ".join(d.message for d in _errors(reports["cap_min.py"][0]))
    assert "K=18 (from 512)" in message  # 9 tiles of 2: above the cap of 8, as 16 tiles of 32 are


def test_a_bug_only_at_sizes_the_file_does_not_build_is_worded_as_the_factorys_general_case(reports):
    report, path = reports["equal_tiles_mixed.py"]
    assert report.verdict == "verified", [d.message for d in report.diagnostics]
    latent = [d for d in report.diagnostics if d.check == "latent"]
    assert latent and latent[0].message.startswith(
        "elementwise_add: at sizes the file does not build (the factory's general case: block_M=2, block_N=4, "
        "where the file builds block_M = block_N = 32)")
    assert "block_M=2 (from 32), block_N=2 (from 32)" in " ".join(report.proven)


CONVERSIONS = [("float32", "int32"), ("float32", "int8"), ("float32", "uint8"), ("int32", "int8"),
               ("int32", "float32"), ("float32", "float8_e4m3fn"), ("float32", "float8_e5m2"),
               ("float32", "float16"), ("float32", "bfloat16"), ("float32", "bool"), ("bool", "float32")]


@pytest.mark.parametrize("source,target", CONVERSIONS)
def test_numpy_and_z3_agree_on_every_conversion(source, target):
    from verifier.backends import NumpyBackend, Z3Backend
    from verifier.registry import get_rule
    rule = get_rule("convert")
    if source == "bool":
        values = np.array([True, False])
    elif source.startswith("int"):
        values = np.array([300, -129, 7, -7])
    else:
        values = np.array([-2.75, 2.75, -0.5, 500.0, 70000.0, -1e12])
    attrs = {"dtype": target, "source": source}
    concrete = rule.evaluate(NumpyBackend(), [values], attrs, None)[0]
    terms = np.array([z3.BoolVal(bool(v)) if source == "bool" else z3.IntVal(int(v)) if source.startswith("int")
                      else z3.RealVal(float(v)) for v in values], dtype=object)
    symbolic = rule.evaluate(Z3Backend(), [terms], attrs, None)[0]
    for got, term in zip(concrete, symbolic):
        value = z3.simplify(term)
        if not np.isfinite(float(got)):  # float16 overflows to inf: Z3 keeps the rounding uninterpreted
            assert str(value.decl()) == f"round_{target}", value
            continue
        number = z3.is_true(value) if z3.is_bool(value) else value.as_long() if z3.is_int_value(value) \
            else float(value.as_fraction())
        assert float(got) == float(number), (source, target, got, value)


def test_float_to_int_truncates_toward_zero_and_saturates_and_fp8_saturates():
    from verifier.backends import NumpyBackend
    from verifier.registry import get_rule
    rule = get_rule("convert")
    values = np.array([-2.75, 2.75, 500.0, -1e12])
    assert rule.evaluate(NumpyBackend(), [values], {"dtype": "int32", "source": "float32"}, None)[0].tolist() == \
        [-2, 2, 500, -2 ** 31]
    assert rule.evaluate(NumpyBackend(), [values], {"dtype": "int8", "source": "float32"}, None)[0].tolist() == \
        [-2, 2, 127, -128]
    assert rule.evaluate(NumpyBackend(), [values], {"dtype": "float8_e4m3fn", "source": "float32"},
                         None)[0].tolist() == [-2.75, 2.75, 448.0, -448.0]


def test_comparisons_of_constants_with_sizes_are_listed_with_trip_counts():
    from tir_lifter.program import BinOp, Const, Kernel, Loop, Region, TileOp, Var
    from tir_lifter.sizes import comparison_case, constant_comparisons
    body = (Loop("ko", Const(8), "serial", (TileOp("copy", (Region("A", (Const(0), BinOp("*", Var("ko"), Const(2))),
                                                                   (Const(2), Const(2))),
                                                            Region("A_s", (Const(0), Const(0)), (Const(2), Const(2))))),)),)
    from tir_lifter.program import Buffer
    kernel = Kernel("k", (Buffer("A", (Var("M"), Var("K")), "float32", "global"),),
                    (Buffer("A_s", (Const(2), Const(2)), "float32", "shared"),), (), body, (("M", 4), ("K", 32)))
    (node,) = constant_comparisons(kernel)
    assert str(node) == "min(ceildiv(K, 2), 8)"
    assert comparison_case(node, {"K": 32}, {}) == 1 and comparison_case(node, {"K": 16}, {}) == 0


def test_a_float8_output_differing_only_where_torch_converts_alike_is_no_violation(reports):
    report, _ = reports["fp8_output.py"]
    assert report.verdict != "violations", [d.message for d in report.diagnostics]
