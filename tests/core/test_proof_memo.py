"""Claims remembered up to a renaming of their unknowns: equal keys only for true renamings."""
import z3

from verifier.proof_memo import ProofMemo
from verifier.traced_check import _decide


def _lookup(i, column):
    return z3.If(i == 0, column[0], z3.If(i == 1, column[1], column[2]))


def _masked(i, column):  # two shards of a vocabulary of 3 summed: [0, 2) and [2, 3)
    return z3.If(i < 2, z3.If(i == 0, column[0], column[1]), 0) + z3.If(i >= 2, column[2], 0)


def _table(rows, columns):
    return [[z3.Real(f"w[{r},{c}]") for r in range(rows)] for c in range(columns)]


def test_elements_of_an_element_wise_claim_share_one_key():
    ids = z3.Ints("ids[0] ids[1]")
    columns = _table(3, 2)
    domain = [v >= 0 for v in ids] + [v < 3 for v in ids]
    memo = ProofMemo(domain, {})
    keys = {memo.key(_lookup(i, c) != _masked(i, c)) for i in ids for c in columns}
    assert len(keys) == 1 and None not in keys


def test_a_different_constant_sort_or_domain_gives_another_key():
    i, j = z3.Ints("i j")
    w = z3.Reals("a b c")
    memo = ProofMemo([i >= 0, i < 3, j >= 0, j < 4], {})
    base = memo.key(_lookup(i, w) != w[0])
    assert memo.key(z3.If(i == 1, w[0], w[1]) != w[0]) != memo.key(z3.If(i == 0, w[0], w[1]) != w[0])
    assert memo.key(_lookup(j, w) != w[0]) != base  # j ranges over [0, 4), i over [0, 3)
    x, y = z3.Ints("x y")
    p, q = z3.Reals("p q")
    assert memo.key(x + y != y + x) != memo.key(p + q != q + p)


def test_a_renamed_claim_is_not_asked_again_and_a_false_one_still_is():
    ids = z3.Ints("ids[0] ids[1] ids[2]")
    columns = _table(3, 4)
    domain = [v >= 0 for v in ids] + [v < 3 for v in ids]
    tally = {}
    memo = ProofMemo(domain, tally)
    equal = [_lookup(i, c) != _masked(i, c) for i in ids for c in columns]
    assert _decide(equal, domain, 10.0, memo=memo) == ("proven", None)
    assert tally["renamings_skipped"] == len(equal) - 1
    wrong = [_lookup(ids[0], c) != z3.If(ids[0] < 2, z3.If(ids[0] == 0, c[0], c[1]), 0) for c in columns]
    status, model = _decide(equal + wrong, domain, 10.0, memo=memo)
    assert status == "sat" and model.eval(ids[0]).as_long() == 2


def test_an_undecided_claim_is_not_proven():
    x = z3.Real("x")
    # Z3 answers unknown on this (an exponent it cannot reason about): neither proven nor refuted
    assert _decide([z3.RealVal(1) != 1, 2 ** x != 3], [x * x == x + 1], 5.0)[0] == "unknown"
