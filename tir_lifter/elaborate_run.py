"""Start the elaboration child (``elaborate.py``) and read its report back.

User code runs only there, isolated by ``frontends.sandbox`` (its own namespaces where Linux
allows them, limits, a wall-clock limit, an environment with only what Python, TileLang and
torch need to start) in its own temporary working directory.  The child answers with JSON in
``frontends.wire``'s data-only format, read back into a ``Report``; a child that dies, overruns
or answers something unreadable is an ``unsupported`` verdict that says so.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from frontends import wire
from frontends.sandbox import run_python
from verifier.report import ERROR, Counterexample, Diagnostic, Report

from .errors import LiftInternalError

_KEEP_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "PYTHONHASHSEED", "LD_LIBRARY_PATH", "VIRTUAL_ENV",
             "CONDA_PREFIX", "TVM_LIBRARY_PATH", "TILELANG_CACHE_DIR")
_ROOT = Path(__file__).resolve().parents[1]
_MEMORY_BYTES = 16 * 2**30


def child_env() -> dict[str, str]:
    """The environment of the child: an allow-list, so no credential reaches user code."""
    env = {k: v for k, v in os.environ.items() if k in _KEEP_ENV}
    env["PYTHONPATH"] = str(_ROOT)
    env["CUDA_VISIBLE_DEVICES"] = ""
    env["OMP_NUM_THREADS"] = "1"
    env["TQDM_DISABLE"] = "1"
    return env


def _run_child(request: dict[str, Any], timeout: float):
    with tempfile.TemporaryDirectory(prefix="verify-agent-lift-") as tmp:
        request_path = Path(tmp) / "request.json"
        request_path.write_text(json.dumps(request), encoding="utf-8")
        return run_python(["-m", "tir_lifter.elaborate", str(request_path)], timeout=timeout, cwd=tmp,
                          environ=child_env(), memory_bytes=_MEMORY_BYTES)


def _bodies(result: bytes) -> tuple[list[Any], str | None]:
    bodies, unreadable = wire.decode_stream(result, check=_check_body)
    return bodies, (str(unreadable) if unreadable is not None else None)


def _check_body(body: Any) -> None:
    if not isinstance(body, dict) or not isinstance(body.get("file"), str):
        raise wire.WireError("an answer is not a report")


def run_elaboration(path: str, kernel: str | None, specs: dict[str, str], timeout: float = 120.0,
                    run_budget: float = 20.0) -> Report:
    done = _run_child({"path": os.path.abspath(path), "kernel": kernel, "specs": specs, "run_budget": run_budget},
                      timeout)
    bodies, unreadable = _bodies(done.result)
    if bodies:
        try:
            report = report_from_json(bodies[0])
            report.extra["sandbox"] = done.isolation
            return report
        except (KeyError, TypeError, ValueError) as error:
            unreadable = f"{type(error).__name__}: {error}"
    if unreadable is not None:
        return _unsupported(path, f"the elaboration child's answer could not be read ({unreadable}); "
                                  f"the file may have written to it")
    if done.timed_out:
        return _unsupported(path, f"elaborating and checking the kernels took longer than {timeout:.0f} s")
    tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
    if os.environ.get("VERIFY_AGENT_DEBUG"):
        sys.stderr.write(done.stderr.decode(errors="replace"))
    if _raised_by_us(done.stderr):
        raise LiftInternalError(f"the elaboration child failed: {tail[0][:300]}")
    return _unsupported(path, f"the elaboration child ended (code {done.returncode}) without an answer while "
                              f"running the file: {tail[0][:300]}")


def _raised_by_us(stderr: bytes) -> bool:
    """The child's last traceback ends in this project's code (not in the user's file)."""
    frames = [line for line in stderr.decode(errors="replace").splitlines() if line.strip().startswith('File "')]
    return bool(frames) and str(_ROOT) in frames[-1] and "site-packages" not in frames[-1]


def run_batch(paths: list[str], timeout: float, run_budget: float = 20.0, check_budget: float = 120.0
              ) -> list[dict[str, Any]]:
    """Several files in one child (TileLang and torch imported once): the benchmark's mode.
    Returns the raw JSON bodies (``report_from_json`` reads one)."""
    done = _run_child({"paths": [os.path.abspath(p) for p in paths], "run_budget": run_budget,
                       "check_budget": check_budget}, timeout)
    bodies, _ = _bodies(done.result)
    finished = {body["file"] for body in bodies}
    return bodies + [{"file": os.path.abspath(p), "internal_error": "batch child died or overran"}
                     for p in paths if os.path.abspath(p) not in finished]


def _unsupported(path: str, message: str) -> Report:
    report = Report(file=path, mesh={})
    report.add(Diagnostic("unsupported", ERROR, message, None))
    report.extra["frontend"] = "tilelang"
    return report


def report_from_json(body: dict[str, Any]) -> Report:
    report = Report(file=body.get("file"), mesh=dict(body.get("mesh") or {}))
    for item in body.get("diagnostics", []):
        example = item.get("counterexample")
        counterexample = None
        if example:
            counterexample = Counterexample(example.get("inputs", {}), example.get("reference", {}),
                                            example.get("per_rank", {}), example.get("value", ""),
                                            bool(example.get("confirmed_by_evaluation", True)), example.get("note", ""))
        report.add(Diagnostic(item["check"], item["severity"], item["message"], item.get("line"), counterexample,
                              item.get("hint"), item.get("column")))
    report.proven = list(body.get("proven", []))
    report.ops = int(body.get("stats", {}).get("ops", 0))
    report.seconds = float(body.get("seconds", 0.0))
    skip = {"verdict", "file", "mesh", "diagnostics", "fixes", "stats", "proven", "seconds"}
    report.extra.update({k: v for k, v in body.items() if k not in skip})
    return report
