"""Collective order: all members of a process group issue the same collectives in order."""
from verifier.report import VERIFIED, VIOLATIONS

from .support import check_vir, only


def test_all_reduces_swapped_under_when_are_out_of_order_naming_both_lines():
    report = check_vir("""
        mesh tp=2
        input a: f32[4]
        input b: f32[4]
        a1 = all_reduce(a, mesh_dim=tp, when="tp == 0") at 10
        b1 = all_reduce(b, mesh_dim=tp, when="tp == 0") at 11
        b2 = all_reduce(b, mesh_dim=tp, when="tp != 0") at 12
        a2 = all_reduce(a, mesh_dim=tp, when="tp != 0") at 13
        output a2
    """)
    assert report.verdict == VIOLATIONS
    diagnostic = only(report, "collective-order")
    assert diagnostic.line == 10
    assert "at line 10" in diagnostic.message and "at line 12" in diagnostic.message


def test_different_reduce_ops_at_the_same_position_are_out_of_order():
    report = check_vir("""
        mesh tp=2
        input a: f32[4]
        s = all_reduce(a, mesh_dim=tp, op=sum, when="tp == 0") at 4
        m = all_reduce(a, mesh_dim=tp, op=max, when="tp == 1") at 5
        output a
    """)
    diagnostic = only(report, "collective-order")
    assert "op=sum" in diagnostic.message and "op=max" in diagnostic.message


def test_same_collectives_in_the_same_order_on_a_2d_mesh_are_verified():
    report = check_vir("""
        mesh dp=2, tp=2
        input x: f32[4]
        h = all_reduce(x, mesh_dim=tp) at 3
        g = all_gather(h, mesh_dim=dp, dim=0) at 4
        r = reduce_scatter(g, mesh_dim=dp, dim=0) at 5
        output r
    """)
    assert report.verdict == VERIFIED, report.diagnostics
    assert any("4 groups" in claim for claim in report.proven)


def test_swap_in_every_tp_group_of_a_2d_mesh_is_one_diagnostic():
    report = check_vir("""
        mesh dp=2, tp=2
        input a: f32[4]
        input b: f32[4]
        a1 = all_reduce(a, mesh_dim=tp, when="tp == 0") at 10
        b1 = all_reduce(b, mesh_dim=tp) at 11
        a2 = all_reduce(a, mesh_dim=tp, when="tp == 1") at 12
        output b1
    """)
    diagnostic = only(report, "collective-order")
    assert "(on every rank)" in diagnostic.message


def test_collective_skipped_by_one_member_is_never_matched():
    report = check_vir("""
        mesh tp=2
        input x: f32[4]
        y = all_reduce(x, mesh_dim=tp) at 3
        z = all_reduce(y, mesh_dim=tp, when="tp == 0") at 4
        output z
    """)
    diagnostic = only(report, "collective-order")
    assert diagnostic.line == 4
    assert "rank 0 issues 2 collective(s)" in diagnostic.message


def test_branches_issuing_the_same_collective_on_the_same_value_are_consistent():
    report = check_vir("""
        mesh tp=2
        input x: f32[4]
        y = all_reduce(x, mesh_dim=tp, when="tp == 0") at 3
        z = all_reduce(x, mesh_dim=tp, when="tp == 1") at 5
        output x
    """)
    assert report.verdict == VERIFIED, report.diagnostics


def test_unevaluable_when_predicate_makes_the_verdict_unsupported():
    report = check_vir("""
        mesh tp=2
        input x: f32[4]
        y = all_reduce(x, mesh_dim=tp, when="pp == 0") at 3
        output y
    """)
    assert report.verdict == "unsupported"
    assert only(report, "unsupported").line == 3
