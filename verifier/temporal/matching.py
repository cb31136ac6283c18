"""Pair up communication across ranks: which events meet in which rendezvous.

Two rules, both the ones NCCL and gloo implement:

* point-to-point messages between an ordered pair of ranks with one tag are FIFO, so the
  k-th send from A to B with tag t meets the k-th receive on B from A with tag t.  A
  receive never takes a message with another tag: under gloo (torch 2.13, checked with real
  runs) ``send(a, tag=1); send(b, tag=2)`` against ``recv(tag=2); recv(tag=1)`` hangs with
  blocking calls and completes, each value to its tag, when the sends are ``isend``;
* collectives on one process group are matched by their position in that group's
  sequence, whatever their kind: the k-th collective of each member meets the others'.

Events left over (a send nobody receives, a collective one member never issues) are
reported here and left out of the rendezvous, so the deadlock simulation reports root
causes instead of their echoes.
"""
from __future__ import annotations

from dataclasses import dataclass

from .events import COLLECTIVE, RECV, SEND, Event, Group
from .findings import ORDER, P2P, Finding

NO_RENDEZVOUS = -1


@dataclass(frozen=True)
class Rendezvous:
    """Events (``(rank, index)``) that complete together; ``group`` is None for a message."""

    members: tuple[tuple[int, int], ...]
    group: Group | None = None


@dataclass
class Matching:
    """Rendezvous of every communication event; ``of_event[rank][index]`` is its id or -1."""

    rendezvous: list[Rendezvous]
    of_event: list[list[int]]
    findings: list[Finding]
    messages: int = 0
    collectives: int = 0


def _ordinal(number: int) -> str:
    suffix = "th" if 10 <= number % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return f"{number}{suffix}"


def _match_messages(timelines: tuple[tuple[Event, ...], ...], matching: Matching) -> None:
    sends: dict[tuple[int, int, int], list[int]] = {}
    recvs: dict[tuple[int, int, int], list[int]] = {}
    for rank, timeline in enumerate(timelines):
        for index, event in enumerate(timeline):
            if event.kind == SEND:
                sends.setdefault((rank, event.peer, event.tag), []).append(index)
            elif event.kind == RECV:
                recvs.setdefault((event.peer, rank, event.tag), []).append(index)
    left: list[tuple[int, int, int, bool, Event]] = []
    for channel in sorted(set(sends) | set(recvs)):
        src, dst, tag = channel
        out, into = sends.get(channel, []), recvs.get(channel, [])
        for position, (send_index, recv_index) in enumerate(zip(out, into)):
            send, recv = timelines[src][send_index], timelines[dst][recv_index]
            if send.signature and recv.signature and send.signature != recv.signature:
                matching.findings.append(Finding(
                    P2P, send.line,
                    f"rank {src}'s {_ordinal(position + 1)} message to rank {dst} is {send.what} "
                    f"but rank {dst} receives it as {recv.what}{_at(recv.line)}"))
            matching.of_event[src][send_index] = matching.of_event[dst][recv_index] = len(matching.rendezvous)
            matching.rendezvous.append(Rendezvous(((src, send_index), (dst, recv_index))))
            matching.messages += 1
        for send_index in out[len(into):]:
            left.append((src, dst, tag, True, timelines[src][send_index]))
        for recv_index in into[len(out):]:
            left.append((src, dst, tag, False, timelines[dst][recv_index]))
    matching.findings.extend(_unmatched(left, sends, recvs))


def _unmatched(left: list, sends: dict, recvs: dict) -> list[Finding]:
    """Findings for messages nobody meets (``left``: src, dst, tag, is a send, event).  A send and a
    receive left between the same two ranks with different tags are one mismatch: each says so, and
    the side asking for a tag other than the default 0 comes first (it chose the tag, and the repair
    is there); both are still listed."""
    findings = []
    for src, dst, tag, is_send, event in left:
        others = sorted({t for s, d, t, sent, _ in left if (s, d) == (src, dst) and sent != is_send and t != tag})
        out, into = len(sends.get((src, dst, tag), [])), len(recvs.get((src, dst, tag), []))
        tagged = f" with tag {tag}" if tag else ""
        if is_send:
            message = (f"{event.what}{_at(event.line)} has no matching recv on rank {dst} "
                       f"(rank {dst} receives {into} message(s){tagged} from rank {src}, rank {src} sends {out})")
        else:
            message = (f"{event.what}{_at(event.line)} has no matching send on rank {src} "
                       f"(rank {src} sends {out} message(s){tagged} to rank {dst}, rank {dst} receives {into})")
        if others:
            peer, does = (f"rank {dst}", "receives from") if is_send else (f"rank {src}", "sends to")
            message += (f"; {peer} {does} rank {src if is_send else dst} with tag {', '.join(map(str, others))}: "
                        f"the tags differ" + (f", and tag {tag} is not the default 0" if tag else ""))
        findings.append((0 if others and tag else 1, Finding(P2P, event.line, message)))
    return [finding for _, finding in sorted(findings, key=lambda item: item[0])]


def _match_collectives(timelines: tuple[tuple[Event, ...], ...], matching: Matching) -> None:
    sequences: dict[Group, dict[int, list[int]]] = {}
    for rank, timeline in enumerate(timelines):
        for index, event in enumerate(timeline):
            if event.kind == COLLECTIVE:
                sequences.setdefault(event.group, {}).setdefault(rank, []).append(index)
    for group, per_rank in sequences.items():
        lengths = {rank: len(per_rank.get(rank, [])) for rank in group.members}
        shortest = min(lengths.values())
        for position in range(shortest):
            members = tuple((rank, per_rank[rank][position]) for rank in group.members)
            for rank, index in members:
                matching.of_event[rank][index] = len(matching.rendezvous)
            matching.rendezvous.append(Rendezvous(members, group))
            matching.collectives += 1
        if max(lengths.values()) != shortest:
            shorter = min(group.members, key=lambda rank: (lengths[rank], rank))
            longer = max(group.members, key=lambda rank: (lengths[rank], -rank))
            extra = timelines[longer][per_rank[longer][shortest]]
            matching.findings.append(Finding(
                ORDER, extra.line,
                f"rank {longer} issues {lengths[longer]} collective(s) on the {group} but rank {shorter} issues "
                f"{lengths[shorter]}: {extra.what}{_at(extra.line)} is never matched and hangs"))


def _at(line: int | None) -> str:
    return f" at line {line}" if line is not None else ""


def match(timelines: tuple[tuple[Event, ...], ...]) -> Matching:
    """Rendezvous for all messages and collectives of the given per-rank timelines."""
    matching = Matching([], [[NO_RENDEZVOUS] * len(timeline) for timeline in timelines], [])
    _match_messages(timelines, matching)
    _match_collectives(timelines, matching)
    return matching
