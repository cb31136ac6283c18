"""Run one program on W gloo ranks in processes forked from a parent that has already
imported torch: start-up costs a fork instead of a Python start and a torch import, so a
campaign of hundreds of mutants (many of which hang or raise, which costs a restart of
the runners' spawned process groups) stays within minutes.

What a rank does is exactly what the ground-truth runners' workers do
(``tests/groundtruth/runner.py`` and ``realworld_runner.py``: their ``_execute``,
environment and store set-up); only the process management is different.  Each run gets
fresh processes, so a hang or an exception cannot leave a later run out of step.

The parent must not have started threads or a process group before forking (this is
checked: ``torch.distributed.is_initialized()`` must be false).

A run's ``timeout`` counts CPU seconds, not the wall clock, so a loaded machine cannot turn a
slow run into a "hang" (a fix that real ranks would confirm into a refuted one).  A run is stuck
when a rank has used more than ``timeout`` CPU seconds (it spins), or, once ``timeout`` wall
seconds have passed, when for a window of ``_STALL`` wall seconds no living rank's main thread was
ever seen runnable and none used more than ``_IDLE_CPU`` CPU seconds (each sleeps waiting for a
message that never comes; a starved rank on a busy machine is runnable, waiting for a CPU; a hung
gloo rank's background threads still tick now and then, about 0.01 CPU s every 3 s alone and more
beside a test suite, so CPU ticks alone cannot tell), or at the outer bound of ``_WALL_FACTOR``
times ``timeout`` on the wall clock.
"""
from __future__ import annotations

import contextlib
import os
import pickle
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path

from frontends.sandbox import cpu_seconds_of, is_runnable

_PEER_ERROR_GRACE = 5.0
_POLL = 0.01
_STALL = 4.0        # wall seconds of the window in which a hang uses (almost) no CPU
_IDLE_CPU = 0.25    # CPU seconds a sleeping rank's background threads may use in that window
_WALL_FACTOR = 8.0  # the outer bound, as a multiple of the CPU budget
_CHECK = 0.1        # seconds between reads of the ranks' CPU time


class Run:
    """One program on ``world`` forked ranks; ``poll()`` until it returns True, then ``outcome``."""

    def __init__(self, kind: str, spec, world: int, timeout: float, ref_params: dict | None = None,
                 lib_path: str | None = None):
        from groundtruth import runner as base

        self.world, self.timeout = world, timeout
        self._tmp = tempfile.TemporaryDirectory(prefix="gt-run-")
        folder = Path(self._tmp.name)
        self.files = [folder / f"rank{r}.pkl" for r in range(world)]
        store = str(folder / "store")  # a FileStore: no ports to race for between concurrent runs
        sys.stdout.flush()
        sys.stderr.flush()
        self.alive = {}
        for rank in range(world):
            pid = os.fork()
            if pid == 0:  # child
                _child(kind, spec, rank, world, store, self.files[rank], ref_params or {}, lib_path)
                os._exit(0)  # not reached
            self.alive[rank] = pid
        self.started = time.monotonic()
        self.cpu = {rank: 0.0 for rank in self.alive}   # CPU seconds each rank has used
        self.window_start, self.window_cpu = self.started, dict(self.cpu)  # the stall window
        self.window_busy = False                        # a rank's main thread seen runnable in it
        self.checked = self.started                     # when /proc was last read
        self.outcome = base._Outcome()
        self.first_error_at = None
        self.finished = False

    def poll(self) -> bool:
        if self.finished:
            return True
        for rank, pid in list(self.alive.items()):
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                del self.alive[rank]
                _collect(self.files[rank], rank, self.outcome)
                if rank in self.outcome.errors and self.first_error_at is None:
                    self.first_error_at = time.monotonic()
        now = time.monotonic()
        if self.alive and self.first_error_at is not None and now - self.first_error_at > _PEER_ERROR_GRACE:
            for rank in _kill(self.alive):
                self.outcome.errors[rank] = "did not finish after a peer failed (stopped)"
        if self.alive and self._stuck(now):
            self.outcome.timed_out = True
            self.outcome.stuck_ranks = _kill(self.alive)
        if not self.alive:
            self.outcome.seconds = now - self.started
            self.finished = True
            self._tmp.cleanup()
        return self.finished


    def _stuck(self, now: float) -> bool:
        """Past the CPU budget, stalled (in a window of ``_STALL`` s, after ``timeout`` wall seconds,
        no rank's main thread seen runnable and none using more than ``_IDLE_CPU``), or past the
        wall clock's outer bound."""
        if now - self.checked < _CHECK:
            return False
        self.checked = now
        for rank, pid in self.alive.items():
            self.cpu[rank] = max(self.cpu[rank], cpu_seconds_of(pid))
            self.window_busy = self.window_busy or is_runnable(pid)
        if max(self.cpu[rank] for rank in self.alive) > self.timeout:
            return True
        waited = now - self.started
        if now - self.window_start >= _STALL:
            idle = not self.window_busy and all(self.cpu[rank] - self.window_cpu[rank] <= _IDLE_CPU
                                                for rank in self.alive)
            if idle and waited > self.timeout:
                return True
            self.window_start, self.window_cpu, self.window_busy = now, dict(self.cpu), False
        return waited > _WALL_FACTOR * self.timeout


