"""Warp groups of one block run side by side: one schedule the barriers allow.

The block's consecutive warp-group branches (``T.ws(k)``, ``if lo <= tx < hi``, disjoint thread
ranges) run at the same time on the device.  The interpreter runs them one at a time, in program
order, and switches to the next group that can go on when the running one waits for a barrier
phase that has not completed (a producer's loop runs ahead until it waits for a consumer, ...).
Each group runs in its own Python thread, but only the one holding the turn runs: the values
are those of one schedule, and ``sync.WarpGroups`` checks that every schedule gives them (each
wait sees one phase, every conflicting access is ordered).  No group can go on: ``unsupported``.
"""
from __future__ import annotations

import threading
from typing import Any, Callable

from .errors import Unsupported


class Aborted(BaseException):
    """Stops a group's thread once the run has ended (an error elsewhere, a spent budget)."""


class Groups:
    """Run ``bodies`` (one callable per group, in program order) to the end, switching only at
    ``block``.  ``save``/``restore`` swap the interpreter's per-group state at a switch."""

    def __init__(self, bodies: list[Callable[[], None]], save: Callable[[], Any], restore: Callable[[Any], None]):
        self.bodies, self.save, self.restore = bodies, save, restore
        self.cond = threading.Condition()
        self.turn: int | None = None
        self.waiting: dict[int, Callable[[], bool]] = {}
        self.done: set[int] = set()
        self.states: dict[int, Any] = {}
        self.error: BaseException | None = None
        self.aborted = False
        self.local = threading.local()

    def run(self) -> None:
        threads = [threading.Thread(target=self._body, args=(i,), daemon=True) for i in range(len(self.bodies))]
        outer = self.save()
        for thread in threads:
            thread.start()
        try:
            with self.cond:
                self.turn = 0
                self.cond.notify_all()
                while len(self.done) < len(self.bodies) and self.error is None:
                    self.cond.wait()
        finally:
            with self.cond:
                unfinished = len(self.done) < len(self.bodies)
                self.aborted = unfinished
                self.cond.notify_all()
            for thread in threads:
                thread.join(10.0)
            self.restore(outer)
        if self.error is not None:
            raise self.error

    def _body(self, index: int) -> None:
        self.local.index = index
        with self.cond:
            while self.turn != index and not self.aborted:
                self.cond.wait()
            if self.aborted:
                return
        try:
            self.bodies[index]()
        except Aborted:
            return
        except BaseException as error:  # noqa: BLE001 - handed to the block's thread, which raises it
            with self.cond:
                if self.error is None:
                    self.error = error
                self.done.add(index)
                self.cond.notify_all()
            return
        with self.cond:
            self.done.add(index)
            self._pass_turn()

    def _pass_turn(self) -> None:
        """The first group in program order that can go on gets the turn (none: no schedule)."""
        for index in range(len(self.bodies)):
            if index in self.done:
                continue
            ready = self.waiting.get(index)
            if ready is None or ready():
                if index in self.states:
                    self.restore(self.states.pop(index))
                self.turn = index
                self.cond.notify_all()
                return
        if len(self.done) < len(self.bodies) and self.error is None:
            self.error = Unsupported(None, "every warp group left waits for a barrier phase no group can complete "
                                     "(the kernel can hang)")
        self.turn = None
        self.cond.notify_all()

    def block(self, ready: Callable[[], bool]) -> bool:
        """The running group waits until ``ready()``: the turn passes to another group.  False when
        it cannot (the group does not run under this scheduler, or no other group can go on)."""
        index = getattr(self.local, "index", None)
        if index is None:
            return False
        with self.cond:
            self.waiting[index] = ready
            self.states[index] = self.save()
            self._pass_turn()
            if self.turn is None:  # nobody else can go on
                self.waiting.pop(index, None)
                self.restore(self.states.pop(index))
                self.error = None
                return False
            while self.turn != index and not self.aborted:
                self.cond.wait()
            if self.aborted:
                raise Aborted()
            self.waiting.pop(index, None)
        return True

    def check(self) -> None:
        if self.aborted:
            raise Aborted()
