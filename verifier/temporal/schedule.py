"""Pipeline schedules as data: per-rank action lists, and their text form.

A schedule for ``stages`` ranks, ``microbatches`` microbatches and ``chunks`` model chunks
per rank (interleaved 1F1B; ``chunks=1`` otherwise).  Chunk ``c`` on rank ``r`` is virtual
stage ``c * stages + r`` (Megatron's layout), so virtual stage ``v`` lives on rank
``v % stages`` and sends activations to ``v + 1`` and gradients to ``v - 1``.

Text form, one line per rank (``#`` starts a comment)::

    schedule stages=2 microbatches=2 chunks=1
    rank 0: F0 isend_act(0, to=1) F1 isend_act(1, to=1) recv_grad(0, from=1) B0 recv_grad(1, from=1) B1 wait
    rank 1: recv_act(0, from=0) F0 B0 isend_grad(0, to=0) recv_act(1, from=0) F1 B1 isend_grad(1, to=0) wait

Actions: ``F3`` / ``B3`` (microbatch 3, chunk 0), ``F3.1`` (chunk 1);
``send_act``/``recv_act``/``send_grad``/``recv_grad(mb[.chunk], to=|from=rank)`` block
(rendezvous); the ``i``-prefixed forms post and continue until a later ``wait``, which
waits for everything posted so far; ``[ ... ]`` posts its messages together and waits
for all of them (``batch_isend_irecv`` + wait).  The chunk of a message is the chunk of
this rank's virtual stage that produces (send) or consumes (recv) it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

F, B, WAIT_ALL, BATCH = "F", "B", "wait", "batch"


@dataclass(frozen=True)
class Comm:
    """What a communication action moves, which way, and whether it blocks."""

    direction: str  # "send" | "recv"
    payload: str    # "act" | "grad"
    blocking: bool


COMMS: dict[str, Comm] = {
    f"{prefix}{direction}_{payload}": Comm(direction, payload, prefix == "")
    for prefix in ("", "i") for direction in ("send", "recv") for payload in ("act", "grad")}


@dataclass(frozen=True)
class Action:
    """One step of one rank; ``line`` is the schedule-text line it was read from, if any."""

    kind: str
    microbatch: int | None = None
    chunk: int = 0
    peer: int | None = None
    members: tuple["Action", ...] = ()
    line: int | None = None

    @property
    def comm(self) -> Comm | None:
        return COMMS.get(self.kind)

    def __str__(self) -> str:
        where = f"{self.microbatch}" + (f".{self.chunk}" if self.chunk else "")
        if self.kind in (F, B):
            return f"{self.kind}{where}"
        if self.kind == BATCH:
            return "[" + " ".join(str(member) for member in self.members) + "]"
        if self.comm is not None:
            return f"{self.kind}({where}, {'to' if self.comm.direction == 'send' else 'from'}={self.peer})"
        return self.kind


@dataclass(frozen=True)
class Schedule:
    """Per-rank action lists of one pipeline schedule."""

    stages: int
    microbatches: int
    chunks: int
    ranks: tuple[tuple[Action, ...], ...]
    name: str = ""

    @property
    def virtual_stages(self) -> int:
        return self.stages * self.chunks

    def virtual(self, rank: int, chunk: int) -> int:
        return chunk * self.stages + rank

    def owner(self, virtual: int) -> int:
        return virtual % self.stages

    def with_rank(self, rank: int, actions: Sequence[Action]) -> "Schedule":
        """The same schedule with ``rank``'s actions replaced: how tests seed bugs."""
        ranks = list(self.ranks)
        ranks[rank] = tuple(actions)
        return Schedule(self.stages, self.microbatches, self.chunks, tuple(ranks), self.name)


class ScheduleError(ValueError):
    """A schedule text that does not parse; prints as ``schedule:line:col: expected ...``."""

    def __init__(self, line: int | None, col: int, message: str):
        self.line, self.col = line, col
        super().__init__(f"schedule:{line if line is not None else '?'}:{col}: {message}")


_BOUNDARY = r"(?=\s|\]|$)"
_TOKEN_RE = re.compile(rf"""\s*(?:
    (?P<open>\[) | (?P<close>\]) | (?P<wait>wait){_BOUNDARY}
  | (?P<compute>[FB])(?P<cmb>\d+)(?:\.(?P<cchunk>\d+))?{_BOUNDARY}
  | (?P<comm>i?(?:send|recv)_(?:act|grad))\(\s*(?P<mb>\d+)(?:\.(?P<chunk>\d+))?\s*,
        \s*(?P<key>to|from)\s*=\s*(?P<peer>\d+)\s*\)
)""", re.VERBOSE)
_EXPECTED = "an action (F0, B1.1, send_act(0, to=1), irecv_grad(2, from=1), wait or [ ... ])"


