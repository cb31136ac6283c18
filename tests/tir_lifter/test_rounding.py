"""Rounding to float16 / bfloat16 / float8 (verifier/rules/casts.py ``convert``), against torch's casts.

NumPy rounds every value, Z3 every numeral the same way; on other terms Z3 applies an
uninterpreted rounding, which the lifter takes as the identity where the value only flows
on to an output and keeps where a conversion to an integer reads it.
"""
from __future__ import annotations

import numpy as np
import pytest
import z3
from lifter_helpers import EXAMPLES

FORMATS = [("float16", "float16"), ("bfloat16", "bfloat16"), ("float8_e4m3fn", "float8_e4m3fn"),
           ("float8_e5m2", "float8_e5m2")]
TIES_AND_EDGES = [0.5, 1.5, 2.5, 1 + 2 ** -11, 1 + 3 * 2 ** -11, 1 + 2 ** -8, 1 + 3 * 2 ** -8, 65504.0, 65519.0,
                  65520.0, 1e5, 2 ** -24, 2 ** -25, 3 * 2 ** -26, 2 ** -133, 448.0, 460.0, 464.0, 500.0, 57344.0,
                  61440.0, 1e-8, 2 ** -10, 1.5 * 2 ** -9, 2 ** -17, 3.0e38, 3.4e38]


def _values() -> np.ndarray:
    rng = np.random.default_rng(0)
    spread = rng.standard_normal(2000) * np.exp(rng.uniform(-30, 30, 2000))
    values = np.concatenate([spread, TIES_AND_EDGES])
    return np.concatenate([values, -values]).astype(np.float32).astype(np.float64)


def _convert(backend, values, target: str):
    from verifier.registry import get_rule
    return get_rule("convert").evaluate(backend, [values], {"dtype": target, "source": "float32"}, None)[0]


@pytest.mark.torch
@pytest.mark.parametrize("target,torch_name", FORMATS)
def test_numpy_rounding_equals_torchs_cast(target, torch_name):
    torch = pytest.importorskip("torch")
    from verifier.backends import NumpyBackend
    values = _values()
    ours = _convert(NumpyBackend(), values, target)
    source = torch.tensor(values, dtype=torch.float32)
    if target.startswith("float8"):  # torch's float8 casts do not saturate; TileLang's (and ours) do
        limit = 448.0 if "e4m3" in target else 57344.0
        source = source.clamp(-limit, limit)
    theirs = source.to(getattr(torch, torch_name)).double().numpy()
    same = (ours == theirs) | (np.isnan(ours) & np.isnan(theirs))
    assert same.all(), [(v, o, t) for v, o, t in zip(values[~same], ours[~same], theirs[~same])][:5]


@pytest.mark.parametrize("target", [f for f, _ in FORMATS])
def test_z3_rounds_every_numeral_as_numpy_does(target):
    from verifier.backends import NumpyBackend, Z3Backend
    values = _values()[::13]
    concrete = _convert(NumpyBackend(), values, target)
    symbolic = _convert(Z3Backend(), np.array([z3.RealVal(float(v)) for v in values], dtype=object), target)
    for value, want, term in zip(values, concrete, symbolic):
        term = z3.simplify(term)
        if np.isfinite(want):
            assert z3.is_rational_value(term) and float(term.as_fraction()) == want, (value, want, term)
        else:  # float16 / bfloat16 overflow to inf: no real number, the rounding stays uninterpreted
            assert term.decl().name().startswith("round_"), (value, term)


def test_saturating_float8_and_ties_to_even():
    from verifier.rules.casts import round_value
    assert round_value(1000.0, "e4m3") == 448.0 and round_value(-1e9, "e5m2") == -57344.0
    assert round_value(1 + 2 ** -11, "float16") == 1.0 and round_value(1 + 3 * 2 ** -11, "float16") == 1 + 2 ** -9
    assert round_value(65520.0, "float16") == float("inf") and round_value(65519.0, "float16") == 65504.0
    assert round_value(2 ** -25, "float16") == 0.0 and round_value(3 * 2 ** -26, "float16") == 2 ** -24


