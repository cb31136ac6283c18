"""Integer inputs whose recorded values hold a padding label (-100) besides [0, VOCAB): the tool took
the file's VOCAB as the labels' whole domain, so the padding never occurred in its proof or its random
inputs - a mean of per-rank means (right only when every rank holds as many real tokens) ended
unsupported instead of a violation, and the right loss was proven only for batches without padding.
The recorded sentinel stays a possible value (``TensorSpec.extra_values``), and a sum of quotients by
one divisor equals the quotient of the sum (``verifier/common_divisors.py``), which the right loss,
divided by the all-reduced count of real tokens, needs.  Twin cases, gloo ground truth (1 vs 2 ranks)."""
from __future__ import annotations

import numpy as np
import pytest
import z3
from case_runs import CASES, MATCH, MISMATCH, first_error, gloo_statuses, marked_line, translate

from verifier.common_divisors import quotients_combine
from verifier.equivalence import integer_domain, random_values
from verifier.ir import TensorSpec

OK, BUG = "z2_token_loss_global_count_ok.py", "z2_token_loss_mean_of_means_bug.py"


def test_a_sum_of_quotients_by_one_divisor_is_the_quotient_of_the_sum():
    a, b, d, e = z3.Reals("a b d e")
    assert quotients_combine(a / d + b / d - (a + b) / d)
    assert quotients_combine(a / (d + e) + b / (e + d) - (a + b) / (d + e))   # divisors compared in normal form
    assert not quotients_combine(a / d + b / e - (a + b) / d)
    assert not quotients_combine(a / d * d - a)   # never cancels a divisor against itself (d may be 0)
    assert not quotients_combine(a - b)


def test_an_integer_input_takes_its_extra_values_in_proofs_and_random_draws():
    spec = TensorSpec("labels", (50,), "i64", bounds=(0, 5), extra_values=(-100,))
    x = z3.Int("x")
    allowed = z3.And(*integer_domain(x, spec))
    assert z3.Solver().check(allowed, x == -100) == z3.sat
    assert z3.Solver().check(allowed, x == -5) == z3.unsat
    drawn = random_values([spec], seed=0)["labels"]
    assert set(np.unique(drawn)) <= {-100, 0, 1, 2, 3, 4} and (drawn == -100).any()


@pytest.mark.torch
def test_the_right_loss_is_verified_with_padding_in_its_domain():
    pytest.importorskip("torch")
    code, body = translate(OK)
    assert (code, body["verdict"]) == (0, "verified"), body["diagnostics"]
    assert any("labels takes values in [0, 5) (VOCAB) or -100" in d["message"] for d in body["diagnostics"])


@pytest.mark.torch
def test_the_mean_of_means_is_a_violation_at_its_line_torch_reproduces():
    pytest.importorskip("torch")
    first = first_error(BUG)
    assert "reproduced by torch" in first["message"], first
    assert first["line"] == marked_line(CASES / BUG), first


@pytest.mark.torch
def test_gloo_runs_back_the_twins():
    pytest.importorskip("torch")
    statuses = gloo_statuses([OK, BUG])
    assert statuses[OK][0] == MATCH, statuses
    assert statuses[BUG][0] == MISMATCH, statuses
