"""Run the child process that runs the user's code, isolated (``frontends.sandbox``), and read its answer.

The child answers on its private result channel with ``TracedProgram`` / ``TraceFailure`` values
in ``frontends.wire``'s data-only format; an answer that is not one (cut off, forged, of the wrong
types) is an ``unsupported`` failure that says so, never code run here and never an internal error.
"""
from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from frontends import wire
from frontends.sandbox import DEFAULT_MEMORY_BYTES, run_python, scrub
from verifier.ir import Op, Span, TensorSpec
from verifier.placements import Partial, Replicate, Shard, Varying
from verifier.traced_ir import Comparison, TracedProgram

from .failure import TraceFailure
from .found import Candidate, Discovery

MEMORY_LIMIT = DEFAULT_MEMORY_BYTES
_CARRIED = (TracedProgram, TraceFailure, Discovery, Candidate, Comparison, Op, Span, TensorSpec, Shard, Replicate,
            Partial, Varying)


@dataclass(frozen=True)
class TraceOptions:
    entry: str | None = None
    shapes: dict = field(default_factory=dict)          # input name -> shape tuple
    layouts: dict = field(default_factory=dict)         # parameter name -> "Shard(0)" | "Replicate"
    world: int = 2
    also_worlds: tuple[int, ...] = ()                   # further world sizes, run after ``world``
    timeout: float = 120.0
    memory_bytes: int = MEMORY_LIMIT
    paths: tuple[str, ...] = ()                         # --path: directories to import from
    args: tuple[str, ...] = ()                          # --arg NAME=LITERAL, as written
    harness: str | None = None                          # --harness FILE.py: builds the entry and its inputs


def scrubbed_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The child's environment: ``environ`` without secrets, no GPU, this project importable."""
    clean = scrub(os.environ if environ is None else environ)
    clean["CUDA_VISIBLE_DEVICES"] = ""
    clean.setdefault("OMP_NUM_THREADS", "1")
    project_root = str(Path(__file__).resolve().parents[2])
    clean["PYTHONPATH"] = os.pathsep.join(p for p in (project_root, clean.get("PYTHONPATH", "")) if p)
    return clean


def trace_file(path: str | Path, options: TraceOptions = TraceOptions(), shown_as: str | None = None
               ) -> TracedProgram | TraceFailure:
    """Run ``path`` on one device and on ``options.world`` simulated ranks; the recorded program."""
    return trace_file_at_worlds(path, options, shown_as)[0]


def trace_file_at_worlds(path: str | Path, options: TraceOptions = TraceOptions(), shown_as: str | None = None
                         ) -> tuple[TracedProgram | TraceFailure, dict[int, TracedProgram | TraceFailure]]:
    """The program on ``options.world`` ranks and, when that one was recorded, on each of
    ``options.also_worlds`` (those the time limit left out are absent)."""
    path = Path(path).resolve()
    request = {"path": str(path), "shown_as": shown_as or str(path), "entry": options.entry,
               "shapes": {k: list(v) for k, v in options.shapes.items()}, "layouts": dict(options.layouts),
               "world": int(options.world), "also_worlds": [int(w) for w in options.also_worlds],
               "paths": [str(Path(p).resolve()) for p in options.paths], "args": list(options.args),
               "harness": str(Path(options.harness).resolve()) if options.harness else None}
    done, (answers, unreadable) = _run_child(request, options, path.parent)
    if unreadable is not None and not answers:
        return TraceFailure("unsupported", f"the tracing process's answer could not be read ({unreadable}); "
                                           f"the file may have written to it"), {}
    if not answers:
        if done.timed_out:
            return TraceFailure("timeout", f"running the file took longer than {options.timeout:g} s"), {}
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        return TraceFailure("internal", f"the tracing process ended with code {done.returncode}: {tail[0]}"), {}
    main, *further = answers
    if isinstance(main, TraceFailure) and main.reads_collective:
        again = _with_real_collectives(request, options, path.parent)
        if again is not None:
            main, *further = again
    return main, dict(zip(options.also_worlds, further))


def _with_real_collectives(request: dict, options: TraceOptions, cwd: Path) -> list | None:
    """A rank read values a simulated collective computed: real gloo ranks give those values
    (``real_collectives.py``) and the ranks are traced again with them (``replay.py``); None when the
    real ranks gave none."""
    from .real_collectives import collect

    with tempfile.TemporaryDirectory(prefix="verify-agent-replay-") as scratch:
        logs = {}
        for world in (int(options.world), *(int(w) for w in options.also_worlds)):
            log = collect(request, world, options.timeout, options.memory_bytes, Path(scratch, f"log{world}"))
            if log is not None:
                logs[str(world)] = log
        if str(int(options.world)) not in logs:
            return None
        done, (answers, _) = _run_child({**request, "replay": logs}, options, cwd)
    return answers or None


def _run_child(request: dict, options: TraceOptions, cwd: Path):
    """Run ``child.py`` on ``request`` in the sandbox: the finished child and its decoded answers."""
    with tempfile.TemporaryDirectory(prefix="verify-agent-trace-") as scratch:
        request_path = os.path.join(scratch, "request.json")
        with open(request_path, "w", encoding="utf-8") as handle:
            json.dump(request, handle)
        done = run_python([str(Path(__file__).with_name("child.py")), request_path], timeout=options.timeout,
                          memory_bytes=options.memory_bytes, cwd=str(cwd), extra_env=scrubbed_environment({}))
    return done, wire.decode_stream(done.result, _CARRIED, check=_check)


def discover_file(path: str | Path, options: TraceOptions = TraceOptions()) -> Discovery | TraceFailure:
    """The distributed entries of ``path`` (``discover.py``), found in the sandboxed child by importing
    the file as a run would."""
    path = Path(path).resolve()
    request = {"mode": "discover", "path": str(path), "shown_as": str(path),
               "paths": [str(Path(p).resolve()) for p in options.paths]}
    done, (answers, unreadable) = _run_child(request, options, path.parent)
    if not answers:
        if done.timed_out:
            return TraceFailure("timeout", f"importing the file took longer than {options.timeout:g} s")
        why = unreadable or (done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"])[0]
        return TraceFailure("internal", f"the tracing process ended with code {done.returncode}: {why}")
    return answers[0]


def _check(value) -> None:
    """Refuse anything but a ``TracedProgram``, ``TraceFailure`` or ``Discovery`` whose fields have their types."""
    if not isinstance(value, (TracedProgram, TraceFailure, Discovery)):
        raise wire.WireError(f"a {type(value).__name__} is not a traced program")
    wire.check_types(value)