def test_a_rounding_flowing_to_an_output_is_the_identity_and_one_read_by_an_integer_conversion_is_kept():
    from tir_lifter.backends import Z3Backend, identity_roundings
    backend, x = Z3Backend(), z3.Real("x")
    half = backend.convert(x * 2, "float32", "float16")
    stripped, rounded = identity_roundings(half + 1)
    assert rounded and z3.simplify(stripped - (x * 2 + 1)).eq(z3.RealVal(0)), stripped
    as_int = backend.convert(half, "float16", "int32")
    stripped, _ = identity_roundings(as_int)
    assert "rounded_float16" in str(stripped) and "round_float16(" not in str(stripped)


@pytest.fixture(scope="module")
def quantize_reports(tmp_path_factory):
    pytest.importorskip("tilelang")
    from tir_lifter.elaborate_run import report_from_json, run_batch
    source = (EXAMPLES / "quantize_scale.py").read_text()
    old = "T.Cast(T.int32, T.clamp(A_shared[i, j] * 64.0, -32768.0, 32767.0))"
    folder = tmp_path_factory.mktemp("rounding")
    paths = {"right": str(EXAMPLES / "quantize_scale.py")}
    for fmt in ("float16", "bfloat16"):
        assert old in source
        path = folder / f"quantize_via_{fmt}.py"
        path.write_text(source.replace(old, f"T.Cast(T.int32, T.Cast(T.{fmt}, {old[len('T.Cast(T.int32, '):-1]}))"))
        paths[fmt] = str(path)
    bodies = {b["file"]: b for b in run_batch(list(paths.values()), timeout=900.0)}
    return {name: report_from_json(bodies[path]) for name, path in paths.items()}


@pytest.mark.tilelang
def test_truncating_the_float32_value_is_verified(quantize_reports):
    report = quantize_reports["right"]
    assert report.verdict == "verified", [d.message for d in report.diagnostics]


@pytest.mark.tilelang
@pytest.mark.parametrize("fmt", ["float16", "bfloat16"])
def test_rounding_to_a_narrow_float_before_truncating_is_a_confirmed_violation_at_that_line(quantize_reports, fmt):
    report = quantize_reports[fmt]
    (spec,) = [d for d in report.diagnostics if d.check == "spec"]
    assert report.verdict == "violations" and spec.counterexample.confirmed
    assert spec.line == 24 and "converts the value to a narrower type" in spec.message


def test_the_float_recheck_follows_the_proof_exact_values_flow_on_an_integer_conversion_reads_them_rounded():
    from tir_lifter.backends import FloatBackend
    backend = FloatBackend()
    half = backend.convert(200.97, "float32", "float16")
    assert float(half) == 200.97 and half.rounded == 201.0  # a float16 output compares as the exact value
    scaled = backend.mul(half, 1.0)
    assert backend.convert(scaled, "float32", "int32") == 201.0  # rounded before the truncation, as compiled
    assert backend.convert(200.97, "float32", "int32") == 200.0


def test_a_truncation_z3_leaves_undecided_is_shown_on_fractions(write_kernel, monkeypatch):
    """A float truncated toward zero through int32 (no narrow float anywhere) changes nothing on the
    small integers the concrete fallback draws: when Z3 gives up (here: a time limit of 1 ms),
    fractions must be tried too, or the verdict depends on whether the solver finished in time."""
    import tir_lifter.checks as checks
    from tir_lifter import run_lift

    source = (EXAMPLES / "two_pass_softmax.py").read_text()
    line = next(n for n, text in enumerate(source.splitlines(), 1) if "lse[i] = row_max[i]" in text)
    path = write_kernel(source.replace("lse[i] = row_max[i]", 'lse[i] = T.Cast("float32", T.Cast("int32", row_max[i]))'))
    monkeypatch.setattr(checks, "_SOLVER_TIMEOUT_MS", 1)
    report = run_lift(path, frontend="text")
    assert report.verdict == "violations", [d.message for d in report.diagnostics]
    assert [d.line for d in report.diagnostics if d.check == "spec"] == [line]
