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

Every run happens in one isolated child (``frontends.sandbox``: its own namespaces where Linux
allows them, a scrubbed environment, limits), ``group_run.py``, which starts the rank processes
(``worker.py``) inside it and answers in ``frontends.wire``'s data-only format; everything is
stopped by a timeout: user code can deadlock.  Nothing here needs torch in the parent process.
"""
from __future__ import annotations

import importlib.util
import math
import os
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from frontends import wire
from frontends.sandbox import run_python

DEFAULT_TIMEOUT = 60.0
_PROJECT_ROOT = str(Path(__file__).resolve().parents[1])
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

_STARTUP_SECONDS = 30.0  # importing torch in the sandboxed child before the ranks start


def warm_up() -> None:
    """Nothing to start ahead: every run gets a fresh sandboxed child (kept for callers)."""


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
    unit = tuple((name, 1) for name, _ in mesh)
    world = math.prod(size for _, size in mesh)
    job = {"source": source, "path": path, "entry": entry, "seed": seed, "timeout": timeout,
           "inputs": {k: np.asarray(v) for k, v in inputs.items()} if inputs is not None else None}
    groups = [[1, [list(d) for d in unit]]] + ([[world, [list(d) for d in mesh]]] if world > 1 else [])
    with tempfile.TemporaryDirectory(prefix="verify-agent-run-") as scratch:
        request = os.path.join(scratch, "job")
        with open(request, "wb") as handle:
            handle.write(wire.encode({"job": job, "groups": groups}))
        done = run_python(["-m", "agent.group_run", request], timeout=timeout + _STARTUP_SECONDS,
                          cwd=scratch, extra_env={"PYTHONPATH": _PROJECT_ROOT, "CUDA_VISIBLE_DEVICES": ""})
    answers, unreadable = wire.decode_stream(done.result, check=_check_answer)
    if not answers:
        reason = (f"its answer could not be read ({unreadable})" if unreadable is not None
                  else "no answer before the time limit" if done.timed_out
                  else f"it ended with code {done.returncode}: "
                       f"{(done.stderr.decode(errors='replace').strip().splitlines() or ['no output'])[-1]}")
        failed = SourceRun(1, error=f"the run's process gave no result: {reason}", unrunnable=True)
        return Execution(failed, replace(failed, world=world))
    runs = {size: SourceRun(size, tuple(tuple(rank) for rank in run["outputs"]) if run["outputs"] is not None
                            else None, run["error"], bool(run["timed_out"]), bool(run["unrunnable"]))
            for size, run in answers[0]["runs"]}
    return Execution(runs[1], runs[world] if world > 1 else runs[1])


def _check_answer(answer: Any) -> None:
    """Refuse anything but ``{"runs": [[size, run], ...]}`` with runs of the right types."""
    if not isinstance(answer, dict) or not isinstance(answer.get("runs"), list):
        raise wire.WireError("not a run result")
    for item in answer["runs"]:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], int) and isinstance(item[1], dict)):
            raise wire.WireError("a run is malformed")
        run = item[1]
        outputs = run.get("outputs")
        if outputs is not None and not (isinstance(outputs, list) and len(outputs) == item[0]
                                        and all(isinstance(rank, list) for rank in outputs)):
            raise wire.WireError("a run's outputs are malformed")
        if not isinstance(run.get("error"), (str, type(None))) or not isinstance(run.get("timed_out"), bool) \
                or not isinstance(run.get("unrunnable"), bool):
            raise wire.WireError("a run's status is malformed")
