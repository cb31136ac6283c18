"""The ground-truth runners judge a hang by the ranks, not by the clock.

A job's ``timeout`` is the time no rank was seen working (every main thread asleep, waiting for a
message that never comes) or the CPU seconds one rank used on it.  On a busy machine a job is
slower but its ranks stay runnable, waiting for a core: it must not turn into a "deadlock".
Before, the runner stopped any job after ``timeout`` wall seconds, and a one-rank reference of a
small DDP script "timed out" at 40 s in a test run on a loaded 2-core machine.
"""
from __future__ import annotations

import multiprocessing
import os
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch")

try:
    from groundtruth import runner as gt
except ImportError:  # imported under another rootdir/import mode
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from groundtruth import runner as gt

pytestmark = pytest.mark.torch

BUSY_CPU_SECONDS = 1.5
TIMEOUT = 5.0

SLOW = f'''
import time

import torch


def example_inputs():
    return (torch.ones(4),)


def forward(x):
    start = time.process_time()
    while time.process_time() - start < {BUSY_CPU_SECONDS}:  # CPU work, however long it takes
        pass
    return x * 2
'''

BLOCKED = '''
import torch
import torch.distributed as dist


def example_inputs():
    return (torch.ones(4),)


def forward(x):
    if dist.get_world_size() > 1:
        dist.recv(x, src=(dist.get_rank() + 1) % dist.get_world_size())  # every rank waits: no sender
    return x * 2
'''


def _spin():
    while True:
        pass


@pytest.fixture
def busy_machine():
    """Four spinning processes per core: each worker gets a fraction of a core."""
    spinners = [multiprocessing.get_context("fork").Process(target=_spin, daemon=True)
                for _ in range(4 * (os.cpu_count() or 1))]
    for p in spinners:
        p.start()
    yield
    for p in spinners:
        p.kill()
        p.join()


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def test_a_slow_job_on_a_busy_machine_is_not_a_hang(tmp_path, busy_machine):
    res = gt.run_file(_write(tmp_path, "slow.py", SLOW), world=2, timeout=TIMEOUT)
    assert res.status == gt.STATUS_MATCH, (res.summary(), res.error)
    # the comparison is only a test of the watchdog if the job outlived its timeout on the wall clock
    assert res.seconds > TIMEOUT, res.seconds


def test_ranks_all_waiting_for_a_message_are_a_hang(tmp_path):
    res = gt.run_file(_write(tmp_path, "blocked.py", BLOCKED), world=2, timeout=TIMEOUT)
    assert res.status == gt.STATUS_TIMEOUT, (res.summary(), res.error)
    assert res.seconds < gt._WALL_FLOOR
