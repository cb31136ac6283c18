"""Point-to-point messages: FIFO matching per rank pair, and deadlock freedom (rendezvous)."""
from verifier.report import VERIFIED, VIOLATIONS

from .support import check_vir, only


def test_recv_before_send_on_both_ranks_deadlocks_naming_the_cycle_and_lines():
    report = check_vir("""
        mesh tp=2
        input x: f32[4]
        y = recv(peer=1-tp, mesh_dim=tp, shape=[4], dtype=f32) at 3
        send(x, peer=1-tp, mesh_dim=tp) at 4
        output y
    """)
    assert report.verdict == VIOLATIONS
    diagnostic = only(report, "deadlock")
    assert diagnostic.line == 3
    assert "cycle rank 0 -> rank 1 -> rank 0" in diagnostic.message
    assert "rank 0 is blocked in recv from rank 1 at line 3" in diagnostic.message
    assert "rank 1 is blocked in recv from rank 0 at line 3" in diagnostic.message
    assert diagnostic.repair_line == 3   # no rank sends first: the fix goes at the first receive


def _tag_order(recv_tags: tuple[int, int]):
    return check_vir(f"""
        mesh tp=2
        input x: f32[4]
        send(x, peer=1, mesh_dim=tp, tag=0, when="tp == 0") at 3
        send(x, peer=1, mesh_dim=tp, tag=1, when="tp == 0") at 4
        y = recv(peer=0, mesh_dim=tp, shape=[4], dtype=f32, tag={recv_tags[0]}, when="tp == 1") at 5
        z = recv(peer=0, mesh_dim=tp, shape=[4], dtype=f32, tag={recv_tags[1]}, when="tp == 1") at 6
        output y
    """)


def test_receives_posted_in_another_tag_order_than_the_sends_deadlock_repaired_at_the_receive():
    """Rank 0 blocks sending tag 0 while rank 1 blocks receiving tag 1 first (a pipeline's micro-batches
    received in reverse): the finding is at the blocked send, the repair at the receive out of order."""
    diagnostic = only(_tag_order((1, 0)), "deadlock")
    assert (diagnostic.line, diagnostic.repair_line) == (3, 5), diagnostic
    assert "rank 1 is blocked in recv from rank 0 with tag 1 at line 5" in diagnostic.message


def test_receives_in_the_sends_tag_order_are_deadlock_free():
    report = _tag_order((0, 1))
    assert report.verdict == VERIFIED, report.diagnostics


def test_send_first_on_one_side_and_recv_first_on_the_other_is_deadlock_free():
    report = check_vir("""
        mesh tp=2
        input x: f32[4]
        send(x, peer=1, mesh_dim=tp, when="tp == 0") at 3
        y = recv(peer=1-tp, mesh_dim=tp, shape=[4], dtype=f32) at 4
        send(x, peer=0, mesh_dim=tp, when="tp == 1") at 5
        output y
    """)
    assert report.verdict == VERIFIED, report.diagnostics
    assert any("deadlock-free" in claim for claim in report.proven)


def test_ring_exchange_with_isend_irecv_is_verified():
    report = check_vir("""
        mesh tp=4
        input x: f32[4]
        isend(x, peer=(tp+1)%tp_size, mesh_dim=tp, handle=s) at 3
        y = irecv(peer=(tp+tp_size-1)%tp_size, mesh_dim=tp, shape=[4], dtype=f32, handle=r) at 4
        wait(handle=s) at 5
        wait(handle=r) at 6
        z = add(x, y) at 7
        output z
    """)
    assert report.verdict == VERIFIED, report.diagnostics
    assert any("4 point-to-point messages matched" in claim for claim in report.proven)


def test_ring_exchange_with_blocking_sends_deadlocks_under_rendezvous_semantics():
    report = check_vir("""
        mesh tp=4
        input x: f32[4]
        send(x, peer=(tp+1)%tp_size, mesh_dim=tp) at 3
        y = recv(peer=(tp+tp_size-1)%tp_size, mesh_dim=tp, shape=[4], dtype=f32) at 4
        output y
    """)
    diagnostic = only(report, "deadlock")
    assert "cycle rank 0 -> rank 1 -> rank 2 -> rank 3 -> rank 0" in diagnostic.message
    assert "rendezvous" in diagnostic.hint


