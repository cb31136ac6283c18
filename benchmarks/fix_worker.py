"""The repair campaign's fix runs, one after another in one process with their warm servers kept.

Started cold, every ``verify-agent fix`` pays for its fork server's ``import torch`` (and the file's
installed libraries: megatron-core alone is ~5 CPU s), measured as 6-12 s of a 15-40 s fix run at a
load of 10-15.  Here each bug is the command line's own entry (``verify_agent.cli.main``, deadline and
watchdog armed as for the console) run in this process, and the fork servers (``frontends/fork_server.py``)
stay up between bugs, one per set of installed imports, as ``translate DIR`` keeps one for a
directory.  Nothing else is shared: every trace, candidate and real-rank run is still a sandboxed
grandchild forked from a server image no user code touched.

Protocol: one JSON request a line on stdin, ``{"args": [...], "file": path, "stdout": path, "cwd": path}``;
the command runs in that directory, its stdout goes to that file, its stderr to this process's stderr, followed by ``@@exit N``.
"""
from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

END = "@@exit"
SERVER_CPU_SECONDS = 36000.0   # the servers' own CPU (imports and forks); each run keeps its own limit
MAX_SERVERS = 6                # warm servers kept (least recently used closed first)


def _libraries(path: Path) -> tuple[str, ...]:
    """What ``verify_agent.repair.traced_fixes.warm_for`` would preload for this file."""
    from frontends.fork_server import installed_imports
    from frontends.traced.location import locate

    try:
        roots = [Path(locate(str(path)).root)]
    except (OSError, ValueError):
        roots = [path.resolve().parent]
    return tuple(installed_imports([(path, path.read_text())], roots))


def _run(args: list[str], stdout: str) -> int:
    from verify_agent import cli

    saved = os.dup(1)
    with open(stdout, "w") as out:
        sys.stdout.flush()
        os.dup2(out.fileno(), 1)
        try:
            cli.main(args, arm_deadline=True)
            code = 0
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else 1
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)
    for thread in threading.enumerate():   # the ended command's watchdog must not outlive it
        if thread.name == "verify-agent-deadline":
            thread.join(timeout=3.0)
    return code


def main() -> int:
    from frontends import sandbox
    from frontends.fork_server import WarmServer
    from frontends.traced.runner import scrubbed_environment

    servers: dict[tuple[str, ...], WarmServer] = {}
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        libraries = _libraries(Path(request["file"]))
        server = servers.pop(libraries, None)
        if server is None:
            server = WarmServer(memory_bytes=sandbox.DEFAULT_MEMORY_BYTES, cpu_seconds=SERVER_CPU_SECONDS,
                                environ=scrubbed_environment(None), libraries=libraries)
        servers[libraries] = server   # most recently used last
        while len(servers) > MAX_SERVERS:
            servers.pop(next(iter(servers))).close()
        sandbox._WARM = server
        os.chdir(request.get("cwd") or os.getcwd())
        try:
            code = _run(request["args"], request["stdout"])
        finally:
            sandbox._WARM = None
        sys.stderr.write(f"{END} {code}\n")
        sys.stderr.flush()
    for server in servers.values():
        server.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
