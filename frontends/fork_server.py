"""Warm runs: one sandboxed child imports torch once, then forks one grandchild per run.

``translate DIR`` checks many files; started cold, every file's children (discovery, tracing,
confirmation) pay for ``import torch`` again.  Inside ``warm_runs()``, ``sandbox.run_python`` hands
the tracer's scripts (``frontends/traced/*.py``) to a fork server instead:

* the server is started by ``sandbox.start_python`` exactly like a cold child (the same
  namespaces, limits, scrubbed environment, death with the tool); it runs no user code: it imports
  torch and the tracer's modules, then reads requests on its stdin;
* for each request it forks a grandchild that becomes what the cold child would have been: its
  own session, stdin/stdout/stderr and result pipe, the run's environment (scrubbed by the tool),
  working directory and limits (memory, CPU seconds), no capabilities and ``PR_SET_NO_NEW_PRIVS``;
  it runs the script as ``__main__`` and answers through the same wire format
  (``frontends.wire``) as a cold child;
* the grandchild is killed at the run's time limit, and after every run the server kills whatever
  is left in its namespace (or below it, where namespaces are not available), so no state of one
  file reaches the next: each file starts from the server's image, which no user code touched.  The
  server is not dumpable and the grandchildren hold no capabilities, so a grandchild cannot
  read or write the server's memory; inside a PID namespace the server (its first process) cannot
  be killed from within.  If the server dies anyway, the run says so and the next run starts a
  new one.

The server answers each request with one message (a length, then ``frontends.wire``): the
grandchild's exit code, the tails of its stdout/stderr, its result bytes (decoded by the caller as
a cold child's), whether it was stopped at its time limit.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import struct
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path
from typing import Mapping, Optional, Sequence

_LENGTH = struct.Struct("<Q")
_HERE = Path(__file__).resolve().parent
WARM_SCRIPTS = _HERE / "traced"          # the scripts a server runs: the tracer's children
# imported once by the server: torch and what the tracer's children import before user code runs
PRELOAD = ("torch", "torch.distributed", "torch.testing._internal.distributed.fake_pg", "numpy", "torch._dynamo",
           "torch.distributed.tensor", "torch.distributed.fsdp", "torch.distributed.tensor.parallel",
           "frontends.wire", "frontends.traced.child", "frontends.traced.run", "frontends.traced.recorder",
           "frontends.traced.to_ir", "frontends.traced.collectives", "frontends.traced.correspondence",
           "frontends.traced.entries", "frontends.traced.discover", "frontends.traced.harness_file",
           "frontends.traced.harness_guard", "frontends.traced.location", "frontends.traced.confirm_child",
           "frontends.traced.message", "verifier.traced_ir")
_GRACE_S = 20.0   # beyond a run's own time limit, for the server to stop it and answer


class WarmServer:
    """The tool's side: start the server lazily, send it runs, read its answers."""

    def __init__(self, *, memory_bytes: Optional[int], cpu_seconds: float, environ: Mapping[str, str],
                 libraries: Sequence[str] = ()) -> None:
        self.memory_bytes, self.cpu_seconds, self.environ = memory_bytes, cpu_seconds, dict(environ)
        self.libraries = tuple(libraries)
        self.disabled = False   # runs are cold again (the server could not fork safely, or died twice)
        self.deaths = 0
        self.process = None
        self.read_end: Optional[int] = None
        self.adopted_before = None
        self.mode = "process"
        self.starts = 0
        self.stderr_tail: deque = deque(maxlen=64)

    def accepts(self, args: Sequence[str]) -> bool:
        """A run of one of the tracer's scripts (others keep their cold children)."""
        return (not self.disabled and bool(args) and not args[0].startswith("-")
                and Path(args[0]).resolve().parent == WARM_SCRIPTS)

    def run(self, args: Sequence[str], *, timeout: float, memory_bytes: Optional[int], input: Optional[bytes],
            cwd: Optional[str], env: Mapping[str, str], cpu_seconds: float):
        """As ``sandbox.run_python`` would, in a grandchild of the server (None: run it cold)."""
        import numpy as np

        from . import wire
        from .sandbox import ChildResult

        started = time.monotonic()
        if self.process is None or self.process.poll() is not None:
            self._start()
        request = {"args": [str(a) for a in args], "timeout": float(timeout), "cpu": float(cpu_seconds),
                   "memory": int(memory_bytes) if memory_bytes else None, "cwd": cwd, "env": dict(env),
                   "input": None if input is None else np.frombuffer(input, dtype=np.uint8)}
        try:
            _write_frame(self.process.stdin, wire.encode(request))
            data = _read_frame(self.read_end, started + timeout + _GRACE_S)
        except (OSError, ValueError):
            data = None
        if data is None:   # the server died or hung: the next run starts another (after two deaths: cold runs)
            self.deaths += 1
            self.disabled = self.deaths >= 2
            timed_out = time.monotonic() >= started + timeout
            why = "" if timed_out else f"the warm server ended: {self._last_words()}"
            self.close()
            return ChildResult(None, b"", why.encode(), timed_out, time.monotonic() - started, b"", self.mode)
        try:
            answer = wire.decode(data)
        except wire.WireError as error:
            self.close()
            return ChildResult(None, b"", f"the warm server's answer is unreadable ({error})".encode(), False,
                               time.monotonic() - started, b"", self.mode)
        if answer.get("cold"):   # the server cannot fork safely: every run from now on is cold
            self.disabled = True
            self.close()
            return None
        return ChildResult(answer["returncode"], bytes(answer["stdout"]), bytes(answer["stderr"]),
                           bool(answer["timed_out"]), time.monotonic() - started, bytes(answer["result"]), self.mode)

    def _start(self) -> None:
        from .sandbox import start_python

        self.close()
        env = dict(self.environ, PYTHONDONTWRITEBYTECODE="1")
        self.process, self.read_end, self.mode, self.adopted_before = start_python(
            [str(Path(__file__)), *self.libraries], env=env, memory_bytes=self.memory_bytes,
            cpu_seconds=self.cpu_seconds, cwd=str(_HERE), stdin=True)
        self.starts += 1
        self.stderr_tail = deque(maxlen=64)
        for stream, keep in ((self.process.stdout, None), (self.process.stderr, self.stderr_tail)):
            threading.Thread(target=_drain, args=(stream, keep), daemon=True).start()

    def cpu_seconds_used(self) -> float:
        """CPU seconds of the running server and everything below it so far (runs it has reaped
        included); a server that ended is counted in this process's ``RUSAGE_CHILDREN``."""
        if self.process is None:
            return 0.0
        from .sandbox import _descendants, cpu_seconds_of

        return sum(cpu_seconds_of(pid) for pid in [self.process.pid, *_descendants(self.process.pid)])

    def _last_words(self) -> str:
        lines = b"".join(self.stderr_tail).decode(errors="replace").strip().splitlines()
        return lines[-1] if lines else "no output"

    def close(self) -> None:
        from .sandbox import stop

        if self.process is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()   # the server ends at the end of its requests: its CPU is accounted
            with contextlib.suppress(Exception):
                self.process.wait(timeout=5)
            stop(self.process, self.read_end, self.adopted_before)
        self.process, self.read_end, self.adopted_before = None, None, None


