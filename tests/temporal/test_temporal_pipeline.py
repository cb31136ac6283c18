"""Pipeline schedules: generated ones verify; seeded bugs are found by the right check."""
import pytest
from hypothesis import given, settings, strategies as st

from verifier.temporal import (Action, Schedule, ScheduleError, analyse_schedule, format_schedule, generate,
                               gpipe, interleaved_1f1b, one_f_one_b, parse_schedule)


def checks_of(schedule: Schedule) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for diagnostic in analyse_schedule(schedule).diagnostics:
        found.setdefault(diagnostic.check, []).append(diagnostic.message)
    return found


def replace(schedule: Schedule, rank: int, old: str, new: Action | None) -> Schedule:
    """``schedule`` with the action printed as ``old`` on ``rank`` replaced (or dropped)."""
    actions = list(schedule.ranks[rank])
    index = [str(action) for action in actions].index(old)
    actions[index:index + 1] = [new] if new is not None else []
    return schedule.with_rank(rank, actions)


@pytest.mark.parametrize("stages,microbatches", [(1, 3), (2, 2), (4, 8), (4, 2), (8, 16)])
def test_gpipe_is_verified(stages, microbatches):
    result = analyse_schedule(gpipe(stages, microbatches))
    assert result.ok, [d.message for d in result.diagnostics]
    assert any("deadlock-free" in claim for claim in result.proven)


@pytest.mark.parametrize("stages,microbatches", [(1, 3), (2, 2), (3, 5), (4, 8), (4, 2), (8, 16)])
def test_1f1b_is_verified(stages, microbatches):
    result = analyse_schedule(one_f_one_b(stages, microbatches))
    assert result.ok, [d.message for d in result.diagnostics]
    assert any("exactly once" in claim for claim in result.proven)


@pytest.mark.parametrize("stages,microbatches,chunks", [(2, 4, 2), (4, 4, 2), (4, 8, 2), (3, 6, 3), (4, 16, 4)])
def test_interleaved_1f1b_is_verified(stages, microbatches, chunks):
    schedule = interleaved_1f1b(stages, microbatches, chunks)
    result = analyse_schedule(schedule)
    assert result.ok, [d.message for d in result.diagnostics]
    assert f"{stages * chunks} virtual stages" in result.proven[0]


def test_interleaved_1f1b_rejects_microbatches_not_divisible_by_stages():
    with pytest.raises(ValueError, match="divisible"):
        interleaved_1f1b(4, 6, 2)


def test_1f1b_runs_at_most_stages_forwards_ahead_on_the_first_rank():
    actions = [str(action) for action in one_f_one_b(4, 8).ranks[0] if action.kind in ("F", "B")]
    assert actions[:5] == ["F0", "F1", "F2", "F3", "B0"]


def test_send_to_the_wrong_neighbour_is_found():
    schedule = replace(one_f_one_b(4, 4), 1, "isend_act(2, to=2)", Action("isend_act", 2, 0, 3))
    messages = checks_of(schedule)["pipeline"]
    assert any("wrong neighbour: virtual stage 2 lives on rank 2, not rank 3" in m for m in messages), messages


def test_missing_microbatch_is_found():
    schedule = replace(one_f_one_b(4, 4), 0, "F3", None)
    schedule = replace(schedule, 0, "isend_act(3, to=1)", None)
    found = checks_of(schedule)
    assert any("never runs forward of microbatch(es) 3 on virtual stage 0" in m for m in found["pipeline"]), found
    assert any("no matching send" in m for m in found["p2p"]), found


def test_microbatch_missing_everywhere_is_found_from_the_declared_count():
    schedule = one_f_one_b(2, 2)
    declared = Schedule(2, 3, 1, schedule.ranks)
    messages = checks_of(declared)["pipeline"]
    assert any("microbatch(es) 2" in m for m in messages), messages


def test_1f1b_with_blocking_sends_deadlocks():
    schedule = one_f_one_b(4, 4)
    blocking = tuple(tuple(Action(a.kind[1:], a.microbatch, a.chunk, a.peer) if a.kind.startswith("isend") else a
                           for a in actions) for actions in schedule.ranks)
    found = checks_of(Schedule(4, 4, 1, blocking))
    assert list(found) == ["deadlock"], found
    assert "cycle rank 2 -> rank 3 -> rank 2" in found["deadlock"][0]


def test_backward_before_forward_is_found():
    text = """
    schedule stages=1 microbatches=2
    rank 0: F0 B1 F1 B0
    """
    messages = checks_of(parse_schedule(text))["pipeline"]
    assert any("B1): runs before the forward of microbatch 1" in m for m in messages), messages


