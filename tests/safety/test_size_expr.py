"""Size expressions from user files and model answers are parsed by our own grammar, never evaluated."""
from __future__ import annotations

import pytest
import sympy as sp

from frontends.sizes import to_sym
from frontends.values import UserError
from verifier.size_expr import MAX_DEPTH, MAX_LENGTH, BinOp, Name, Num, SizeExprError, parse_size_expr

PAYLOADS = [
    "__import__('os').system('touch MARK') or 4",
    "exec('1')",
    "().__class__.__bases__[0]",
    "lambda: 1",
    "a.b",
    "x[0]",
    "4 if 1 else 2",
    "1; 2",
    "'4'",
    "1.5",
]


def test_grammar_reads_arithmetic_over_ints_and_names():
    assert parse_size_expr(" N // tp + 2*3 ") == BinOp("+", BinOp("//", Name("N"), Name("tp")),
                                                       BinOp("*", Num(2), Num(3)))


def test_text_sizes_are_numbers_only():
    assert to_sym("4") == 4
    assert to_sym("(3 + 2) * 2 - 1") == 9
    assert to_sym("2**3 % 5") == 3
    with pytest.raises(UserError, match="without quotes"):
        to_sym("N")  # a string names no variable


@pytest.mark.parametrize("payload", PAYLOADS)
def test_anything_else_is_an_error_with_a_column(payload):
    with pytest.raises(SizeExprError) as error:
        parse_size_expr(payload)
    assert error.value.column >= 1


def test_limits_are_checked_before_parsing():
    with pytest.raises(SizeExprError, match="characters"):
        parse_size_expr("1+" * MAX_LENGTH + "1")
    with pytest.raises(SizeExprError, match="nesting"):
        parse_size_expr("(" * (MAX_DEPTH + 1) + "1" + ")" * (MAX_DEPTH + 1))
    with pytest.raises(SizeExprError, match="exponent"):
        parse_size_expr("2**10**10")
    with pytest.raises(SizeExprError, match="digits"):
        parse_size_expr("9" * 40)


def test_non_text_values_never_go_through_str(tmp_path):
    class Sneaky:
        def __str__(self) -> str:
            return "__import__('os').system('touch MARK')"

    with pytest.raises(UserError):
        to_sym(Sneaky())
    assert to_sym([1, "2"]) == [1, 2]
    assert to_sym(None) is None