def parse_actions(text: str, line: int | None = None, offset: int = 0) -> tuple[Action, ...]:
    """The actions of one rank, e.g. ``"F0 send_act(0, to=1) B0"``."""
    actions: list[Action] = []
    batch: list[Action] | None = None
    index = 0
    while text[index:].strip():
        match = _TOKEN_RE.match(text, index)
        col = offset + index + len(text[index:]) - len(text[index:].lstrip()) + 1
        if not match:
            raise ScheduleError(line, col, f"expected {_EXPECTED}, got {text[index:].split()[0]!r}")
        index = match.end()
        if match["open"]:
            if batch is not None:
                raise ScheduleError(line, col, "expected ']' before a nested '['")
            batch = []
            continue
        if match["close"]:
            if batch is None:
                raise ScheduleError(line, col, "expected '[' before ']'")
            actions.append(Action(BATCH, members=tuple(batch), line=line))
            batch = None
            continue
        if match["wait"]:
            action = Action(WAIT_ALL, line=line)
        elif match["compute"]:
            action = Action(match["compute"], int(match["cmb"]), int(match["cchunk"] or 0), line=line)
        else:
            comm = COMMS[match["comm"]]
            if match["key"] != ("to" if comm.direction == "send" else "from"):
                raise ScheduleError(line, col, f"expected {'to' if comm.direction == 'send' else 'from'}= in "
                                               f"{match['comm']}, got {match['key']}=")
            action = Action(match["comm"], int(match["mb"]), int(match["chunk"] or 0), int(match["peer"]), line=line)
        if batch is not None:
            if action.comm is None:
                raise ScheduleError(line, col, f"expected only sends and receives inside [ ... ], got {action}")
            batch.append(action)
        else:
            actions.append(action)
    if batch is not None:
        raise ScheduleError(line, offset + len(text) + 1, "expected ']' to close '['")
    return tuple(actions)


_HEADER_RE = re.compile(r"^\s*schedule\b(?P<rest>.*)$")
_RANK_RE = re.compile(r"^\s*rank\s+(?P<rank>\d+)\s*:(?P<actions>.*)$")


def _infer_microbatches(ranks: Sequence[tuple[Action, ...]]) -> int:
    found = [a.microbatch for actions in ranks for action in actions for a in (action, *action.members)
             if a.microbatch is not None]
    return max(found, default=-1) + 1


def _infer_chunks(ranks: Sequence[tuple[Action, ...]]) -> int:
    return max((action.chunk for actions in ranks for action in actions), default=0) + 1


def _from_text(text: str) -> tuple[dict[str, str], dict[int, tuple[Action, ...]]]:
    header: dict[str, str] = {}
    ranks: dict[int, tuple[Action, ...]] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        body = raw.split("#", 1)[0]
        if not body.strip():
            continue
        if match := _HEADER_RE.match(body):
            for item in match["rest"].split():
                key, _, value = item.partition("=")
                if key in ("stages", "microbatches", "chunks") and value.isdigit():
                    header[key] = value
                elif key == "name" or "=" not in item:
                    header["name"] = value or key
                else:
                    raise ScheduleError(lineno, body.index(item) + 1,
                                        f"expected stages=, microbatches=, chunks= or name=, got {item!r}")
            continue
        match = _RANK_RE.match(body)
        if not match:
            raise ScheduleError(lineno, 1, f"expected 'schedule ...' or 'rank N: actions', got {body.strip()!r}")
        rank = int(match["rank"])
        if rank in ranks:
            raise ScheduleError(lineno, 1, f"expected each rank once, got rank {rank} again")
        ranks[rank] = parse_actions(match["actions"], lineno, match.start("actions"))
    return header, ranks


def parse_schedule(source: str | Sequence[str | Sequence[str]], microbatches: int | None = None,
                   chunks: int | None = None, name: str = "") -> Schedule:
    """A schedule from its text form, or from a list of per-rank action lists.

    ``[["F0", "send_act(0, to=1)"], "recv_act(0, from=0) F0"]`` is rank 0 and rank 1.
    Microbatch and chunk counts come from the header or the arguments; only when neither
    gives them are they inferred from the actions (which cannot notice a last microbatch
    missing everywhere).
    """
    if isinstance(source, str):
        header, by_rank = _from_text(source)
        stages = int(header["stages"]) if "stages" in header else len(by_rank)
        missing = [rank for rank in range(stages) if rank not in by_rank]
        extra = [rank for rank in by_rank if rank >= stages]
        if missing or extra:
            raise ScheduleError(None, 1, f"expected rank lines 0..{stages - 1}, "
                                         f"{'missing ' + str(missing) if missing else 'got ' + str(extra)}")
        ranks = tuple(by_rank[rank] for rank in range(stages))
        microbatches = microbatches or (int(header["microbatches"]) if "microbatches" in header else None)
        chunks = chunks or (int(header["chunks"]) if "chunks" in header else None)
        name = name or header.get("name", "")
    else:
        ranks = tuple(parse_actions(entry if isinstance(entry, str) else " ".join(entry)) for entry in source)
    return Schedule(len(ranks), microbatches if microbatches is not None else _infer_microbatches(ranks),
                    chunks if chunks is not None else _infer_chunks(ranks), ranks, name)


def format_schedule(schedule: Schedule) -> str:
    """The text form; ``parse_schedule(format_schedule(s))`` gives ``s`` back (up to lines)."""
    head = f"schedule{' ' + schedule.name if schedule.name else ''} stages={schedule.stages} " \
           f"microbatches={schedule.microbatches} chunks={schedule.chunks}"
    body = [f"rank {rank}: " + " ".join(str(action) for action in actions)
            for rank, actions in enumerate(schedule.ranks)]
    return "\n".join([head, *body]) + "\n"
