"""Start the elaboration child (``elaborate.py``) and read its report back.

User code runs only there: a fresh Python process with a scrubbed environment (no API
keys or tokens, only what Python, TileLang and torch need to start), a wall-clock limit,
and its own temporary working directory.  The child answers with JSON, read back into a
``Report``; a child that dies or overruns is an ``unsupported`` verdict that says so.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from verifier.report import ERROR, Counterexample, Diagnostic, Report

from .errors import LiftInternalError

_KEEP_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "PYTHONHASHSEED", "LD_LIBRARY_PATH", "VIRTUAL_ENV",
             "CONDA_PREFIX", "TVM_LIBRARY_PATH", "TILELANG_CACHE_DIR")
_ROOT = Path(__file__).resolve().parents[1]


def child_env() -> dict[str, str]:
    """The environment of the child: an allow-list, so no credential reaches user code."""
    env = {k: v for k, v in os.environ.items() if k in _KEEP_ENV}
    env["PYTHONPATH"] = str(_ROOT)
    env["CUDA_VISIBLE_DEVICES"] = ""
    env["OMP_NUM_THREADS"] = "1"
    env["TQDM_DISABLE"] = "1"
    return env


def run_elaboration(path: str, kernel: str | None, specs: dict[str, str], timeout: float = 120.0,
                    run_budget: float = 20.0) -> Report:
    with tempfile.TemporaryDirectory(prefix="verify-agent-lift-") as tmp:
        request, result = Path(tmp) / "request.json", Path(tmp) / "result.json"
        request.write_text(json.dumps({"path": os.path.abspath(path), "kernel": kernel, "specs": specs,
                                       "run_budget": run_budget}), encoding="utf-8")
        command = [sys.executable, "-m", "tir_lifter.elaborate", str(request), str(result)]
        try:
            done = subprocess.run(command, env=child_env(), cwd=tmp, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return _timed_out(path, f"elaborating and checking the kernels took longer than {timeout:.0f} s")
        if done.returncode != 0 or not result.exists():
            tail = (done.stderr or "").strip().splitlines()[-1:] or ["no output"]
            if os.environ.get("VERIFY_AGENT_DEBUG"):
                sys.stderr.write(done.stderr or "")
            raise LiftInternalError(f"the elaboration child failed: {tail[0][:300]}")
        return report_from_json(json.loads(result.read_text(encoding="utf-8")))


def run_batch(paths: list[str], timeout: float, run_budget: float = 20.0, check_budget: float = 120.0
              ) -> list[dict[str, Any]]:
    """Several files in one child (TileLang and torch imported once): the benchmark's mode.
    Returns the raw JSON bodies (``report_from_json`` reads one)."""
    with tempfile.TemporaryDirectory(prefix="verify-agent-lift-") as tmp:
        request, result = Path(tmp) / "request.json", Path(tmp) / "result.json"
        request.write_text(json.dumps({"paths": [os.path.abspath(p) for p in paths], "run_budget": run_budget,
                                       "check_budget": check_budget}), encoding="utf-8")
        command = [sys.executable, "-m", "tir_lifter.elaborate", str(request), str(result)]
        try:
            subprocess.run(command, env=child_env(), cwd=tmp, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        done = json.loads(result.read_text(encoding="utf-8")) if result.exists() else []
        finished = {body["file"] for body in done}
        return done + [{"file": os.path.abspath(p), "internal_error": "batch child died or overran"}
                       for p in paths if os.path.abspath(p) not in finished]


def _timed_out(path: str, message: str) -> Report:
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
                              item.get("hint")))
    report.proven = list(body.get("proven", []))
    report.ops = int(body.get("stats", {}).get("ops", 0))
    report.seconds = float(body.get("seconds", 0.0))
    skip = {"verdict", "file", "mesh", "diagnostics", "fixes", "stats", "proven", "seconds"}
    report.extra.update({k: v for k, v in body.items() if k not in skip})
    return report
