"""The tool's verdict on one file: ``verify-agent translate FILE --format json``.

Cold (``PendingTool``): one process per mutant, each paying for its fork server's ``import torch``
and the driver's libraries.  Warm (``WarmTools``): the runs go one after another through the repair
campaign's worker (``benchmarks/fix_worker.py``: the command line's own entry, deadline armed, fork
servers kept up per set of installed imports, every trace still a sandboxed grandchild)."""
from __future__ import annotations

import functools
import json
import os
import signal
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

VERIFIED, VIOLATIONS, UNSUPPORTED, INPUT_ERROR, ERROR = "verified", "violations", "unsupported", "input-error", "error"
VERDICTS = (VERIFIED, VIOLATIONS, UNSUPPORTED, INPUT_ERROR, ERROR)
_BY_EXIT = {0: VERIFIED, 1: VIOLATIONS, 2: INPUT_ERROR, 3: UNSUPPORTED}


@dataclass(frozen=True)
class ToolVerdict:
    verdict: str
    exit_code: int | None
    seconds: float
    detail: str  # first diagnostic / error line, for the report
    lines: tuple[int, ...] = ()         # lines of the error diagnostics, the first (primary) one first
    repair_lines: tuple[int, ...] = ()  # lines where the diagnostics say the repair goes ("repair_line")
    files: tuple[str | None, ...] = ()  # per line: the file it is in when not the checked one ("file")


def _command() -> list[str]:
    exe = shutil.which("verify-agent")
    return [exe] if exe else [sys.executable, "-m", "verify_agent"]


