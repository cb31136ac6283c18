"""Real collective values on simulated ranks: what gloo ranks computed, given back in order.

A simulated rank has no peers, so what a collective returns there is not a real value, and code that
reads such a value into Python (a mixture-of-experts router's ``.item()``, ``nonzero``, ``topk`` indices
that pick which experts run) cannot be followed.  Real ranks can say what it is: the confirmation's gloo
runs (``confirm_child.py``, ``"collectives": true``) run the entry's forward pass on N real ranks and log
every collective, in order, with the values it read and the values it wrote (``Log``).  A simulated rank
then runs with that log (``Replay``): at its k-th collective, if the collective is the same and reads the
same values the real rank k-th read, the values the real collective wrote are written into its outputs,
and they are real values (every rank's replay checks its own inputs, so a rank whose inputs differ stops
its replay and its reads stay unsupported).  At the first collective that differs in kind, shape or
input, the replay stops for good: from there on the rank is simulated as before.

The recorded ops are the same either way; only the values the code reads into Python are real, so the
path it takes is the one real ranks take for these inputs, an assumption stated with the verdict.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .message import numbers

# per c10d op: the arguments it writes its result into (c10d's schemas carry no alias annotations)
WRITTEN = {
    "c10d.allreduce_.default": ("tensors",),
    "c10d.allreduce_coalesced_.default": ("tensors",),
    "c10d.allgather_.default": ("output_tensors",),
    "c10d._allgather_base_.default": ("output_tensor",),
    "c10d.allgather_into_tensor_coalesced_.default": ("outputs",),
    "c10d.reduce_scatter_.default": ("output_tensors",),
    "c10d._reduce_scatter_base_.default": ("output_tensor",),
    "c10d.reduce_scatter_tensor_coalesced_.default": ("outputs",),
    "c10d.broadcast_.default": ("tensors",),
    "c10d.alltoall_base_.default": ("output",),
    "c10d.alltoall_.default": ("output_tensors",),
}
FUNCTIONAL = "_c10d_functional"
NOT_COLLECTIVES = {"_c10d_functional.wait_tensor.default", "_c10d_functional._wrap_tensor_autograd.default"}


def is_collective(func) -> bool:
    """A collective whose values the log carries (functional ones return them; c10d ones write them)."""
    kind = str(func)
    return kind not in NOT_COLLECTIVES and (func.namespace == FUNCTIONAL or func.namespace == "c10d")


def _tensors(value) -> list:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors(item)]
    return []


def _bound(func, args, kwargs) -> dict:
    names = [a.name for a in func._schema.arguments]
    bound = dict(zip(names, args))
    bound.update(kwargs)
    return bound


# the c10d ops that read their result's arguments before writing them (in place); the others only write them
READS_WRITTEN = {"c10d.allreduce_.default", "c10d.allreduce_coalesced_.default", "c10d.broadcast_.default"}


def read_tensors(func, args, kwargs) -> list:
    """Every tensor the collective reads: its inputs, and the previous contents of its outputs only where it
    reduces into them in place (an all-reduce, a broadcast); an all-gather's or all-to-all's fresh
    ``torch.empty`` buffer holds whatever memory held, which no real rank's log can match."""
    bound = _bound(func, args, kwargs)
    kind = str(func)
    skipped = () if kind in READS_WRITTEN else WRITTEN.get(kind, ())
    return [t for a in func._schema.arguments if a.name not in skipped for t in _tensors(bound.get(a.name))]


def written_tensors(func, args, kwargs, out) -> list | None:
    """The tensors holding the collective's result; None for a collective this module does not know."""
    kind = str(func)
    if func.namespace == FUNCTIONAL:
        return _tensors(out)
    if kind not in WRITTEN:
        return None
    bound = _bound(func, args, kwargs)
    return [t for name in WRITTEN[kind] for t in _tensors(bound.get(name))]


