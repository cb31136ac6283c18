"""The tool's verdict on one file: ``verify-agent translate FILE --format json`` in a subprocess."""
from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

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
    options = _translate_options()
    cmd = _command() + ["translate", path, "--format", "json"]
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