@functools.lru_cache(maxsize=1)
def _translate_options() -> tuple[str, ...]:
    """Options of ``translate`` that this checkout supports (``--timeout`` is newer)."""
    try:
        text = subprocess.run(_command() + ["translate", "--help"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return tuple(opt for opt in ("--timeout", "--llm") if opt in text)


def _tool_command(path: str, timeout: float, llm: str) -> list[str]:
    return _command() + _translate_args(path, timeout, llm)


def _translate_args(path: str, timeout: float, llm: str) -> list[str]:
    options = _translate_options()
    cmd = ["translate", path, "--format", "json"]
    if "--timeout" in options:
        cmd += ["--timeout", str(int(timeout))]
    if "--llm" in options:
        cmd += ["--llm", llm]
    return cmd


class PendingTool:
    """A tool run in the background (no threads: the caller polls), so that it can overlap
    with ground-truth runs forked from the same process."""

    def __init__(self, path: str, *, timeout: float = 60.0, llm: str = "off", lib_path: str | None = None):
        self.limit = timeout + 60
        self._out = tempfile.TemporaryFile(mode="w+")
        self._err = tempfile.TemporaryFile(mode="w+")
        self.started = time.monotonic()
        env = None
        if lib_path:   # a mutated copy of a library, imported before the installed one
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join(p for p in (lib_path, env.get("PYTHONPATH", "")) if p)
        command = _tool_command(path, timeout, llm) + (["--path", lib_path] if lib_path else [])
        self.proc = subprocess.Popen(command, stdout=self._out, stderr=self._err,
                                     stdin=subprocess.DEVNULL, text=True, env=env)
        self.result: ToolVerdict | None = None

    def poll(self) -> ToolVerdict | None:
        if self.result is not None:
            return self.result
        seconds = time.monotonic() - self.started
        if self.proc.poll() is None:
            if seconds <= self.limit:
                return None
            self.proc.kill()
            self.proc.wait()
            self.result = ToolVerdict(ERROR, None, seconds, f"no answer within {self.limit:.0f}s")
        else:
            self._out.seek(0)
            self._err.seek(0)
            self.result = _verdict(self.proc.returncode, self._out.read(), self._err.read(), seconds)
        self._out.close()
        self._err.close()
        return self.result


_WORKER = Path(__file__).resolve().parents[1] / "fix_worker.py"


class WarmTools:
    """Tool runs through ``fix_worker.py`` (polled, no threads: ground-truth ranks are forked from this
    process).  One run at a time per worker; a worker past a run's limit, or dead, is killed with its
    fork servers and the next run starts a new one."""

    def __init__(self, *, llm: str = "off"):
        from fix_worker import END   # the worker's line after each run

        self.end = END
        self.llm = llm
        self.process: subprocess.Popen | None = None
        self.folder = tempfile.TemporaryDirectory(prefix="warm-tool-")
        self.runs = 0
        self.starts = 0

    def _start(self) -> None:
        env = dict(os.environ, COLUMNS="200", NO_COLOR="1")
        self.process = subprocess.Popen([sys.executable, str(_WORKER)], stdin=subprocess.PIPE,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                                        start_new_session=True)
        os.set_blocking(self.process.stderr.fileno(), False)
        self.starts += 1

    def submit(self, path: str, *, timeout: float = 60.0, lib_path: str | None = None) -> "WarmRun":
        if self.process is None or self.process.poll() is not None:
            self._start()
        self.runs += 1
        out = Path(self.folder.name) / f"run{self.runs}.json"
        args = _translate_args(path, timeout, self.llm) + (["--path", lib_path] if lib_path else [])
        request = {"args": args, "file": path, "stdout": str(out), "cwd": os.getcwd()}   # as a cold run's
        self.process.stdin.write((json.dumps(request) + "\n").encode())
        self.process.stdin.flush()
        return WarmRun(self, out, timeout + 60)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.process = None

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        self.kill()
        self.folder.cleanup()


class WarmRun:
    """One ``translate`` in a ``WarmTools`` worker, with ``PendingTool``'s ``poll``."""

    def __init__(self, tools: WarmTools, out: Path, limit: float):
        self.tools, self.out, self.limit = tools, out, limit
        self.process = tools.process
        self.started = time.monotonic()
        self.err = b""
        self.result: ToolVerdict | None = None

    def poll(self) -> ToolVerdict | None:
        if self.result is not None:
            return self.result
        seconds = time.monotonic() - self.started
        code = self._read()
        if code is None and self.process.poll() is None:
            if seconds <= self.limit:
                return None
            self.tools.kill()
            self.result = ToolVerdict(ERROR, None, seconds, f"no answer within {self.limit:.0f}s")
        elif code is None:   # the worker died during the run
            self.tools.process = None
            self.result = ToolVerdict(ERROR, None, seconds, "the warm worker died: " +
                                      self.err.decode(errors="replace").strip()[-150:])
        else:
            stdout = self.out.read_text() if self.out.is_file() else ""
            self.out.unlink(missing_ok=True)
            self.result = _verdict(code, stdout, self.err.decode(errors="replace"), seconds)
        return self.result

    def _read(self) -> int | None:
        """The run's exit code once the worker wrote its end line (stderr read so far kept)."""
        try:
            while chunk := os.read(self.process.stderr.fileno(), 65536):
                self.err += chunk
        except BlockingIOError:
            pass
        mark = b"\n" + self.tools.end.encode() + b" "
        at = (b"\n" + self.err).rfind(mark)
        end = self.err.find(b"\n", at) if at >= 0 else -1
        if end < 0:
            return None
        code = int(self.err[at + len(mark) - 1:end])
        self.err = self.err[:at]
        return code


def run_tool(path: str, *, timeout: float = 60.0, llm: str = "off", lib_path: str | None = None) -> ToolVerdict:
    pending = PendingTool(path, timeout=timeout, llm=llm, lib_path=lib_path)
    while pending.poll() is None:
        time.sleep(0.05)
    return pending.result


def _verdict(returncode: int, stdout: str, stderr: str, seconds: float) -> ToolVerdict:
    verdict = _BY_EXIT.get(returncode, ERROR)
    detail = ""
    lines: tuple[int, ...] = ()
    repair_lines: tuple[int, ...] = ()
    files: tuple[str | None, ...] = ()
    try:
        report = json.loads(stdout)
        said = report.get("verdict")
        diags = report.get("diagnostics") or []
        diags = [d for d in diags if isinstance(d, dict)]
        errors = [d for d in diags if d.get("severity") in ("error", "violation")]
        lines = tuple(d["line"] for d in errors if isinstance(d.get("line"), int))
        files = tuple(d.get("file") for d in errors if isinstance(d.get("line"), int))
        repair_lines = tuple(d["repair_line"] for d in errors if isinstance(d.get("repair_line"), int))
        if diags:  # the first error-level diagnostic says most; else the first note
            d = next((d for d in diags if d.get("severity") in ("error", "violation")), diags[0])
            detail = f"line {d.get('line')}: {d.get('message', '')}"[:200]
        if said and verdict != ERROR and not _consistent(said, verdict):
            detail = f"exit {returncode} but verdict {said!r}; " + detail
            verdict = ERROR
    except (json.JSONDecodeError, AttributeError):
        tail = (stderr or stdout).strip().splitlines()
        detail = tail[-1][:200] if tail else ""
    return ToolVerdict(verdict, returncode, seconds, detail, lines, repair_lines, files)


def _consistent(said: str, by_exit: str) -> bool:
    said = said.lower()
    if by_exit == VERIFIED:
        return said == "verified"
    if by_exit == VIOLATIONS:
        return said in ("violations", "violation")
    return True
