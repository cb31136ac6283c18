"""One deadline for the whole command (``--timeout``), shared by every stage, with progress.

Every stage asks ``remaining()`` for its own budget (the LLM deadline, a child process's time
limit, a solver timeout), so no stage can outlive the command.  Two guards back that up:

* at the deadline, ``SIGALRM`` raises ``CommandTimeout`` in the main thread, so Python code
  stops where it is and ``finally`` blocks run (child processes are killed);
* ``GRACE`` seconds later — when the main thread is stuck inside C code (a solver call) —
  a watchdog thread prints the same timeout result and ends the process.

The watchdog also prints a progress line on stderr every ``PROGRESS_EVERY`` seconds of long
work, naming the stage the command last reported.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Callable, Optional

DEFAULT_TIMEOUT = 300.0
GRACE = 10.0
PROGRESS_EVERY = 15.0


class CommandTimeout(BaseException):
    """The command's ``--timeout`` passed.  A BaseException (like KeyboardInterrupt), so the
    ``except Exception`` safety nets of the stages cannot turn it into a finding."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        super().__init__(f"gave up after the --timeout of {seconds:g} s")


class Deadline:
    """Seconds left of the command's budget; ``None`` seconds means no limit."""

    def __init__(self, seconds: Optional[float] = None):
        self.started = time.monotonic()
        self.seconds = seconds
        self.stage = "starting"

    def remaining(self, at_most: Optional[float] = None) -> float:
        left = float("inf") if self.seconds is None else max(0.0, self.seconds - self.elapsed())
        return left if at_most is None else min(left, at_most)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def expired(self) -> bool:
        return self.remaining() <= 0.0

    def note(self, stage: str) -> None:
        """The stage the command is in, for progress lines."""
        self.stage = stage.strip().splitlines()[0][:120] if stage.strip() else self.stage


_CURRENT = Deadline(None)
_FINISHED = threading.Event()
_ONCE = threading.Lock()


def current() -> Deadline:
    return _CURRENT


def reset(seconds: Optional[float]) -> Deadline:
    """A fresh deadline without signals or watchdog (in-process callers, tests)."""
    global _CURRENT, _ONCE
    _CURRENT, _ONCE = Deadline(seconds), threading.Lock()
    _FINISHED.clear()
    return _CURRENT


def release() -> None:
    """An in-process command ended: later callers in this process (the API, the next test) get no
    limit, not the ended command's deadline running out under them."""
    global _CURRENT
    _CURRENT = Deadline(None)


def finish_once() -> bool:
    """True for the first caller only: the result of a command is printed once."""
    return _ONCE.acquire(blocking=False)


def start(seconds: float, on_hard_timeout: Callable[[CommandTimeout], None],
          progress: Optional[Callable[[str], None]] = None) -> Deadline:
    """Arm the deadline for this process (console entry only; tests call commands directly)."""
    global _CURRENT, _ONCE
    _CURRENT, _ONCE = Deadline(seconds), threading.Lock()
    _FINISHED.clear()
    if seconds is None or seconds <= 0:
        return _CURRENT
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "SIGALRM"):
        def soft(signum, frame):  # noqa: ARG001 - signal handler signature
            raise CommandTimeout(seconds)

        signal.signal(signal.SIGALRM, soft)
        signal.setitimer(signal.ITIMER_REAL, seconds)
    watchdog = threading.Thread(target=_watch, args=(_CURRENT, on_hard_timeout, progress), daemon=True,
                                name="verify-agent-deadline")
    watchdog.start()
    return _CURRENT


def stop() -> None:
    """The command ended: no progress lines or timeouts after this."""
    _FINISHED.set()
    if hasattr(signal, "SIGALRM") and threading.current_thread() is threading.main_thread():
        signal.setitimer(signal.ITIMER_REAL, 0)


def _watch(deadline: Deadline, on_hard_timeout: Callable[[CommandTimeout], None],
           progress: Optional[Callable[[str], None]]) -> None:
    next_progress = PROGRESS_EVERY
    while not _FINISHED.wait(timeout=1.0):
        elapsed = deadline.elapsed()
        if progress is not None and elapsed >= next_progress:
            progress(f"still working ({deadline.stage}): {elapsed:.0f} s of the --timeout of {deadline.seconds:g} s")
            next_progress += PROGRESS_EVERY
        if elapsed >= deadline.seconds + GRACE:
            if finish_once():
                try:
                    on_hard_timeout(CommandTimeout(deadline.seconds))
                finally:
                    sys.stdout.flush()
                    sys.stderr.flush()
                    os._exit(3)
            return