def log_mode():
    """A dispatch mode (made when torch is imported) logging each collective's reads and writes as real ranks run it."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from .collectives import _work_of
    from .recorder import is_traceable_wrapper_subclass_type

    class Log(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.entries: list[tuple[str, list, list]] = []   # (kind, values read, values written)

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if any(t is not torch.Tensor and is_traceable_wrapper_subclass_type(t) for t in types):
                return NotImplemented
            if not is_collective(func):
                return func(*args, **kwargs)
            read = [numbers(t) for t in read_tensors(func, args, kwargs)]
            out = func(*args, **kwargs)
            work = _work_of(out)
            if work is not None:
                work.wait()   # the values, now (every rank issues its collectives in the same order)
            if func.namespace == FUNCTIONAL:
                out = torch.ops._c10d_functional.wait_tensor(out)
            written = written_tensors(func, args, kwargs, out)
            self.entries.append((str(func), read, [numbers(t) for t in written or []]))
            return out

        def as_message(self) -> tuple[dict, dict]:
            meta = [{"kind": kind, "read": len(read), "written": len(written)} for kind, read, written in self.entries]
            arrays = {f"c{i}.r{j}": value for i, (_, read, _) in enumerate(self.entries) for j, value in enumerate(read)}
            arrays.update({f"c{i}.w{j}": value for i, (_, _, written) in enumerate(self.entries)
                           for j, value in enumerate(written)})
            return {"collectives": meta}, arrays

    return Log()


@dataclass
class Entry:
    kind: str
    read: list[np.ndarray]
    written: list[np.ndarray]


@dataclass
class Replay:
    """One rank's log, given back collective by collective (``call``)."""

    entries: list[Entry]
    position: int = 0
    stopped: str | None = None      # why the replay stopped (the rank is simulated from there on)
    given: int = 0                   # collectives whose real values were given
    lines: list[int | None] = field(default_factory=list)

    @classmethod
    def from_message(cls, meta: dict, arrays: dict) -> Replay:
        entries = []
        for i, item in enumerate(meta.get("collectives", [])):
            entries.append(Entry(str(item["kind"]), [arrays[f"c{i}.r{j}"] for j in range(int(item["read"]))],
                                 [arrays[f"c{i}.w{j}"] for j in range(int(item["written"]))]))
        return cls(entries)

    def call(self, func, args, kwargs, line: int | None = None) -> tuple[Any, bool]:
        """Run the (simulated) collective; (its result, whether real values were written into it)."""
        import torch

        from . import fake_group

        why = self._differs(func, args, kwargs)
        out = fake_group.call(func, args, kwargs)
        if why is None:
            written = written_tensors(func, args, kwargs, out)
            entry = self.entries[self.position]
            if written is None or len(written) != len(entry.written) or any(
                    tuple(t.shape) != tuple(v.shape) for t, v in zip(written, entry.written)):
                why = f"{func} writes other tensors than the real rank's collective did"
            else:
                with torch.no_grad():
                    for tensor, value in zip(written, entry.written):
                        tensor.data.copy_(torch.as_tensor(value).to(tensor.dtype))   # .data: no version bump
                self.position += 1
                self.given += 1
                self.lines.append(line)
                return out, True
        if self.stopped is None:
            self.stopped = f"at line {line}: {why}" if line is not None else why
        self.position = len(self.entries)
        return out, False

    def _differs(self, func, args, kwargs) -> str | None:
        if self.position >= len(self.entries):
            return "the real ranks ran fewer collectives" if self.stopped is None else self.stopped
        entry = self.entries[self.position]
        if entry.kind != str(func):
            return f"the real rank ran {entry.kind} here, this rank {func}"
        read = read_tensors(func, args, kwargs)
        if len(read) != len(entry.read):
            return f"{func} reads other tensors than the real rank's did"
        for tensor, value in zip(read, entry.read):
            mine = numbers(tensor)
            if mine.shape != value.shape:
                return f"{func} reads a tensor of shape {mine.shape}, the real rank's of {value.shape}"
            close = np.allclose(mine, value, rtol=1e-9, atol=0.0) if mine.dtype == np.float64 else \
                np.allclose(mine, value, rtol=1e-5, atol=1e-8) if mine.dtype.kind == "f" else np.array_equal(mine, value)
            if not close:
                return f"{func} reads other values than the real rank's collective did"
        return None

    def assumption(self, rank: int, world: int) -> str:
        said = (f"rank {rank} of {world}: the values of {self.given} collective(s) are those real gloo ranks "
                f"computed for these inputs (so the values the code read into Python are real, and the path it "
                f"took is the one real ranks take)")
        return said + (f"; from there on simulated ({self.stopped})" if self.stopped else "")


_ACTIVE: list[Replay] = []


def activate(replay: Replay | None) -> None:
    """The replay the next simulated rank's recorder takes (``None``: none)."""
    _ACTIVE[:] = [replay] if replay is not None else []


def current() -> Replay | None:
    return _ACTIVE[0] if _ACTIVE else None
