"""``python -m verify_agent ARGS`` for the tests, each run forked from one server that imported the command once.

A command started cold spends over a CPU second importing the tool (its CLI, the traced frontend, the
verifier, Z3) before it reads its file; the suite runs a few hundred.  The server (started with the first
run, stopped at the end of the test run) imports those modules and nothing else: no torch, no thread, no
file read.  Each run is a fresh fork of it that takes the caller's working directory, environment and
arguments, runs the console entry (``verify_agent.cli.main``, deadline and hardening included) as
``python -m verify_agent`` would, and exits with its exit code; its output goes to files the caller reads.
The file the command checks runs in the children the command starts, as in a cold run.
"""
from __future__ import annotations

import atexit
import json
import os
import select
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

_SERVER = r"""
import json, os, sys
import verify_agent, verify_agent.cli, frontends.traced, verifier.traced_check, z3  # what every command loads

MAIN = os.path.join(os.path.dirname(verify_agent.__file__), "__main__.py")
for line in sys.stdin:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.chdir(request["cwd"])
            os.environ.clear()
            os.environ.update(request["env"])
            import tempfile
            tempfile.tempdir = None
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            for fd, path in ((1, request["out"]), (2, request["err"])):
                os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
            sys.stdin = open(os.devnull)
            sys.argv = [MAIN, *request["argv"]]
            sys.modules["__main__"].__package__ = "verify_agent"   # click names the program python -m verify_agent
            from verify_agent.cli import main
            main()
            code = 0
        except SystemExit as ending:
            code = ending.code if isinstance(ending.code, int) else (0 if ending.code is None else 1)
        except BaseException:
            import traceback
            traceback.print_exc()
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
    print(json.dumps({"pid": pid}), flush=True)
    _, status = os.waitpid(pid, 0)
    print(json.dumps({"code": os.waitstatus_to_exitcode(status)}), flush=True)
"""

_server: subprocess.Popen | None = None
_log: str | None = None   # the server's own stderr (an import that fails there)


def _stop() -> None:
    global _server
    if _server is not None:
        _server.stdin.close()
        _server.wait()
        _server = None


def _started() -> subprocess.Popen:
    global _server, _log
    if _server is None or _server.poll() is not None:
        handle, _log = tempfile.mkstemp(prefix="warm-cli-server-", suffix=".log")
        _server = subprocess.Popen([sys.executable, "-c", _SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=handle, cwd=REPO, text=True, bufsize=1)
        os.close(handle)
        atexit.register(_stop)
    return _server


def _answer(server: subprocess.Popen, deadline: float | None) -> dict:
    ready, _, _ = select.select([server.stdout], [], [], deadline)
    if not ready:
        raise TimeoutError
    line = server.stdout.readline()
    if not line:
        raise RuntimeError("the command server stopped: " + Path(_log).read_text()[-2000:])
    return json.loads(line)


def run(argv: list[str], *, cwd: Path | str = REPO, timeout: float | None = None) -> subprocess.CompletedProcess:
    """What ``subprocess.run([sys.executable, "-m", "verify_agent", *argv], capture_output=True, text=True,
    cwd=cwd, timeout=timeout)`` returns (``subprocess.TimeoutExpired`` past ``timeout``, the run killed)."""
    server = _started()
    with tempfile.TemporaryDirectory(prefix="warm-cli-") as folder:
        out, err = os.path.join(folder, "out"), os.path.join(folder, "err")
        server.stdin.write(json.dumps({"argv": list(argv), "cwd": str(cwd), "env": dict(os.environ),
                                       "out": out, "err": err}) + "\n")
        server.stdin.flush()
        pid = _answer(server, 60.0)["pid"]
        try:
            code = _answer(server, timeout)["code"]
        except TimeoutError:
            os.kill(pid, 9)
            _answer(server, 60.0)
            raise subprocess.TimeoutExpired([sys.executable, "-m", "verify_agent", *argv], timeout)
        return subprocess.CompletedProcess([sys.executable, "-m", "verify_agent", *argv], code,
                                           Path(out).read_text(), Path(err).read_text())
