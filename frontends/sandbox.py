"""Run the user's code in a child process: scrubbed environment, time limit, memory limit.

Two ways to use it, one set of rules:

* ``run_python(args, timeout=..., memory_bytes=...)`` starts ``python ARGS`` as a child in
  its own process group with a scrubbed environment and resource limits, and kills the whole
  group at the timeout (the tracing frontend);
* ``scrubbed_environ()`` (a context manager around starting ``multiprocessing`` children or a
  fork server) and ``enter_child(...)`` (first thing a worker does) for callers that need
  ``multiprocessing`` (the LLM path's execution triage).

What a child gets: no variable whose name contains KEY, TOKEN, SECRET, PASSWORD, CREDENTIAL
or AUTH, or starts with OPENAI_, AWS_, AZURE_, GOOGLE_, ANTHROPIC_, HF_, HUGGING, GITHUB_, GH_
or VERIFY_AGENT_; no proxy settings; ``RLIMIT_AS`` (memory), ``RLIMIT_CPU`` and no core
dumps; ``deny_network()`` refuses Python-level connections to anything but the loopback
interface (gloo ranks talk over 127.0.0.1).  These are the limits of a process, not of a
container: code running as the same user can still read that user's files.
"""
from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Iterator, Mapping, Optional, Sequence

DEFAULT_MEMORY_BYTES = 8 * 2**30
_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "COOKIE", "SESSION")
_SECRET_PREFIXES = ("OPENAI_", "AWS_", "AZURE_", "GOOGLE_", "GCLOUD_", "ANTHROPIC_", "HF_", "HUGGING", "GITHUB_",
                    "GH_", "VERIFY_AGENT_", "NETRC", "SSH_", "GIT_ASKPASS", "DOCKER_")
_PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "FTP_PROXY", "NO_PROXY")


def is_secret(name: str) -> bool:
    upper = name.upper()
    return (any(word in upper for word in _SECRET_WORDS) or upper.startswith(_SECRET_PREFIXES)
            or upper in _PROXIES)


def scrub(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` without secrets and proxies."""
    return {name: value for name, value in environ.items() if not is_secret(name)}


@contextlib.contextmanager
def scrubbed_environ() -> Iterator[None]:
    """Children started inside this block inherit a scrubbed environment (restored afterwards)."""
    removed = {name: os.environ[name] for name in list(os.environ) if is_secret(name)}
    for name in removed:
        del os.environ[name]
    try:
        yield
    finally:
        os.environ.update(removed)


def _set_limits(memory_bytes: Optional[int], cpu_seconds: Optional[float]) -> None:
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return
    limits = [(resource.RLIMIT_CORE, 0)]
    if memory_bytes:
        limits.append((resource.RLIMIT_AS, int(memory_bytes)))
    if cpu_seconds:
        limits.append((resource.RLIMIT_CPU, max(1, int(cpu_seconds) + 1)))
    for which, value in limits:
        soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(which, (value, hard))


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
    """Python-level sockets may connect only to the loopback interface from now on."""
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


def enter_child(memory_bytes: Optional[int] = DEFAULT_MEMORY_BYTES, cpu_seconds: Optional[float] = None) -> None:
    """First call in a worker process before user code runs: limits, scrubbed env, no network."""
    for name in [name for name in os.environ if is_secret(name)]:
        del os.environ[name]
    _set_limits(memory_bytes, cpu_seconds)
    deny_network()


@dataclass(frozen=True)
class ChildResult:
    returncode: Optional[int]
    stdout: bytes
    stderr: bytes
    timed_out: bool
    seconds: float

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


def run_python(args: Sequence[str], *, timeout: float, memory_bytes: Optional[int] = DEFAULT_MEMORY_BYTES,
               input: Optional[bytes] = None, cwd: Optional[str] = None,
               extra_env: Optional[Mapping[str, str]] = None) -> ChildResult:
    """``python ARGS`` in a child with a scrubbed environment and limits; killed (with its
    process group) at ``timeout`` seconds of wall-clock time."""
    env = scrub(os.environ)
    env.update(scrub(extra_env or {}))
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    posix = os.name == "posix"
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, *args], stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env=env, start_new_session=posix,
        preexec_fn=(lambda: _set_limits(memory_bytes, timeout)) if posix else None)
    try:
        stdout, stderr = process.communicate(input=input, timeout=max(0.1, timeout))
        timed_out = False
    except subprocess.TimeoutExpired:
        _kill_group(process)
        stdout, stderr = process.communicate()
        timed_out = True
    except BaseException:  # the parent's own deadline, Ctrl-C: never leave the child running
        _kill_group(process)
        process.wait()
        raise
    return ChildResult(process.returncode, stdout or b"", stderr or b"", timed_out, time.monotonic() - started)


def _kill_group(process: subprocess.Popen) -> None:
    if os.name == "posix":
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        process.kill()
