"""Warp groups of one block and the mbarriers between them (Hopper warp specialization).

A warp-specialized kernel runs its ``T.ws(k)`` parts on disjoint thread ranges at the same
time; ``tma_copy(..., barrier=b)`` copies asynchronously and counts towards the current phase
of ``b``, ``ptx_arrive_barrier(b)`` arrives with every thread of the group, and
``mbarrier_wait_parity(b, p)`` returns once the phase of parity ``p`` has completed.

The interpreter runs the groups one at a time, in program order, switching to the next group
that can go on when one waits for a phase not yet completed (``schedule.py``): one schedule.
Its values are the values of every schedule when (1) that order is one the barriers allow (every wait finds its
phase completed), (2) every wait observes one phase in every schedule (the phase after it
cannot complete without an arrival that follows the wait), and (3) no two accesses to one
element from different groups (or from the copy engine) are unordered, a write among them.
Happens-before is tracked with vector clocks; a phase carries the join of its arrivals' clocks.
The block's own statements outside the groups run as one more group, all its threads; between
them and the groups' branches TileLang's ThreadSync pass puts a ``__syncthreads`` where their
shared-memory accesses conflict, which orders on-chip memory only (``fork``, ``_rejoin``).
Anything else is ``unsupported`` with the reason: an order the proof cannot rely on.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .errors import Unsupported

Clock = dict[Any, int]


def _join(a: Clock, b: Clock) -> Clock:
    out = dict(a)
    for key, value in b.items():
        if out.get(key, 0) < value:
            out[key] = value
    return out


@dataclass
class _Barrier:
    count: int  # arrivals (threads) that complete a phase
    arrivals: int = 0
    pending: Clock = field(default_factory=dict)  # join of the current phase's arrivals
    phases: list[Clock] = field(default_factory=list)  # completed phases
    waits: list[tuple[int, Any, int]] = field(default_factory=list)  # (phase observed, group, its time)


@dataclass
class _Cell:
    write: tuple[Any, int] | None = None  # (group, time) of the last write
    reads: dict[Any, int] = field(default_factory=dict)  # group -> time of its last read since


class WarpGroups:
    """Vector clocks of the groups of one block, its barriers' phases and its on-chip cells."""

    def __init__(self, threads: int, counts: dict[str, tuple[int, ...]]):
        self.threads = threads
        self.counts = counts
        self.block = (0, threads)  # the whole block: its statements outside the warp groups
        self.scheduler: Any = None  # the groups running side by side (schedule.Groups), when they do
        self.reset()

    def reset(self) -> None:
        """A new block: fresh barriers, clocks and on-chip memory."""
        self.clocks: dict[Any, Clock] = {}
        self.barriers: dict[tuple[str, tuple[int, ...]], _Barrier] = {}
        self.cells: dict[tuple[str, tuple[int, ...]], _Cell] = {}
        self.group: tuple[int, int] | None = None  # the thread range running now (None: every thread)
        self.async_writer: Any = None  # the copy engine, while a tma_copy stores (the tensor core: an MMA)
        self.in_order: set[Any] = set()  # engines whose operations run in issue order (tcgen05 MMAs)
        # the issuing threads -> the WGMMAs in flight, each as the tensor core's clock at its end
        self.wgmmas: dict[Any, list[Clock]] = {}
        # what a group knows of on-chip memory through the __syncthreads TileLang's ThreadSync pass
        # puts between the block's own statements and its warp groups' where their shared-memory
        # accesses conflict (before the branches, and after them once the block's code goes on)
        self.assumed: dict[Any, Clock] = {}
        self.forked: list[Any] = []  # groups run since the block's last statement
        self.blocked: dict[tuple[str, tuple[int, ...]], list[int]] = {}  # barrier -> parities waited for

    def _clock(self, group: Any) -> Clock:
        return self.clocks.setdefault(group, {})

    def _tick(self, group: Any) -> int:
        clock = self._clock(group)
        clock[group] = clock.get(group, 0) + 1
        return clock[group]

    def _running(self, line: int | None) -> tuple[int, int]:
        if self.group is None:
            raise Unsupported(line, "on-chip memory or a barrier used outside the warp groups of a warp-specialized "
                              "kernel is not modelled")
        return self.group

    # -- the block and its warp groups --
    def fork(self, group: tuple[int, int]) -> None:
        """The block's threads branch into ``group`` (``T.ws`` or ``if lo <= tx < hi``): a
        __syncthreads before the branches orders the block's on-chip accesses before the group's
        (ThreadSync puts one where they conflict; every thread reaches it, the branches being
        the block's statements)."""
        self.assumed[group] = _join(self.assumed.get(group, {}), _join(self._clock(self.block),
                                                                        self.assumed.get(self.block, {})))
        if group not in self.forked:
            self.forked.append(group)

    def _rejoin(self) -> None:
        """The block's code goes on after its warp groups: a __syncthreads every thread reaches after
        its branch orders the groups' on-chip accesses before the block's."""
        for group in self.forked:
            self.assumed[self.block] = _join(self.assumed.get(self.block, {}),
                                             _join(self._clock(group), self.assumed.get(group, {})))
        self.forked = []

    # -- memory --
    def access(self, name: str, index: tuple[int, ...], write: bool, line: int | None, onchip: bool = False) -> None:
        """One element access by the running threads (or the engine working for them); ``onchip``:
        shared memory or registers, which ThreadSync's barriers order (global memory they do not)."""
        group = self._running(line)
        if group == self.block and self.forked and self.async_writer is None:
            self._rejoin()
        cell = self.cells.setdefault((name, index), _Cell())
        knows = _join(self._clock(group), self.assumed.get(group, {})) if onchip else self._clock(group)
        time = self._tick(group)
        verb = ("written by a tma_copy of" if self.async_writer else "written by") if write else "read by"
        if self.async_writer is not None and self.async_writer in self.in_order:
            verb = ("written" if write else "read") + " by a tcgen05 MMA of"
        # a tcgen05 MMA follows the earlier MMAs of its issue stream without a barrier
        same_stream = self.async_writer in self.in_order and cell.write is not None \
            and cell.write[0] == self.async_writer
        if cell.write is not None and cell.write[0] != group and knows.get(cell.write[0], 0) < cell.write[1] \
                and not same_stream:
            raise Unsupported(line, f"{name}{list(index)} is {verb} the threads "
                              f"{_shown(group)} while {_shown(cell.write[0])} may still write it: no barrier orders "
                              "the two")
        if not write:
            if self.async_writer in self.in_order:  # the tensor core reads after the issue
                cell.reads[self.async_writer] = self._clock(self.async_writer)[self.async_writer]
            else:
                cell.reads[group] = time
            return
        for reader, read in cell.reads.items():
            if reader != group and knows.get(reader, 0) < read and reader != self.async_writer:
                raise Unsupported(line, f"{name}{list(index)} is {verb} the threads {_shown(group)} while "
                                  f"{_shown(reader)} may still read it: no barrier orders the two")
        if self.async_writer is not None:  # the copy engine: seen only through the phase the copy counts towards
            engine = self.async_writer
            cell.write, cell.reads = (engine, self._clock(engine)[engine]), {}
        else:
            cell.write, cell.reads = (group, time), {}

    # -- barriers --
    def _barrier(self, key: tuple[str, tuple[int, ...]], line: int | None) -> _Barrier:
        if key not in self.barriers:
            counts = self.counts.get(key[0])
            flat = key[1][0] if len(key[1]) == 1 else None
            if counts is None or flat is None or not 0 <= flat < len(counts):
                raise Unsupported(line, f"barrier {key[0]}{list(key[1])} has no arrive count")
            self.barriers[key] = _Barrier(counts[flat])
        return self.barriers[key]

    def async_copy(self, key: tuple[str, tuple[int, ...]], line: int | None) -> str:
        """A tma_copy counting towards ``key``'s current phase: the copy engine's writes are
        seen by whoever waits for that phase."""
        self._running(line)
        self._barrier(key, line)
        engine = f"the copy engine of {key[0]}{list(key[1])}"
        self._tick(engine)
        self.async_writer = engine
        return engine

    def end_async_copy(self, key: tuple[str, tuple[int, ...]]) -> None:
        engine, self.async_writer = self.async_writer, None
        barrier = self.barriers[key]
        barrier.pending = _join(barrier.pending, {engine: self._clock(engine)[engine]})

    def async_mma(self, key: tuple[str, tuple[int, ...]], line: int | None) -> None:
        """A tcgen05 MMA issued by the running threads: the tensor core reads and writes after the
        issue (it knows what the issuing threads did before it), in order with the earlier MMAs
        of the same threads (TileLang: 'a later TCGEN05 operation remains ordered in the same issue
        stream')."""
        group = self._running(line)
        self._barrier(key, line)
        engine = f"the tcgen05 tensor core of the threads {_shown(group)}"
        self.in_order.add(engine)
        self.clocks[engine] = _join(self._clock(engine), self._clock(group))
        self._tick(engine)
        self._tick(group)
        self.async_writer = engine

    def end_async_mma(self, key: tuple[str, tuple[int, ...]], line: int | None) -> None:
        """The MMA's commit: one arrival on ``key`` once the tensor core is done
        (``tcgen05.commit.mbarrier::arrive::one``)."""
        engine, self.async_writer = self.async_writer, None
        self._arrive(key, engine, 1, line)

    def async_wgmma(self, line: int | None) -> None:
        """A Hopper WGMMA issued by the running threads: like a tcgen05 MMA, the tensor core reads
        A, B and C and writes C after the issue, in order with the earlier WGMMAs of the same
        threads (PTX: accumulating into the same registers needs no wait), but it arrives on no
        barrier: the threads see it only through ``wait_wgmma``."""
        group = self._running(line)
        engine = f"the wgmma tensor core of the threads {_shown(group)}"
        self.in_order.add(engine)
        self.clocks[engine] = _join(self._clock(engine), self._clock(group))
        self._tick(engine)
        self._tick(group)
        self.async_writer = engine

    def end_async_wgmma(self) -> None:
        engine, self.async_writer = self.async_writer, None
        group = self._running(None)
        self.wgmmas.setdefault(group, []).append(dict(self._clock(engine)))

    def wgmma_wait(self, pending: int, line: int | None) -> None:
        """``T.wait_wgmma(n)`` (``wgmma.wait_group n``): the running threads go on once at most
        the ``n`` most recent of their WGMMAs are in flight; they know what the others did."""
        group = self._running(line)
        issued = self.wgmmas.get(group, [])
        if pending < 0:
            raise Unsupported(line, f"T.wait_wgmma({pending}) is not modelled")
        retired, self.wgmmas[group] = issued[:max(len(issued) - pending, 0)], issued[max(len(issued) - pending, 0):]
        for clock in retired:
            self.clocks[group] = _join(self._clock(group), clock)
        self._tick(group)

    def arrive(self, key: tuple[str, tuple[int, ...]], line: int | None) -> None:
        group = self._running(line)
        self._tick(group)
        self._arrive(key, group, group[1] - group[0], line)

    def _arrive(self, key: tuple[str, tuple[int, ...]], who: Any, count: int, line: int | None) -> None:
        barrier = self._barrier(key, line)
        barrier.arrivals += count
        barrier.pending = _join(barrier.pending, self._clock(who))
        if barrier.arrivals > barrier.count:
            raise Unsupported(line, f"barrier {key[0]}{list(key[1])} gets {barrier.arrivals} arrivals in one phase, "
                              f"more than its count {barrier.count}")
        if barrier.arrivals < barrier.count:
            return
        phase = len(barrier.phases)
        for parity in self.blocked.get(key, ()):  # a waiting group that could go on has not yet
            if phase % 2 != parity % 2:
                raise Unsupported(line, f"barrier {key[0]}{list(key[1])}: phase {phase} completes while threads waiting "
                                  f"for parity {parity} have not gone on after phase {phase - 1}, so which phase that "
                                  "wait sees depends on the schedule")
        for observed, waiter, time in barrier.waits:
            # a wait that observed the phase before this one must be known to this phase's arrivals,
            # else in another schedule it could observe this phase instead
            if observed == phase - 1 and barrier.pending.get(waiter, 0) < time:
                raise Unsupported(line, f"barrier {key[0]}{list(key[1])}: phase {phase} can complete before the "
                                  f"threads {_shown(waiter)} wait for phase {phase - 1}, so which phase that wait "
                                  "sees depends on the schedule")
        barrier.phases.append(barrier.pending)
        barrier.arrivals, barrier.pending = 0, {}

    def wait(self, key: tuple[str, tuple[int, ...]], parity: int, line: int | None) -> None:
        group = self._running(line)
        barrier = self._barrier(key, line)
        completed = len(barrier.phases)
        if completed % 2 == parity % 2 and self.scheduler is not None:  # another group may complete it
            self.blocked.setdefault(key, []).append(parity)
            try:
                if not self.scheduler.block(lambda: len(barrier.phases) % 2 != parity % 2):
                    raise Unsupported(line, f"the threads {_shown(group)} wait for phase parity {parity} of barrier "
                                      f"{key[0]}{list(key[1])} and no warp group can go on to complete it: every one "
                                      "waits (the kernel can hang)")
                completed = len(barrier.phases)
            finally:
                self.blocked[key].remove(parity)
        if completed % 2 == parity % 2:  # the phase of that parity is the running one: this wait blocks
            raise Unsupported(line, f"the threads {_shown(group)} wait for phase parity {parity} of barrier "
                              f"{key[0]}{list(key[1])} before that phase completes in program order; the order the "
                              "barriers allow is not modelled")
        if completed:
            self.clocks[group] = _join(self._clock(group), barrier.phases[-1])
        barrier.waits.append((completed - 1, group, self._tick(group)))


def _shown(group: Any) -> str:
    return f"{group[0]}..{group[1] - 1}" if isinstance(group, tuple) else str(group)
