"""Real collective values given back to a simulated rank (frontends/traced/replay.py).

A rank's log holds, per collective, the values it read and the values real ranks wrote.  Given back in
order, a collective that reads what the real one read gets the real values; one that reads anything
else stops the replay for good (its values stay simulated, and reads of them stay unsupported).
"""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

pytestmark = pytest.mark.torch

from frontends.traced.replay import Entry, Replay, log_mode  # noqa: E402


@pytest.fixture
def one_rank_group():
    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    yield
    dist.destroy_process_group()


def test_the_log_holds_what_each_collective_read_and_wrote(one_rank_group):
    x = torch.arange(6, dtype=torch.float64).reshape(2, 3)
    with log_mode() as log:
        dist.all_reduce(x)
        dist.all_reduce(x * 2)
    meta, arrays = log.as_message()
    assert [c["kind"] for c in meta["collectives"]] == ["c10d.allreduce_.default"] * 2
    np.testing.assert_array_equal(arrays["c0.r0"], np.arange(6).reshape(2, 3))
    np.testing.assert_array_equal(arrays["c1.w0"], 2 * np.arange(6).reshape(2, 3))


def _through(replay: Replay, line: int):
    """A dispatch mode that runs each collective through ``replay`` (as the recorder does)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from frontends.traced.replay import is_collective

    class Through(TorchDispatchMode):
        given: list = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if is_collective(func):
                out, given = replay.call(func, args, kwargs or {}, line)
                self.given.append(given)
                return out
            return func(*args, **(kwargs or {}))

    return Through()


def _replay_of(read: np.ndarray, written: np.ndarray) -> Replay:
    return Replay([Entry("c10d.allreduce_.default", [read], [written])])


def test_a_collective_reading_what_the_real_one_read_gets_the_real_values(one_rank_group):
    x = torch.ones(2, 3, dtype=torch.float64)
    real = np.full((2, 3), 4.0)            # what the peers' sum was on the real ranks
    replay = _replay_of(np.ones((2, 3)), real)
    with _through(replay, 7):
        dist.all_reduce(x)
    assert replay.given == 1 and replay.stopped is None
    np.testing.assert_array_equal(x.numpy(), real)


def test_a_collective_reading_other_values_stops_the_replay_for_good(one_rank_group):
    x = torch.full((2, 3), 2.0, dtype=torch.float64)
    replay = Replay([Entry("c10d.allreduce_.default", [np.ones((2, 3))], [np.full((2, 3), 4.0)]),
                     Entry("c10d.allreduce_.default", [np.ones((2, 3))], [np.full((2, 3), 4.0)])])
    with _through(replay, 7):
        dist.all_reduce(x)
    assert replay.given == 0 and "reads other values" in replay.stopped and "line 7" in replay.stopped
    np.testing.assert_array_equal(x.numpy(), np.full((2, 3), 2.0))   # its own (one-rank) value kept
    y = torch.ones(2, 3, dtype=torch.float64)                           # would match the next entry: too late
    with _through(replay, 9):
        dist.all_reduce(y)
    assert replay.given == 0
    np.testing.assert_array_equal(y.numpy(), np.ones((2, 3)))


def test_a_rank_running_more_collectives_than_the_real_ones_stays_simulated(one_rank_group):
    replay = Replay([])
    x = torch.ones(2, dtype=torch.float64)
    with _through(replay, 3):
        dist.all_reduce(x)
    assert replay.given == 0 and "fewer collectives" in replay.stopped


def test_an_all_to_all_reads_its_input_not_the_buffer_it_fills(one_rank_group):
    """A fresh ``torch.empty`` buffer holds whatever memory held: matching it against the real rank's
    would stop every replay of an exchange of split sizes at its first all-to-all."""
    with log_mode() as log:
        received = torch.empty(2)
        dist.all_to_all_single(received, torch.tensor([1.0, 2.0]))
        dist.all_reduce(received)
    meta, arrays = log.as_message()
    assert [(c["kind"], c["read"]) for c in meta["collectives"]] == [
        ("c10d.alltoall_base_.default", 1), ("c10d.allreduce_.default", 1)]
    np.testing.assert_array_equal(arrays["c0.r0"], [1.0, 2.0])
