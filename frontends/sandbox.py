"""Run the user's code in an isolated child: namespaces where Linux allows them, limits everywhere.

Every child that runs user code (the tracer, ``lift``'s elaboration, the LLM path's execution
triage, the ground-truth confirmation) starts through ``run_python``:

* **namespaces** (``isolation() == "namespaces"``): the child is PID 1 of its own user, PID,
  mount and network namespaces (util-linux ``unshare``).  It sees only its own processes in
  ``/proc`` (not the tool's environment), cannot signal the tool, has no network but its own
  loopback interface (brought up so gloo ranks inside it can talk), and every process it starts
  dies with it: the kernel kills a PID namespace's processes when its first process ends.
* **process** (no usable ``unshare``): its own session and process group, and whatever is left
  of its descendants is found through ``/proc`` and killed; Python-level sockets may connect to
  loopback only (C-level sockets are not stopped); the tool is marked non-dumpable so a process of
  the same non-root user cannot read its ``/proc/PID/environ``.  The report says which applied.

Both: a scrubbed environment (``is_secret``), ``RLIMIT_AS``, ``RLIMIT_CPU``, ``RLIMIT_FSIZE``,
``RLIMIT_NPROC`` (not enforced for root), no core dumps, ``PR_SET_PDEATHSIG`` (the child dies with
the tool), a wall-clock limit after which everything is killed, and bounded reading of its
output.  A child answers through a private pipe (``result_channel()``), in ``frontends.wire``'s
data-only format; the tool never unpickles what a child wrote.  What is not isolated: the
child runs as the same user and can read (and, outside namespaces with a read-only root, write)
that user's files.
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import ipaddress
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import BinaryIO, Mapping, Optional, Sequence

DEFAULT_MEMORY_BYTES = 8 * 2**30
FILE_SIZE_LIMIT = 4 * 2**30
PROCESS_LIMIT = 512
OUTPUT_KEPT = 64 * 1024            # bytes of stdout/stderr kept (the tail)
RESULT_LIMIT = 1280 * 2**20        # bytes read from the result pipe at most
RESULT_FD_VARIABLE = "VERIFY_AGENT_RESULT_FD"  # names the result pipe in a child's environment
_NAMESPACES = ("--user", "--map-root-user", "--pid", "--fork", "--mount-proc", "--net", "--mount", "--kill-child")
_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "COOKIE", "SESSION")
_SECRET_PREFIXES = ("OPENAI_", "AWS_", "AZURE_", "GOOGLE_", "GCLOUD_", "ANTHROPIC_", "HF_", "HUGGING", "GITHUB_",
                    "GH_", "VERIFY_AGENT_", "NETRC", "SSH_", "GIT_ASKPASS", "DOCKER_", "PIP_", "UV_", "CONDA_TOKEN",
                    "DATABASE_", "KUBE", "VAULT_", "NPM_", "TWINE_", "WANDB_", "COMET_", "NEPTUNE_")
_PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "FTP_PROXY", "NO_PROXY")
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_SET_CHILD_SUBREAPER = 1, 4, 36


def is_secret(name: str) -> bool:
    upper = name.upper()
    return (any(word in upper for word in _SECRET_WORDS) or upper.startswith(_SECRET_PREFIXES)
            or upper in _PROXIES)


def _carries_credentials(value: str) -> bool:
    """A URL with ``user:password@`` in it (DATABASE_URL, PIP_INDEX_URL, a git remote)."""
    return "://" in value and "@" in value.split("://", 1)[1].split("/", 1)[0]


def scrub(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` without secrets, proxies and URLs carrying credentials."""
    return {name: value for name, value in environ.items()
            if not is_secret(name) and not _carries_credentials(value)}


def _libc():
    with contextlib.suppress(OSError):
        return ctypes.CDLL(None, use_errno=True)
    return None


def harden_parent() -> None:
    """The tool's own process: not dumpable, so a same-user process cannot read its environment
    or memory through /proc (root can; namespaces keep the child from naming the tool at all)."""
    libc = _libc()
    if libc is not None and sys.platform.startswith("linux"):
        libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