def run(kind: str, spec, world: int, timeout: float, ref_params: dict | None = None):
    """The runners' ``_Outcome`` of ``spec`` on ``world`` ranks (``kind``: "gallery"/"realworld")."""
    r = Run(kind, spec, world, timeout, ref_params)
    while not r.poll():
        time.sleep(_POLL)
    return r.outcome


def _kill(alive: dict) -> list[int]:
    for pid in alive.values():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for pid in alive.values():
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
    stuck = sorted(alive)
    alive.clear()
    return stuck


def _collect(path: Path, rank: int, outcome) -> None:
    try:
        status, value = pickle.loads(path.read_bytes())
    except (OSError, EOFError, pickle.UnpicklingError):
        outcome.errors[rank] = "worker process died"
        return
    if status == "done":
        outcome.payloads[rank] = value
    else:
        outcome.errors[rank] = value


def _use_library_copy(lib_path: str) -> None:
    """Import the packages under ``lib_path`` (a mutated copy of an installed library) instead of the
    installed ones the parent may already have imported."""
    tops = {p.name for p in Path(lib_path).iterdir() if p.is_dir()}
    for name in list(sys.modules):
        if name.split(".")[0] in tops:
            del sys.modules[name]
    sys.path.insert(0, lib_path)


def _child(kind: str, spec, rank: int, world: int, store_path: str, out: Path, ref_params: dict,
           lib_path: str | None = None) -> None:
    result = ("error", "worker process died")
    try:
        if lib_path:
            _use_library_copy(lib_path)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        import warnings
        from datetime import timedelta

        warnings.simplefilter("ignore")
        with contextlib.suppress(Exception):
            if "lo" in {name for _, name in socket.if_nameindex()}:
                os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        import torch
        import torch.distributed as dist
        from groundtruth import runner as base

        torch.set_num_threads(1)
        if world == 1:
            store = dist.HashStore()
        else:
            store = dist.FileStore(store_path, world)
            store.set_timeout(timedelta(seconds=120))
        if kind == "realworld":
            from groundtruth import realworld_runner as rw

            os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world),
                              LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT="29500")
            rw._map_cuda_to_cpu()
            payload = rw._execute(spec, rank, world, store, 0, ref_params)
        else:
            if base.SHIM_DIR not in sys.path:
                sys.path.insert(0, base.SHIM_DIR)
            payload = base._execute(spec, rank, world, store, 0)
        result = ("done", payload)
    except BaseException:
        from groundtruth import runner as base

        result = ("error", base._short_tb())
    finally:
        with contextlib.suppress(BaseException):
            out.write_bytes(pickle.dumps(result))
        os._exit(0)