def test_forward_before_its_activation_arrives_is_found():
    text = """
    schedule stages=2 microbatches=1
    rank 0: F0 isend_act(0, to=1) recv_grad(0, from=1) B0 wait
    rank 1: F0 recv_act(0, from=0) B0 isend_grad(0, to=0) wait
    """
    diagnostics = analyse_schedule(parse_schedule(text)).diagnostics
    assert [(d.check, d.line) for d in diagnostics] == [("pipeline", 4)]
    assert "F0): runs before the activation of microbatch 0 from virtual stage 0" in diagnostics[0].message


def test_receiving_gradients_in_the_wrong_order_is_a_message_mismatch():
    text = """
    schedule stages=2 microbatches=2
    rank 0: F0 isend_act(0, to=1) F1 isend_act(1, to=1) recv_grad(1, from=1) B1 recv_grad(0, from=1) B0 wait
    rank 1: recv_act(0, from=0) F0 B0 isend_grad(0, to=0) recv_act(1, from=0) F1 B1 isend_grad(1, to=0) wait
    """
    found = checks_of(parse_schedule(text))
    assert list(found) == ["p2p"], found
    assert "rank 1's 1st message to rank 0 is isend_grad(0, to=0)" in found["p2p"][0]


def test_gradient_sent_from_the_first_stage_is_found():
    text = """
    schedule stages=2 microbatches=2
    rank 0: F0 send_act(0, to=1) F1 [send_act(1, to=1) recv_grad(0, from=1)] B0 send_grad(0, to=1) recv_grad(1, from=1) B1
    rank 1: recv_act(0, from=0) F0 B0 [send_grad(0, to=0) recv_act(1, from=0)] F1 B1 send_grad(1, to=0)
    """
    found = checks_of(parse_schedule(text))
    assert any("virtual stage 0 has no neighbour stage -1" in m for m in found["pipeline"]), found


def test_batched_send_forward_recv_backward_1f1b_is_verified():
    text = """
    schedule stages=2 microbatches=3
    rank 0: F0 send_act(0, to=1) F1 [send_act(1, to=1) recv_grad(0, from=1)] B0 F2 [send_act(2, to=1) recv_grad(1, from=1)] B1 recv_grad(2, from=1) B2
    rank 1: recv_act(0, from=0) F0 B0 [send_grad(0, to=0) recv_act(1, from=0)] F1 B1 [send_grad(1, to=0) recv_act(2, from=0)] F2 B2 send_grad(2, to=0)
    """
    result = analyse_schedule(parse_schedule(text))
    assert result.ok, [d.message for d in result.diagnostics]


def test_duplicate_forward_is_found():
    schedule = replace(gpipe(1, 2), 0, "F1", Action("F", 0))
    messages = checks_of(schedule)["pipeline"]
    assert any("F0): runs again" in m for m in messages), messages


def test_unwaited_isend_is_found_by_the_async_check():
    schedule = replace(one_f_one_b(2, 2), 0, "wait", None)
    found = checks_of(schedule)
    assert list(found) == ["async"], found


def test_schedule_text_round_trips():
    schedule = interleaved_1f1b(2, 4, 2)
    again = parse_schedule(format_schedule(schedule))
    assert format_schedule(again) == format_schedule(schedule)
    assert (again.stages, again.microbatches, again.chunks) == (2, 4, 2)


def test_schedule_from_per_rank_action_lists():
    schedule = parse_schedule([["F0", "send_act(0, to=1)", "recv_grad(0, from=1)", "B0"],
                               "recv_act(0, from=0) F0 B0 send_grad(0, to=0)"])
    assert (schedule.stages, schedule.microbatches) == (2, 1)
    assert analyse_schedule(schedule).ok


def test_schedule_parse_error_names_line_and_column():
    with pytest.raises(ScheduleError, match=r"schedule:3:12: expected an action"):
        parse_schedule("schedule stages=2 microbatches=1\nrank 0: F0\nrank 1: F0 X1\n")


def test_generate_by_name():
    assert format_schedule(generate("1f1b", 2, 2)) == format_schedule(one_f_one_b(2, 2))
    with pytest.raises(ValueError, match="unknown schedule"):
        generate("zero-bubble", 2, 2)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(["gpipe", "1f1b", "interleaved"]), st.integers(1, 4), st.integers(1, 3), st.data())
def test_dropping_any_single_action_is_always_found(name, stages, rounds, data):
    schedule = generate(name, stages, stages * rounds, 2 if name == "interleaved" else 1)
    rank = data.draw(st.integers(0, stages - 1))
    index = data.draw(st.integers(0, len(schedule.ranks[rank]) - 1))
    actions = list(schedule.ranks[rank])
    del actions[index]
    assert not analyse_schedule(schedule.with_rank(rank, actions)).ok