@functools.lru_cache(maxsize=1)
def isolation() -> str:
    """"namespaces" when this machine lets us start a child in its own user, PID, mount and
    network namespaces, else "process"."""
    unshare = shutil.which("unshare")
    if not unshare or not sys.platform.startswith("linux"):
        return "process"
    try:
        probe = subprocess.run([unshare, *_NAMESPACES, "--", sys.executable, "-c", "import os; print(os.getpid())"],
                               stdin=subprocess.DEVNULL, capture_output=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return "process"
    return "namespaces" if probe.returncode == 0 and probe.stdout.strip() == b"1" else "process"


def describe_isolation() -> str:
    """One sentence for reports."""
    if isolation() == "namespaces":
        return ("your code ran in its own user, PID, mount and network namespaces (loopback only), "
                "with a scrubbed environment and resource limits")
    return ("your code ran in its own process group with a scrubbed environment and resource limits; "
            "Linux namespaces were not available here, so it could see other processes and the network "
            "beyond Python-level sockets")


def _set_limits(memory_bytes: Optional[int], cpu_seconds: Optional[float]) -> None:
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return
    limits = [(resource.RLIMIT_CORE, 0), (resource.RLIMIT_FSIZE, FILE_SIZE_LIMIT),
              (resource.RLIMIT_NPROC, PROCESS_LIMIT)]
    if memory_bytes:
        limits.append((resource.RLIMIT_AS, int(memory_bytes)))
    if cpu_seconds:
        limits.append((resource.RLIMIT_CPU, max(1, int(cpu_seconds) + 1)))
    for which, value in limits:
        soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(which, (value, value))


def _die_with_parent() -> None:
    libc = _libc()
    if libc is not None and sys.platform.startswith("linux"):
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _loopback(address: object) -> bool:
    host = address[0] if isinstance(address, tuple) and address else address
    if not isinstance(host, str):
        return True  # AF_UNIX paths and the like: local by nature
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False  # a host name: would need DNS, i.e. the network


def deny_network() -> None:
    """Python-level sockets may connect only to the loopback interface from now on (the only
    guard outside namespaces; inside them the network namespace is the real one)."""
    original_connect, original_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def connect(self, address):  # type: ignore[no-untyped-def]
        if not _loopback(address):
            raise PermissionError(f"verify-agent runs your code without network access (connect to {address!r})")
        return original_connect(self, address)

    def connect_ex(self, address):  # type: ignore[no-untyped-def]
        if not _loopback(address):
            raise PermissionError(f"verify-agent runs your code without network access (connect to {address!r})")
        return original_connect_ex(self, address)

    socket.socket.connect, socket.socket.connect_ex = connect, connect_ex  # type: ignore[method-assign]


def bring_up_loopback() -> bool:
    """In a fresh network namespace ``lo`` starts down; gloo ranks need it.  True when it is up."""
    import fcntl
    import struct

    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            request = struct.pack("16sH14s", b"lo", 0, bytes(14))
            flags = struct.unpack("16sH14s", fcntl.ioctl(probe, siocgifflags, request))[1]
            if not flags & iff_up:
                fcntl.ioctl(probe, siocsifflags, struct.pack("16sH14s", b"lo", flags | iff_up, bytes(14)))
        return True
    except OSError:
        return False


def free_loopback_port() -> int:
    """A TCP port free on 127.0.0.1 now (for a gloo store started inside one child)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def enter_child(memory_bytes: Optional[int] = DEFAULT_MEMORY_BYTES, cpu_seconds: Optional[float] = None) -> None:
    """First call in a child before user code runs: scrubbed env, limits, loopback up (and named
    for gloo), no network."""
    for name in [name for name in os.environ if name not in scrub({name: os.environ[name]})]:
        del os.environ[name]
    _set_limits(memory_bytes, cpu_seconds)
    if os.getpid() == 1:  # PID 1 of our own namespaces: the network namespace is ours too
        bring_up_loopback()
    with contextlib.suppress(OSError):
        if "lo" in {name for _, name in socket.if_nameindex()}:
            os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    deny_network()


def result_channel() -> Optional[BinaryIO]:
    """The child's end of its private result pipe (None when the parent gave none).  Call it
    before user code runs: it removes the pipe's number from the environment and keeps the pipe
    from being inherited by processes the user's code starts."""
    number = os.environ.pop(RESULT_FD_VARIABLE, None)
    if number is None or not number.isdigit():
        return None
    fd = int(number)
    try:
        os.set_inheritable(fd, False)
        return os.fdopen(fd, "wb", buffering=0)
    except OSError:
        return None


@dataclass(frozen=True)
class ChildResult:
    returncode: Optional[int]
    stdout: bytes
    stderr: bytes
    timed_out: bool
    seconds: float
    result: bytes = b""            # what the child wrote to its result channel
    isolation: str = "process"

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


def run_python(args: Sequence[str], *, timeout: float, memory_bytes: Optional[int] = DEFAULT_MEMORY_BYTES,
               input: Optional[bytes] = None, cwd: Optional[str] = None,
               extra_env: Optional[Mapping[str, str]] = None, cpu_seconds: Optional[float] = None,
               environ: Optional[Mapping[str, str]] = None) -> ChildResult:
    """``python ARGS`` isolated (see the module's docstring); killed with everything it started at
    ``timeout`` seconds of wall-clock time, and when it ends.  The child's environment is
    ``environ`` (default: this process's) and ``extra_env``, both scrubbed, with a temporary directory
    of its own (removed when it ends, with whatever the code or its libraries left there).  Processes that must
    talk to each other over loopback (the ranks of one gloo group) must all be started inside one
    such child: each child has its own network namespace.  While a fork server is active
    (``frontends/fork_server.py``, ``translate DIR``) the tracer's children are forked from it
    instead, under the same isolation, without importing torch again."""
    env = scrub(os.environ if environ is None else environ)
    env.update(scrub(extra_env or {}))
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    cpu = cpu_seconds if cpu_seconds is not None else timeout
    scratch = tempfile.mkdtemp(prefix="verify-agent-run-")
    env.update(dict.fromkeys(_TEMP_VARIABLES, scratch))
    try:
        return _run_isolated(args, env, timeout=timeout, memory_bytes=memory_bytes, input=input, cwd=cwd, cpu=cpu)
    finally:  # what the child left in its temporary directory does not outlive the run
        shutil.rmtree(scratch, ignore_errors=True)


_TEMP_VARIABLES = ("TMPDIR", "TMP", "TEMP")   # where a child's tempfile (and the libraries it imports) write


def _run_isolated(args: Sequence[str], env: dict, *, timeout: float, memory_bytes: Optional[int],
                  input: Optional[bytes], cwd: Optional[str], cpu: float) -> ChildResult:
    if _WARM is not None and _WARM.accepts(args):
        done = _WARM.run(args, timeout=timeout, memory_bytes=memory_bytes, input=input, cwd=cwd, env=env,
                         cpu_seconds=cpu)
        if done is not None:
            return done
    process, read_end, mode, adopted_before = start_python(args, env=env, memory_bytes=memory_bytes, cpu_seconds=cpu,
                                                           cwd=cwd, stdin=input is not None)
    started = time.monotonic()
    try:
        outputs, timed_out = _collect(process, read_end, input, started + max(0.1, timeout))
    finally:  # the parent's own deadline, Ctrl-C, a bug: never leave the child running
        stop(process, read_end, adopted_before)
    stdout, stderr, result = outputs
    return ChildResult(process.returncode, stdout, stderr, timed_out, time.monotonic() - started, result, mode)


_WARM = None   # the active fork server (``fork_server.WarmServer``), set only by ``fork_server.warm_runs``


def start_python(args: Sequence[str], *, env: Mapping[str, str], memory_bytes: Optional[int], cpu_seconds: float,
                 cwd: Optional[str], stdin: bool):
    """Start ``python ARGS`` isolated with ``env`` (already scrubbed) and a private result pipe:
    (the process, the pipe's read end, the isolation applied, the orphans known before it)."""
    env = dict(env)
    posix = os.name == "posix"
    read_end, write_end = os.pipe() if posix else (None, None)
    if write_end is not None:
        env[RESULT_FD_VARIABLE] = str(write_end)
    mode = isolation() if posix else "process"
    command = [sys.executable, *args]
    if mode == "namespaces":
        command = [shutil.which("unshare") or "unshare", *_NAMESPACES, "--", *command]

    def prepare() -> None:
        _set_limits(memory_bytes, cpu_seconds)
        _die_with_parent()

    adopted_before = _adopt_orphans() if mode == "process" and posix else None
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env=env, start_new_session=posix,
        pass_fds=(write_end,) if write_end is not None else (), preexec_fn=prepare if posix else None)
    if write_end is not None:
        os.close(write_end)
    return process, read_end, mode, adopted_before


