"""Run the child process that runs the user's code: scrubbed environment, time and memory limits.

The child gets none of the parent's secrets (variables whose names contain KEY, TOKEN, SECRET,
PASSWORD, OPENAI_, AWS_, and proxy settings), no GPU, an address-space limit and a wall-clock
timeout; it answers through a result file holding a pickled ``TracedProgram`` or
``TraceFailure`` (unpickled only from the child this process started).
"""
from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from verifier.traced_ir import TracedProgram

from .failure import TraceFailure

_SECRET_PARTS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "OPENAI_", "AWS_")
_PROXIES = {"http_proxy", "https_proxy", "all_proxy", "no_proxy", "ftp_proxy"}
MEMORY_LIMIT = 8 * 1024 ** 3


@dataclass(frozen=True)
class TraceOptions:
    entry: str | None = None
    shapes: dict = field(default_factory=dict)          # input name -> shape tuple
    layouts: dict = field(default_factory=dict)         # parameter name -> "Shard(0)" | "Replicate"
    world: int = 2
    also_worlds: tuple[int, ...] = ()                   # further world sizes, run after ``world``
    timeout: float = 120.0
    memory_bytes: int = MEMORY_LIMIT


def scrubbed_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    environ = dict(os.environ if environ is None else environ)
    clean = {name: value for name, value in environ.items()
             if not any(part in name.upper() for part in _SECRET_PARTS) and name.lower() not in _PROXIES}
    clean["CUDA_VISIBLE_DEVICES"] = ""
    clean.setdefault("OMP_NUM_THREADS", "1")
    clean["PYTHONDONTWRITEBYTECODE"] = "1"
    project_root = str(Path(__file__).resolve().parents[2])
    clean["PYTHONPATH"] = os.pathsep.join(p for p in (project_root, clean.get("PYTHONPATH", "")) if p)
    return clean


def _limit_memory(limit: int):
    def apply() -> None:
        import resource

        try:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        except (ValueError, OSError):
            pass
    return apply


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
               "world": int(options.world), "also_worlds": [int(w) for w in options.also_worlds]}
    with tempfile.TemporaryDirectory(prefix="verify-agent-trace-") as scratch:
        request_path, result_path = os.path.join(scratch, "request.json"), os.path.join(scratch, "result.pickle")
        with open(request_path, "w", encoding="utf-8") as handle:
            json.dump(request, handle)
        completed = None
        try:
            completed = subprocess.run(
                [sys.executable, str(Path(__file__).with_name("child.py")), request_path, result_path],
                cwd=str(path.parent), env=scrubbed_environment(), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=options.timeout,
                preexec_fn=_limit_memory(options.memory_bytes) if os.name == "posix" else None)
        except subprocess.TimeoutExpired:
            if not os.path.exists(result_path):
                return TraceFailure("timeout", f"running the file took longer than {options.timeout:g} s"), {}
        if not os.path.exists(result_path):
            tail = (completed.stderr or b"").decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
            return TraceFailure("internal", f"the tracing process ended with code {completed.returncode}: {tail[0]}"), {}
        main = _load(result_path)
        also = {world: _load(f"{result_path}.{world}") for world in options.also_worlds
                if os.path.exists(f"{result_path}.{world}")}
        return main, also


def _load(path: str):
    with open(path, "rb") as handle:   # written by the child this process started
        return pickle.load(handle)
