"""Run the user's source for real — on 1 rank and on N ranks — with the same global inputs.

Why: when the verifier finds a counterexample on an IR the LLM proposed, two stories fit —
the source is wrong, or the IR is.  Only the source's own numbers can tell them apart.  The
1-rank run is the reference (the same program on a world of size 1, exactly what the
verifier proves against); the N-rank run uses gloo on CPU over 127.0.0.1.

Conventions (those of the sample cases): ``example_inputs()`` gives global inputs; the entry
is ``forward(*inputs)`` (every rank gets the whole inputs and returns the global output),
``build(mesh)`` returning the parallelised callable, or an ``nn.Module`` class built without
arguments.  Inputs are handed over by IR input name; module parameters whose names match an
IR input get that global value (this rank's block when the code allocates a shard).

Every run happens in child processes (``worker.py``; forked from a torch-preloaded fork server
where the platform has one, so a run costs well under a second after the first) and is
stopped by a timeout: user code can deadlock.  Nothing here needs torch in the parent process.
The children follow ``frontends.sandbox``: the fork server and the workers start with a
scrubbed environment (no API keys), each worker limits its memory and CPU time and may
connect only to 127.0.0.1 before the user's code is loaded.
"""
from __future__ import annotations

import contextlib
import importlib.util
import math
import multiprocessing
import queue as queue_module
import socket
import sys
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from frontends.sandbox import scrubbed_environ

from . import worker

DEFAULT_TIMEOUT = 60.0
PEER_GRACE = 3.0  # after one rank fails, how long the others may take before they are stopped
SOURCE_RTOL, SOURCE_ATOL = 1e-7, 1e-9  # float64 on both sides: only reduction order differs


def torch_available() -> bool:
    return importlib.util.find_spec("torch") is not None


@dataclass(frozen=True)
class SourceRun:
    """What one group of ranks returned (flattened outputs per rank) or why it did not."""

    world: int
    outputs: tuple[tuple[Any, ...], ...] | None = None
    error: str | None = None
    timed_out: bool = False
    unrunnable: bool = False  # the harness could not run it (missing module, unmappable inputs)

    @property
    def ok(self) -> bool:
        return self.outputs is not None and self.error is None and not self.timed_out

    def failure(self) -> str:
        if self.timed_out:
            return f"no result after the timeout on {self.world} rank(s) (deadlock?)"
        return (self.error or "no result").strip().splitlines()[-1]


@dataclass(frozen=True)
class Difference:
    """The first place the N-rank outputs differ from the 1-rank outputs."""

    output: int
    rank: int
    index: tuple[int, ...]
    reference: Any
    parallel: Any
    max_abs_diff: float

    def __str__(self) -> str:
        where = f"output {self.output}" + (f"[{', '.join(map(str, self.index))}]" if self.index else "")
        return (f"{where} is {_number(self.parallel)} on rank {self.rank} of the parallel run but "
                f"{_number(self.reference)} on 1 rank (max |diff| {self.max_abs_diff:.3g})")


@dataclass(frozen=True)
class Execution:
    reference: SourceRun
    parallel: SourceRun

    def difference(self) -> Difference | None:
        """None when every rank returns the reference outputs (within float64 noise)."""
        reference = self.reference.outputs[0]
        for rank, outputs in enumerate(self.parallel.outputs):
            if len(outputs) != len(reference):
                return Difference(min(len(outputs), len(reference)), rank, (), f"{len(reference)} outputs",
                                  f"{len(outputs)} outputs", math.inf)
            for position, (want, got) in enumerate(zip(reference, outputs)):
                found = compare(want, got, SOURCE_RTOL, SOURCE_ATOL)
                if found is not None:
                    index, max_diff = found
                    return Difference(position, rank, index, _at(want, index), _at(got, index), max_diff)
        return None