def test_send_without_matching_recv_is_unmatched():
    report = check_vir("""
        mesh tp=2
        input x: f32[4]
        send(x, peer=1, mesh_dim=tp, when="tp == 0") at 3
        output x
    """)
    diagnostic = only(report, "p2p")
    assert diagnostic.line == 3
    assert "no matching recv on rank 1" in diagnostic.message
    assert not any("deadlock-free" in claim for claim in report.proven)


def test_recv_without_matching_send_is_unmatched():
    report = check_vir("""
        mesh tp=2
        input x: f32[4]
        y = recv(peer=0, mesh_dim=tp, shape=[4], dtype=f32, when="tp == 1") at 6
        output x
    """)
    diagnostic = only(report, "p2p")
    assert diagnostic.line == 6
    assert "no matching send on rank 0" in diagnostic.message


def test_peer_outside_the_mesh_dim_is_reported():
    report = check_vir("""
        mesh tp=2
        input x: f32[4]
        y = recv(peer=tp-1, mesh_dim=tp, shape=[4], dtype=f32, when="tp == 1") at 3
        send(x, peer=tp+1, mesh_dim=tp) at 4
        output y
    """)
    found = [d for d in report.diagnostics if d.check == "p2p"]
    assert any(d.line == 4 and "evaluates to 2, outside tp (size 2)" in d.message for d in found), found


def test_peer_along_one_mesh_dim_keeps_the_other_coordinates():
    report = check_vir("""
        mesh pp=2, tp=2
        input x: f32[4]
        send(x, peer=1, mesh_dim=pp, when="pp == 0") at 3
        y = recv(peer=0, mesh_dim=pp, shape=[4], dtype=f32, when="pp == 1") at 4
        output x
    """)
    assert report.verdict == VERIFIED, report.diagnostics
    assert any("2 point-to-point messages matched" in claim for claim in report.proven)


def test_recv_waiting_on_a_rank_stuck_in_a_collective_is_a_deadlock():
    report = check_vir("""
        mesh tp=2
        input x: f32[4]
        y = recv(peer=1, mesh_dim=tp, shape=[4], dtype=f32, when="tp == 0") at 3
        z = all_reduce(x, mesh_dim=tp) at 4
        send(z, peer=0, mesh_dim=tp, when="tp == 1") at 5
        output z
    """)
    diagnostic = only(report, "deadlock")
    assert "rank 0 is blocked in recv from rank 1 at line 3" in diagnostic.message
    assert "rank 1 is blocked in all_reduce(x, op=sum) over tp at line 4" in diagnostic.message


def test_a_tag_mismatch_is_named_first_at_the_side_asking_for_another_tag():
    """Sends with tags 1, 2 (a micro-batch's index plus one) against receives with 0, 1: tag 1 meets, the
    send with tag 2 and the receive with tag 0 are left; both are listed, the send first (tag 2 is not the
    default 0, so that side chose it), and each says the tags differ."""
    for sends, recvs, first in (((1, 2), (0, 1), 3), ((0, 1), (1, 2), 5)):
        report = check_vir(f"""
            mesh tp=2
            input x: f32[4]
            send(x, peer=1, mesh_dim=tp, tag={sends[0]}, when="tp == 0") at 3
            send(x, peer=1, mesh_dim=tp, tag={sends[1]}, when="tp == 0") at 3
            y = recv(peer=0, mesh_dim=tp, shape=[4], dtype=f32, tag={recvs[0]}, when="tp == 1") at 5
            z = recv(peer=0, mesh_dim=tp, shape=[4], dtype=f32, tag={recvs[1]}, when="tp == 1") at 5
            output x
        """)
        found = [d for d in report.diagnostics if d.check == "p2p"]
        assert [d.line for d in found] == [first, 8 - first], found
        assert all("the tags differ" in d.message for d in found), found
        assert "is not the default 0" in found[0].message and "is not the default 0" not in found[1].message
