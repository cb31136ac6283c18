"""Ask real gloo ranks what the collectives of a traced entry compute (``replay.py`` gives the values back).

Started by the runner when a simulated rank read values a simulated collective computed: the
confirmation child (``confirm_child.py``) runs the entry's forward pass on ``world`` real gloo ranks,
built exactly as the tracing runs build it, and logs every collective; the log is written to a file the
tracing child reads (data-only, ``message.py``).
"""
from __future__ import annotations

from pathlib import Path

from .confirm import CHILD, SEED, WALL_SLACK
from .message import MessageError, pack, unpack


def collect(request: dict, world: int, timeout: float, memory_bytes: int, into: Path) -> str | None:
    """Write ``world`` real ranks' collective logs to ``into``; None (and nothing written) when the runs
    gave none (a rank raised, the time ran out)."""
    from frontends.sandbox import run_python

    common = {"collectives": True, "path": request["path"], "shown_as": request["shown_as"],
              "entry": request.get("entry"), "shapes": dict(request.get("shapes", {})), "sizes": {}, "seed": SEED,
              "gloo_timeout": max(5.0, timeout * WALL_SLACK * 0.5), "paths": list(request.get("paths", [])),
              "args": list(request.get("args", [])), "harness": request.get("harness")}
    message = pack({"common": common, "runs": [{"world": world, "rank": r} for r in range(world)],
                    "timeout": max(5.0, timeout - 5.0), "wall": max(5.0, timeout * WALL_SLACK - 5.0)}, {})
    done = run_python([str(CHILD)], timeout=timeout * WALL_SLACK, input=message,
                      cwd=str(Path(request["path"]).parent), memory_bytes=memory_bytes,
                      extra_env={"CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"})
    try:
        meta, arrays = unpack(done.result)
    except MessageError:
        return None
    answers = meta.get("runs")
    if not isinstance(answers, list) or len(answers) != world or \
            not all(isinstance(a, dict) and a.get("status") == "ok" and isinstance(a.get("collectives"), list)
                    for a in answers):
        return None
    into.write_bytes(pack({"world": world, "ranks": [{"collectives": a["collectives"]} for a in answers]}, arrays))
    return str(into)
