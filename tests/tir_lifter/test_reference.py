"""Traced references (``reference.py``): the file's own reference re-run by torch at the
reduced sizes, its extra arguments bound as the call site gave them."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tir_lifter.backends import FloatBackend, Z3Backend  # noqa: E402
from tir_lifter.reference import Argument, TracedSpec  # noqa: E402
from tir_lifter.spec import SpecError  # noqa: E402


def _scale_rows(x, n_cols, eps):
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) / n_cols + eps)


def _spec(func, arguments, real_shapes) -> TracedSpec:
    return TracedSpec(text="B = f(A)", inputs=("A",), outputs=("B",), origin="f", func=func, arguments=arguments,
                      real_shapes=real_shapes, dtypes={"A": torch.float32}, path=__file__)


def test_an_integer_argument_equal_to_a_real_size_takes_the_reduced_size():
    spec = _spec(_scale_rows, (Argument("x", "A"), Argument("n_cols", value=40), Argument("eps", value=1e-6)),
                 {"A": (48, 40)})
    x = np.arange(1.0, 7.0).reshape(2, 3)
    got = spec.evaluate({"A": x.astype(object)}, FloatBackend())["B"]
    want = x / np.sqrt((x * x).sum(-1, keepdims=True) / 3 + 1e-6)
    assert np.allclose(np.asarray(got, dtype=float), want)


def test_an_integer_argument_matching_dimensions_reduced_apart_is_refused():
    spec = _spec(_scale_rows, (Argument("x", "A"), Argument("n_cols", value=40), Argument("eps", value=1e-6)),
                 {"A": (40, 40)})
    with pytest.raises(SpecError, match="reduced to different sizes"):
        spec.evaluate({"A": np.zeros((2, 3), dtype=object)}, FloatBackend())


def test_an_integer_argument_named_like_a_kernel_size_takes_its_reduced_value():
    # GQA: ref(Q, K, groups=16) asserts Q heads == K heads * groups; heads and groups are reduced
    def grouped_sum(x, groups):
        assert x.shape[0] % groups == 0, (x.shape[0], groups)
        return x.reshape(groups, -1).sum(0)
    spec = _spec(grouped_sum, (Argument("x", "A"), Argument("groups", value=16)), {"A": (64,)})
    spec.named_sizes = {"groups": (16, 3), "heads": (64, 6)}
    got = spec.evaluate({"A": np.arange(6.0).astype(object)}, FloatBackend())["B"]
    assert np.allclose(np.asarray(got, dtype=float), np.arange(6.0).reshape(3, 2).sum(0))
    spec.named_sizes = {"groups": (None, 3)}  # no real value: nothing says the argument is that size
    with pytest.raises(SpecError, match="failed"):
        spec.evaluate({"A": np.arange(6.0).astype(object)}, FloatBackend())


def test_the_symbolic_run_gives_terms_over_the_kernel_inputs():
    import z3
    spec = _spec(lambda x, scale: scale * x.T, (Argument("x", "A"), Argument("scale", value=0.5)), {"A": (4, 2)})
    a = np.array([[z3.Real(f"a{i}{j}") for j in range(2)] for i in range(2)], dtype=object)
    got = spec.evaluate({"A": a}, Z3Backend())["B"]
    solver = z3.Solver()
    solver.add(got[0, 1] != 0.5 * a[1, 0])
    assert solver.check() == z3.unsat


def test_a_reference_returning_the_wrong_number_of_outputs_is_refused():
    spec = _spec(lambda x: (x, x), (Argument("x", "A"),), {"A": (4, 2)})
    with pytest.raises(SpecError, match="returned 2 value"):
        spec.evaluate({"A": np.zeros((2, 2), dtype=object)}, FloatBackend())
