"""Pipeline schedules: generate GPipe, 1F1B and interleaved 1F1B, and check any schedule.

A generator only decides the order of compute steps on each rank (the part the papers
and Megatron-LM define); ``with_communication`` then derives the messages the same way
for all of them:

* before a step, receive (blocking) the inputs it needs from the neighbour stage; a
  channel is FIFO, so messages are received in the order the sender produced them, and
  anything that arrives ahead of the one needed is received and kept;
* after a step, ``isend`` its output to the neighbour stage; all sends are waited at the
  end, as ``torch.distributed.pipelining`` does.

Receiving in producer order adds no dependency the dataflow does not already have, so a
schedule built this way is deadlock-free exactly when its compute order is consistent;
``check_schedule`` proves that (and everything else) rather than trusting it.
"""
from __future__ import annotations

from typing import Callable

from .check import TemporalResult, analyse_timelines
from .findings import plural
from .pipeline_checks import check_pipeline_semantics
from .pipeline_events import schedule_timelines
from ..report import Diagnostic
from .schedule import B, F, WAIT_ALL, Action, Schedule

Step = tuple[str, int, int]  # (F|B, microbatch, chunk)


def gpipe_order(stages: int, microbatches: int, rank: int) -> list[Step]:
    """All forwards, then all backwards (GPipe)."""
    return [(F, mb, 0) for mb in range(microbatches)] + [(B, mb, 0) for mb in range(microbatches)]


def one_f_one_b_order(stages: int, microbatches: int, rank: int) -> list[Step]:
    """PipeDream-flush 1F1B: ``stages - rank - 1`` warm-up forwards, then alternate."""
    warmup = min(stages - rank - 1, microbatches)
    order: list[Step] = [(F, mb, 0) for mb in range(warmup)]
    for index in range(microbatches - warmup):
        order += [(F, warmup + index, 0), (B, index, 0)]
    return order + [(B, mb, 0) for mb in range(microbatches - warmup, microbatches)]


def interleaved_order(stages: int, microbatches: int, rank: int, chunks: int) -> list[Step]:
    """Megatron-LM's interleaved 1F1B: chunks cycled every ``stages`` microbatches."""
    total = microbatches * chunks

    def step(kind: str, k: int) -> Step:
        chunk = (k // stages) % chunks
        return (kind, (k // (stages * chunks)) * stages + k % stages, chunk if kind == F else chunks - 1 - chunk)

    if microbatches == stages:
        warmup = total
    else:
        warmup = min((stages - rank - 1) * 2 + (chunks - 1) * stages, total)
    order = [step(F, k) for k in range(warmup)]
    for k in range(total - warmup):
        order += [step(F, warmup + k), step(B, k)]
    return order + [step(B, k) for k in range(total - warmup, total)]


def with_communication(stages: int, microbatches: int, chunks: int, orders: list[list[Step]],
                       name: str = "") -> Schedule:
    """A full schedule from per-rank compute orders (see the module docstring)."""
    last = stages * chunks - 1

    def output(kind: str, mb: int, v: int) -> tuple[tuple[str, int, int], int] | None:
        if kind == F and v < last:
            return ("act", mb, v), (v + 1) % stages
        if kind == B and v > 0:
            return ("grad", mb, v), (v - 1) % stages
        return None

    channels: dict[tuple[int, int], list[tuple[str, int, int]]] = {}
    for rank, order in enumerate(orders):
        for kind, mb, chunk in order:
            sent = output(kind, mb, chunk * stages + rank)
            if sent:
                channels.setdefault((rank, sent[1]), []).append(sent[0])
    ranks = []
    for rank, order in enumerate(orders):
        actions: list[Action] = []
        cursor: dict[int, int] = {}
        arrived: set[tuple[str, int, int]] = set()
        for kind, mb, chunk in order:
            v = chunk * stages + rank
            needed = None
            if kind == F and v > 0:
                needed = ("act", mb, v - 1)
            elif kind == B and v < last:
                needed = ("grad", mb, v + 1)
            if needed is not None and needed not in arrived:
                source = needed[2] % stages
                queue = channels[(source, rank)]
                while needed not in arrived:
                    label = queue[cursor.get(source, 0)]
                    cursor[source] = cursor.get(source, 0) + 1
                    arrived.add(label)
                    consumer = label[2] + 1 if label[0] == "act" else label[2] - 1
                    actions.append(Action(f"recv_{label[0]}", label[1], consumer // stages, source))
            actions.append(Action(kind, mb, chunk))
            sent = output(kind, mb, v)
            if sent:
                actions.append(Action(f"isend_{sent[0][0]}", mb, chunk, sent[1]))
        if any(action.kind.startswith("isend") for action in actions):
            actions.append(Action(WAIT_ALL))
        ranks.append(tuple(actions))
    return Schedule(stages, microbatches, chunks, tuple(ranks), name)


def gpipe(stages: int, microbatches: int) -> Schedule:
    orders = [gpipe_order(stages, microbatches, rank) for rank in range(stages)]
    return with_communication(stages, microbatches, 1, orders, "gpipe")


def one_f_one_b(stages: int, microbatches: int) -> Schedule:
    orders = [one_f_one_b_order(stages, microbatches, rank) for rank in range(stages)]
    return with_communication(stages, microbatches, 1, orders, "1f1b")


def interleaved_1f1b(stages: int, microbatches: int, chunks: int = 2) -> Schedule:
    """Megatron's interleaved schedule; like Megatron it needs ``microbatches % stages == 0``."""
    if microbatches % stages:
        raise ValueError(f"interleaved 1F1B needs microbatches ({microbatches}) divisible by stages ({stages})")
    orders = [interleaved_order(stages, microbatches, rank, chunks) for rank in range(stages)]
    return with_communication(stages, microbatches, chunks, orders, "interleaved")


GENERATORS: dict[str, Callable[[int, int, int], Schedule]] = {
    "gpipe": lambda stages, microbatches, chunks: gpipe(stages, microbatches),
    "1f1b": lambda stages, microbatches, chunks: one_f_one_b(stages, microbatches),
    "interleaved": interleaved_1f1b,
}


def generate(name: str, stages: int, microbatches: int, chunks: int = 1) -> Schedule:
    """``generate("1f1b", 4, 8)``, ``generate("interleaved", 4, 8, chunks=2)``."""
    if name not in GENERATORS:
        raise ValueError(f"unknown schedule {name!r}; expected one of {', '.join(GENERATORS)}")
    if chunks != 1 and name != "interleaved":
        raise ValueError(f"{name} has one model chunk per rank; use 'interleaved' for chunks={chunks}")
    return GENERATORS[name](stages, microbatches, chunks)


def analyse_schedule(schedule: Schedule) -> TemporalResult:
    """Schedule semantics plus the shared matching, async and deadlock checks."""
    findings = check_pipeline_semantics(schedule)
    result = analyse_timelines(schedule_timelines(schedule), findings, subject="pipeline")
    if not findings:
        result.proven.insert(0, f"pipeline: each of {plural(schedule.microbatches, 'microbatch')} runs "
                                f"forward then backward exactly once on each of "
                                f"{plural(schedule.virtual_stages, 'virtual stage')}, inputs received before use")
    return result


def check_schedule(schedule: Schedule, proven: list[str] | None = None) -> list[Diagnostic]:
    """Diagnostics of ``schedule``; properties proven are appended to ``proven``."""
    result = analyse_schedule(schedule)
    if proven is not None:
        proven.extend(result.proven)
    return result.diagnostics
