"""The sandboxed child of ``execute.py``: run the user's source on 1 rank and on N gloo ranks.

``python -m agent.group_run JOB`` runs inside one ``frontends.sandbox`` child (every rank of a
group must share its loopback interface, so the ranks are this process's own children).  JOB is
a ``frontends.wire`` message (the job of ``worker.run_rank`` plus the groups to run); the
answer goes back on the private result channel as one message:
``{"runs": {size: {"outputs": [[array, ...] per rank] | None, "error": str | None,
"timed_out": bool, "unrunnable": bool}}}``.  The rank processes talk to this one through a
``multiprocessing`` queue: both sides run the user's code, so only the answer that leaves the
sandbox has to be data only.
"""
from __future__ import annotations

import contextlib
import multiprocessing
import queue as queue_module
import sys
import time
from typing import Any

PEER_GRACE = 3.0  # after one rank fails, how long the others may take before they are stopped



def run_groups(job: dict, groups: dict[int, tuple]) -> dict[int, dict[str, Any]]:
    """Every group's ranks at once (``groups``: size -> mesh dims), stopped at ``job["timeout"]``."""
    from frontends.sandbox import free_loopback_port

    from . import worker

    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    ctx = multiprocessing.get_context(method)
    results = ctx.Queue()
    ports = {size: (free_loopback_port() if size > 1 else 0) for size in groups}
    processes = []
    for size, dims in groups.items():
        for rank in range(size):
            process = ctx.Process(target=worker.run_rank, args=(rank, size, ports[size], dims, job, results),
                                  daemon=True)
            process.start()
            processes.append((size, process))
    outcome: dict[int, dict[int, Any]] = {size: {} for size in groups}
    errors: dict[int, str] = {}
    unrunnable: set[int] = set()
    deadline = time.monotonic() + job["timeout"]
    first_error: float | None = None
    expected, received, stopped_early = sum(groups), 0, False
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

    def run_of(size: int) -> dict[str, Any]:
        if size in errors:
            return {"outputs": None, "error": errors[size], "timed_out": False, "unrunnable": size in unrunnable}
        if len(outcome[size]) < size:
            if stopped_early:
                return {"outputs": None, "error": None, "timed_out": True, "unrunnable": False}
            codes = sorted({p.exitcode for s, p in processes if s == size and p.exitcode not in (0, None)})
            return {"outputs": None, "error": f"a worker process exited (code {codes}) without reporting",
                    "timed_out": False, "unrunnable": True}
        return {"outputs": [list(outcome[size][r]) for r in range(size)], "error": None, "timed_out": False,
                "unrunnable": False}

    return {size: run_of(size) for size in groups}


def main(argv: list[str]) -> int:
    from frontends import wire
    from frontends.sandbox import enter_child, result_channel

    channel = result_channel()
    with open(argv[0], "rb") as handle:
        request = wire.decode(handle.read())
    enter_child(memory_bytes=None)
    groups = {int(size): tuple(tuple(d) for d in dims) for size, dims in request["groups"]}
    with contextlib.suppress(ImportError):
        import torch  # noqa: F401 - imported once here, before the ranks fork
    runs = run_groups(request["job"], groups)
    if channel is not None:
        wire.write(channel, {"runs": [[size, run] for size, run in runs.items()]})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