def stop(process, read_end: Optional[int], adopted_before: Optional[set[int]]) -> None:
    """Kill a child of ``start_python`` with everything it started, and close its result pipe."""
    _kill_everything(process)
    if adopted_before is not None:
        _kill_orphans(adopted_before)
    with contextlib.suppress(OSError):
        if read_end is not None:
            os.close(read_end)


def _collect(process: subprocess.Popen, result_fd: Optional[int], input: Optional[bytes], deadline: float
             ) -> tuple[tuple[bytes, bytes, bytes], bool]:
    """Read stdout, stderr (their tails) and the result pipe (up to its cap) until all close or
    the deadline passes; a child that keeps its pipes open after exiting is not waited for."""
    kept = {"stdout": bytearray(), "stderr": bytearray(), "result": bytearray()}
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ, "stdout")
    selector.register(process.stderr, selectors.EVENT_READ, "stderr")
    if result_fd is not None:
        selector.register(result_fd, selectors.EVENT_READ, "result")
    if process.stdin is not None:  # fed from a thread: a child that never reads cannot block us
        def feed() -> None:
            with contextlib.suppress(BrokenPipeError, OSError, ValueError):
                process.stdin.write(input or b"")
            with contextlib.suppress(OSError):
                process.stdin.close()

        threading.Thread(target=feed, daemon=True).start()
    timed_out, exited_at = False, None
    while selector.get_map():
        now = time.monotonic()
        if now >= deadline:
            timed_out = True
            break
        if process.poll() is not None:
            exited_at = exited_at or now
            if now - exited_at > 2.0:   # its descendants hold the pipes: they die with it below
                break
        for key, _ in selector.select(timeout=min(0.2, deadline - now)):
            fd = key.fd if isinstance(key.fileobj, int) else key.fileobj.fileno()
            try:
                chunk = os.read(fd, 1 << 20)
            except OSError:
                chunk = b""
            if not chunk:
                selector.unregister(key.fileobj)
                continue
            buffer = kept[key.data]
            buffer.extend(chunk)
            if key.data == "result" and len(buffer) > RESULT_LIMIT:
                selector.unregister(key.fileobj)   # over the cap: the reader refuses it anyway
            elif key.data != "result" and len(buffer) > 2 * OUTPUT_KEPT:
                del buffer[:-OUTPUT_KEPT]
    selector.close()
    if not timed_out:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=max(0.0, min(2.0, deadline - time.monotonic())))
        timed_out = process.poll() is None
    for stream in (process.stdout, process.stderr):
        with contextlib.suppress(OSError):
            stream.close()
    return (bytes(kept["stdout"][-OUTPUT_KEPT:]), bytes(kept["stderr"][-OUTPUT_KEPT:]), bytes(kept["result"])), \
        timed_out