@contextlib.contextmanager
def warm_runs(*, cpu_seconds: float, memory_bytes: Optional[int] = None, environ: Optional[Mapping[str, str]] = None,
              libraries: Sequence[str] = ()):
    """Within this block the tracer's children run warm (one server, started at the first run).
    ``libraries``: installed modules the files import (``installed_imports``), imported once too.
    Inside another such block (a repair within ``translate DIR``): that block's server."""
    from frontends import sandbox
    from frontends.traced.runner import scrubbed_environment

    if sandbox._WARM is not None:
        yield sandbox._WARM
        return
    server = WarmServer(memory_bytes=memory_bytes or sandbox.DEFAULT_MEMORY_BYTES, cpu_seconds=cpu_seconds,
                        environ=scrubbed_environment(environ), libraries=libraries)
    previous, sandbox._WARM = sandbox._WARM, server
    try:
        yield server
    finally:
        sandbox._WARM = previous
        server.close()


def installed_imports(files: Sequence[tuple[Path, str]], import_roots: Sequence[Path]) -> list[str]:
    """The modules the files import at their top level that are installed packages (found in this
    interpreter's site directories, not torch, which the server imports anyway), without those a
    file could import as its own (a module or package of that name in one of ``import_roots``)."""
    import ast
    import importlib.util
    import site
    import sysconfig

    sites = {str(Path(p).resolve()) for p in (*site.getsitepackages(), site.getusersitepackages(),
                                             sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"])}
    names: list[str] = []
    for _, source in files:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, ast.Import):
                names.extend(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.append(node.module)
    found = []
    for name in dict.fromkeys(names):
        top = name.split(".")[0]
        if top == "torch" or any((root / top).exists() or (root / f"{top}.py").exists() for root in import_roots):
            continue
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            continue
        origin = next(iter(spec.submodule_search_locations or []), None) or spec.origin if spec else None
        if origin and any(str(Path(origin).resolve()).startswith(place + os.sep) for place in sites):
            found.append(name)
    return found


def _drain(stream, keep: Optional[deque]) -> None:
    with contextlib.suppress(OSError, ValueError):
        for chunk in iter(lambda: stream.read1(65536), b""):
            if keep is not None:
                keep.append(chunk)


def _write_frame(stream, data: bytes) -> None:
    stream.write(_LENGTH.pack(len(data)) + data)
    stream.flush()


def _read_exactly(fd: int, count: int, deadline: Optional[float]) -> Optional[bytes]:
    chunks, left = [], count
    while left:
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([fd], [], [], wait)[0]:
                return None
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _read_frame(fd: int, deadline: Optional[float] = None) -> Optional[bytes]:
    """One length-prefixed message from ``fd`` (None: end of file, or the deadline passed)."""
    from .sandbox import RESULT_LIMIT

    head = _read_exactly(fd, _LENGTH.size, deadline)
    if head is None:
        return None
    (length,) = _LENGTH.unpack(head)
    if length > RESULT_LIMIT + (1 << 20):
        raise ValueError(f"a message of {length} bytes is over the cap")
    return _read_exactly(fd, length, deadline)


# --- the server (runs in the sandboxed child) ----------------------------------------------------------------

_PR_SET_DUMPABLE, _PR_SET_NO_NEW_PRIVS, _PR_CAPBSET_DROP, _PR_SET_CHILD_SUBREAPER = 4, 38, 24, 36
_CAP_LAST = 63


def serve() -> int:
    import importlib

    from frontends import sandbox, wire

    channel = sandbox.result_channel()
    sandbox.enter_child(memory_bytes=None)   # the tool set the limits; loopback up (PID 1), no network
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)   # no grandchild reads or writes this process's memory
    if os.getpid() != 1:   # no PID namespace: what a run leaves behind is adopted here, then killed
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    # the files' installed libraries, imported as a traced run imports them: after the tracer's
    # patches of torch.distributed (which do nothing while no recording is active), so a library
    # that keeps a reference to a patched function holds the same one as in a cold child
    from frontends.traced import collectives

    collectives.install_patches()
    for name in sys.argv[1:]:
        before = set(sys.modules)
        try:
            importlib.import_module(name)
        except BaseException:   # noqa: BLE001 - left to each run to import (and fail) as a cold child would
            for partial in set(sys.modules) - before:
                sys.modules.pop(partial, None)
    threads = threading.active_count() > 1   # a library started threads: forking is not safe, runs go cold
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    while True:
        data = _read_frame(0)
        if data is None:
            return 0
        request = wire.decode(data)
        answer = {"cold": True} if threads else _run_forked(request, channel.fileno() if channel is not None else -1)
        _kill_leftovers()
        if channel is not None:
            _write_frame(channel, wire.encode(answer))


class Forked:
    """A forked grandchild with the face ``sandbox._collect`` and ``_kill_everything`` read."""

    def __init__(self, pid: int, stdin, stdout, stderr) -> None:
        self.pid, self.stdin, self.stdout, self.stderr = pid, stdin, stdout, stderr
        self.returncode: Optional[int] = None

    def poll(self) -> Optional[int]:
        if self.returncode is None:
            with contextlib.suppress(ChildProcessError):
                pid, status = os.waitpid(self.pid, os.WNOHANG)
                if pid == self.pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: Optional[float] = None) -> int:
        import subprocess

        end = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if end is not None and time.monotonic() >= end:
                raise subprocess.TimeoutExpired("grandchild", timeout)
            time.sleep(0.01)
        return self.returncode

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)


