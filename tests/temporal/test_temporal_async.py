"""Async collectives and p2p: handles must be waited before their buffers are used."""
from verifier.report import VERIFIED, VIOLATIONS

from .support import check_vir, only


def test_read_of_async_result_before_wait_names_read_and_async_lines():
    report = check_vir("""
        mesh tp=2
        input x: f32[4, 8]
        h = matmul(x, x) at 3
        y = all_reduce(h, mesh_dim=tp, op=sum, handle=w) at 4
        z = relu(y) at 5
        wait(handle=w) at 6
        output z
    """)
    assert report.verdict == VIOLATIONS
    diagnostic = only(report, "async")
    assert diagnostic.line == 5
    assert "reads `y` before wait(handle=w)" in diagnostic.message
    assert "line 4" in diagnostic.message


def test_read_of_async_input_buffer_before_wait_is_a_race():
    report = check_vir("""
        mesh tp=2
        input x: f32[4, 8]
        h = matmul(x, x) at 3
        y = all_reduce(h, mesh_dim=tp, handle=w) at 4
        z = relu(h) at 5
        wait(handle=w) at 6
        output y
    """)
    assert only(report, "async").line == 5


def test_compute_overlapping_an_async_all_reduce_is_verified():
    report = check_vir("""
        mesh tp=2
        input x: f32[4, 8]
        input w2: f32[8, 8]
        h = matmul(x, x) at 3
        y = all_reduce(h, mesh_dim=tp, handle=w) at 4
        k = matmul(x, w2) at 5
        wait(handle=w) at 6
        z = add(y, k) at 7
        output z
    """)
    assert report.verdict == VERIFIED, report.diagnostics
    assert any("async op" in claim for claim in report.proven)


def test_handle_never_waited_is_reported_at_the_async_op():
    report = check_vir("""
        mesh tp=2
        input x: f32[4]
        y = all_gather(x, mesh_dim=tp, dim=0, handle=g) at 7
        output x
    """)
    diagnostic = only(report, "async")
    assert diagnostic.line == 7
    assert "never waited" in diagnostic.message


def test_wait_on_unknown_handle_is_reported_at_the_wait():
    report = check_vir("""
        mesh tp=2
        input x: f32[4]
        y = all_reduce(x, mesh_dim=tp, handle=a) at 3
        wait(handle=a) at 4
        wait(handle=b) at 5
        output y
    """)
    diagnostic = only(report, "async")
    assert diagnostic.line == 5
    assert "wait(handle=b)" in diagnostic.message


def test_two_in_flight_async_ops_writing_one_buffer_are_reported():
    report = check_vir("""
        mesh tp=2
        input x: f32[4]
        y = all_reduce(x, mesh_dim=tp, handle=a) at 3
        z = all_reduce(x, mesh_dim=tp, op=max, handle=b) at 4
        wait(handle=a) at 5
        wait(handle=b) at 6
        output z
    """)
    diagnostic = only(report, "async")
    assert diagnostic.line == 4
    assert "two in-flight async ops write buffer `x`" in diagnostic.message
    assert "line 3" in diagnostic.message


def test_async_op_under_when_but_wait_on_every_rank_is_an_unknown_handle_on_the_others():
    report = check_vir("""
        mesh tp=2
        input x: f32[4]
        y = all_reduce(x, mesh_dim=tp, handle=a, when="tp == 0") at 3
        wait(handle=a) at 4
        output y
    """)
    diagnostic = only(report, "async")
    assert diagnostic.line == 4
    assert "(on rank 1)" in diagnostic.message


def test_irecv_result_read_before_its_wait_is_a_race():
    report = check_vir("""
        mesh tp=2
        input x: f32[4]
        isend(x, peer=1-tp, mesh_dim=tp, handle=s) at 3
        y = irecv(peer=1-tp, mesh_dim=tp, shape=[4], dtype=f32, handle=r) at 4
        z = add(x, y) at 5
        wait(handle=s) at 6
        wait(handle=r) at 7
        output z
    """)
    assert only(report, "async").line == 5