def cpu_seconds_of(pid: int) -> float:
    """utime + stime + cutime + cstime of a living process, in seconds (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        return sum(int(value) for value in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def is_runnable(pid: int) -> bool:
    """Whether the main thread of a living process is running or waiting for a CPU (state R), or in
    uninterruptible I/O (D): working, however slowly.  A process blocked waiting for a message
    sleeps (S); False when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            state = handle.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state in (b"R", b"D")


def _descendants(root: int) -> list[int]:
    """Every living process below ``root`` (from /proc; empty where there is none)."""
    children: dict[int, list[int]] = {}
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            with contextlib.suppress(OSError, ValueError, IndexError):
                with open(f"/proc/{entry}/stat", "rb") as handle:
                    stat = handle.read()
                parent = int(stat[stat.rindex(b")") + 2:].split()[1])
                children.setdefault(parent, []).append(int(entry))
    found, frontier = [], [root]
    while frontier:
        pid = frontier.pop()
        for child in children.get(pid, ()):
            found.append(child)
            frontier.append(child)
    return found


def _adopt_orphans() -> set[int]:
    """Without a PID namespace, a double fork escapes the child's tree; as a subreaper this
    process adopts such orphans.  Returns its children now (so the new ones can be told apart)."""
    libc = _libc()
    if libc is not None and sys.platform.startswith("linux"):
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    return set(_descendants(os.getpid()))


def _kill_orphans(before: set[int]) -> None:
    """Kill and reap what was adopted since ``before`` (processes the child left behind)."""
    for pid in set(_descendants(os.getpid())) - before:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    for pid in set(_descendants(os.getpid())) - before:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)


def _kill_everything(process: subprocess.Popen) -> None:
    """SIGKILL the child, its namespace (through its first process), its group and every
    descendant still found; then reap the child."""
    if os.name == "posix":
        for pid in _descendants(process.pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        process.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=10)