def _run_forked(request: dict, channel_fd: int) -> dict:
    """Fork a grandchild that runs the request's script as a cold child would; what it did."""
    from frontends import sandbox

    has_input = request["input"] is not None
    in_r, in_w = os.pipe() if has_input else (None, None)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    res_r, res_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:   # the grandchild: never returns
        _become_child(request, in_r, out_w, err_w, res_w)
    for fd in (in_r, out_w, err_w, res_w):
        if fd is not None:
            os.close(fd)
    process = Forked(pid, os.fdopen(in_w, "wb") if has_input else None, os.fdopen(out_r, "rb"),
                      os.fdopen(err_r, "rb"))
    try:
        (stdout, stderr, result), timed_out = sandbox._collect(
            process, res_r, bytes(request["input"]) if has_input else None,
            started + max(0.1, float(request["timeout"])))
    finally:
        sandbox._kill_everything(process)
        with contextlib.suppress(OSError):
            os.close(res_r)
    import numpy as np

    return {"returncode": process.returncode, "timed_out": timed_out, "seconds": time.monotonic() - started,
            "stdout": np.frombuffer(stdout, dtype=np.uint8), "stderr": np.frombuffer(stderr, dtype=np.uint8),
            "result": np.frombuffer(result, dtype=np.uint8)}