def _number(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _at(value: Any, index: tuple[int, ...]) -> Any:
    array = np.asarray(value)
    if index and array.ndim == len(index):
        item = array[index]
        return float(item) if array.dtype.kind == "f" else item.item()
    return f"shape {tuple(array.shape)}" if array.ndim else (float(array) if array.dtype.kind == "f" else array.item())


def compare(want: Any, got: Any, rtol: float, atol: float) -> tuple[tuple[int, ...], float] | None:
    """(first differing index, max |diff|) or None when close; shape mismatches differ at ()."""
    a, b = np.asarray(want), np.asarray(got)
    if a.dtype.kind not in "biuf" or b.dtype.kind not in "biuf":
        return None if str(want) == str(got) else ((), math.inf)
    if a.shape != b.shape:
        return (), math.inf
    if a.size == 0:
        return None
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    close = np.isclose(b64, a64, rtol=rtol, atol=atol, equal_nan=True)
    if close.all():
        return None
    bad = tuple(int(i) for i in np.argwhere(~close)[0])
    with np.errstate(invalid="ignore"):
        diff = float(np.nanmax(np.abs(a64 - b64))) if np.isfinite(a64).all() and np.isfinite(b64).all() else math.inf
    return bad, diff


# --- parent side ------------------------------------------------------------------------------

_CONTEXT: Any = None


def _context():
    """A fork server with torch preloaded (fast repeated runs), else spawn."""
    global _CONTEXT
    if _CONTEXT is None:
        if "forkserver" in multiprocessing.get_all_start_methods():
            _CONTEXT = multiprocessing.get_context("forkserver")
            _CONTEXT.set_forkserver_preload(["torch", "torch.distributed", "frontends.sandbox", worker.__name__])
        else:
            _CONTEXT = multiprocessing.get_context("spawn")
    return _CONTEXT


@contextlib.contextmanager
def _without_main_module():
    """Start children without re-importing the parent's ``__main__`` (a REPL, stdin, a CLI
    script): they need nothing from it, and importing it costs time or fails."""
    main = sys.modules.get("__main__")
    saved = {name: getattr(main, name) for name in ("__file__", "__spec__") if hasattr(main, name)}
    try:
        if "__file__" in saved:
            del main.__file__
        if main is not None:
            main.__spec__ = None
        yield
    finally:
        for name, value in saved.items():
            setattr(main, name, value)


def warm_up() -> None:
    """Start the torch-preloading fork server now, so its imports overlap with other work
    (an LLM request, a proof) instead of delaying the first run."""
    if torch_available():
        ctx = _context()
        if ctx.get_start_method() == "forkserver":
            from multiprocessing import forkserver

            with _without_main_module(), scrubbed_environ():
                forkserver.ensure_running()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_source(source: str, path: str, *, mesh: tuple[tuple[str, int], ...],
               inputs: dict[str, np.ndarray] | None = None, entry: str | None = None,
               timeout: float = DEFAULT_TIMEOUT, seed: int = 0) -> Execution:
    """Run ``source`` on 1 rank and on ``mesh``'s ranks concurrently; ``inputs`` by IR name
    (None: the file's own ``example_inputs()``, seeded).  A group that could not start gloo
    (its port was taken between probing and binding) is retried once."""
    execution = _run_once(source, path, mesh, inputs, entry, timeout, seed)
    if any(run.unrunnable and run.error and "cannot start gloo" in run.error
           for run in (execution.reference, execution.parallel)):
        execution = _run_once(source, path, mesh, inputs, entry, timeout, seed)
    return execution


def _run_once(source: str, path: str, mesh: tuple[tuple[str, int], ...], inputs: dict[str, np.ndarray] | None,
              entry: str | None, timeout: float, seed: int) -> Execution:
    ctx = _context()
    results: queue_module.Queue = ctx.Queue()
    unit = tuple((name, 1) for name, _ in mesh)
    world = math.prod(size for _, size in mesh)
    job = {"source": source, "path": path, "entry": entry, "seed": seed, "timeout": timeout,
           "inputs": {k: np.asarray(v) for k, v in inputs.items()} if inputs is not None else None}
    # The 1-rank reference needs no network (an in-memory store); the N-rank group one port.
    groups = {1: (unit, 0), world: (mesh, _free_port())} if world > 1 else {1: (unit, 0)}
    processes: list[tuple[int, Any]] = []
    with _without_main_module(), scrubbed_environ():
        for size, (dims, port) in groups.items():
            for rank in range(size):
                process = ctx.Process(target=worker.run_rank, args=(rank, size, port, dims, job, results),
                                      daemon=True)
                process.start()
                processes.append((size, process))
    outcome: dict[int, dict[int, Any]] = {size: {} for size in groups}
    errors: dict[int, str] = {}
    unrunnable: set[int] = set()
    deadline = time.monotonic() + timeout
    first_error: float | None = None
    expected = sum(groups)
    received = 0
    stopped_early = False
    try:
        while received < expected:
            now = time.monotonic()
            if now > deadline or (first_error is not None and now - first_error > PEER_GRACE):
                stopped_early = True
                break
            try:
                kind, size, rank, payload = results.get(timeout=0.05)
            except queue_module.Empty:
                if not any(p.is_alive() for _, p in processes):
                    break
                continue
            received += 1
            if kind == "done":
                outcome[size][rank] = payload
            else:
                errors.setdefault(size, f"rank {rank}: {payload}")
                if kind == "harness":
                    unrunnable.add(size)
                first_error = first_error or time.monotonic()
    finally:
        for _, process in processes:
            if process.is_alive():
                process.kill()
        for _, process in processes:
            process.join(timeout=5)
        with contextlib.suppress(Exception):
            results.close()
            results.cancel_join_thread()

    def run_of(size: int) -> SourceRun:
        if size in errors:
            return SourceRun(size, error=errors[size], unrunnable=size in unrunnable)
        if len(outcome[size]) < size:
            if stopped_early:
                return SourceRun(size, timed_out=True)
            codes = sorted({p.exitcode for s, p in processes if s == size and p.exitcode not in (0, None)})
            return SourceRun(size, error=f"a worker process exited (code {codes}) without reporting",
                             unrunnable=True)
        return SourceRun(size, outputs=tuple(tuple(outcome[size][r]) for r in range(size)))

    reference = run_of(1)
    return Execution(reference, run_of(world) if world > 1 else reference)