def _become_child(request: dict, in_r, out_w: int, err_w: int, res_w: int) -> None:
    code = 1
    try:
        import io
        import runpy

        from frontends import sandbox

        os.setsid()
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        os.dup2(in_r if in_r is not None else os.open(os.devnull, os.O_RDONLY), 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        os.closerange(3, res_w)   # the server's request and answer pipes among them
        os.closerange(res_w + 1, 1 << 16)
        sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "rb", closefd=False)))
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "wb", closefd=False), line_buffering=True)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "wb", closefd=False), line_buffering=True)
        os.environ.clear()
        os.environ.update(request["env"])
        os.environ[sandbox.RESULT_FD_VARIABLE] = str(res_w)
        tempfile.tempdir = None   # the run's own temporary directory (TMPDIR), not the server's cached one
        sandbox._set_limits(request["memory"], request["cpu"])
        _drop_privileges()
        if request["cwd"]:
            os.chdir(request["cwd"])
        script, *rest = request["args"]
        sys.argv = [script, *rest]
        sys.path[0] = os.path.dirname(os.path.abspath(script))   # as ``python SCRIPT`` sets it
        runpy.run_path(script, run_name="__main__")
        code = 0
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    except BaseException:   # noqa: BLE001 - the grandchild's end, said on its stderr as a cold child would
        import traceback

        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _drop_privileges() -> None:
    """No capabilities (none to trace the server with, even as root of the namespace), and no way
    to gain any; dumpable again as a cold child is."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    for cap in range(_CAP_LAST + 1):
        libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)    # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()                   # effective, permitted, inheritable: all empty
    if libc.syscall(126 if _x86_64() else 91, header, data) != 0:   # capset
        raise OSError(ctypes.get_errno(), "capset failed: the run is not started without capabilities")
    libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)


def _x86_64() -> bool:
    return os.uname().machine in ("x86_64", "amd64")


def _kill_leftovers() -> None:
    """Kill and reap every process below the server (in a PID namespace: every other process in it)."""
    from frontends import sandbox

    for _ in range(3):
        left = sandbox._descendants(os.getpid())
        if not left:
            break
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


def _bootstrap() -> None:
    """Make ``frontends`` importable without running ``frontends/__init__.py`` (as the tracer's child)."""
    import types

    root = _HERE.parent
    sys.path[0:1] = [str(root)]
    if "frontends" not in sys.modules:
        package = types.ModuleType("frontends")
        package.__path__ = [str(_HERE)]
        sys.modules["frontends"] = package


if __name__ == "__main__":
    _bootstrap()
    from frontends.fork_server import serve as _serve

    os._exit(_serve())
