"""Every ending of a command has its exit code and, for machine formats, a document on stdout."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

import fuzz_cases as fc
import verify_agent.cli as cli

ROOT = Path(__file__).resolve().parents[2]


def run(tmp_path: Path, argv: list[str], files: dict | None = None) -> fc.Outcome:
    return fc.run_in_process(fc.Case("cli", files or {}, tuple(argv)), tmp_path, timeout=120)


def test_input_error_prints_a_json_document(tmp_path):
    outcome = run(tmp_path, ["translate", "missing.py", "--format", "json"])
    assert outcome.exit_code == 2 and not outcome.document_missing


def test_usage_error_prints_a_sarif_notification(tmp_path, capsys):
    (tmp_path / "m.py").write_text("x = 1\n")
    import contextlib
    import io
    import os

    out = io.StringIO()
    previous = os.getcwd()
    os.chdir(tmp_path)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()), \
                pytest.raises(SystemExit) as done:
            cli.main(["translate", "m.py", "--format", "sarif", "--mesh", "tp=x", "--no-exec"], arm_deadline=False)
    finally:
        os.chdir(previous)
    assert done.value.code == 2
    run_ = json.loads(out.getvalue())["runs"][0]
    assert run_["invocations"][0]["executionSuccessful"] is False
    assert "tp=x" in run_["invocations"][0]["toolExecutionNotifications"][0]["message"]["text"]


def test_a_bug_of_ours_exits_4_with_an_error_document(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise ZeroDivisionError("simulated bug")

    monkeypatch.setattr("verifier.check.check_program", broken)
    (tmp_path / "p.vir").write_text((ROOT / "examples" / "ir" / "double_allreduce.vir").read_text())
    outcome = run(tmp_path, ["check", "p.vir", "--format", "json"])
    assert outcome.exit_code == 4 and outcome.internal_error and not outcome.traceback


def test_internal_error_document_says_it_is_our_bug(tmp_path, monkeypatch, capsys):
    import contextlib
    import io
    import os

    monkeypatch.setattr("verifier.check.check_program", lambda *a, **k: 1 / 0)
    (tmp_path / "p.vir").write_text((ROOT / "examples" / "ir" / "double_allreduce.vir").read_text())
    out, err = io.StringIO(), io.StringIO()
    previous = os.getcwd()
    os.chdir(tmp_path)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), pytest.raises(SystemExit):
            cli.main(["check", "p.vir", "--format", "json"], arm_deadline=False)
    finally:
        os.chdir(previous)
    document = json.loads(out.getvalue())
    assert document["verdict"] == "error"
    assert "bug in verify-agent" in document["diagnostics"][0]["message"]
    assert len(err.getvalue().strip().splitlines()) <= 3  # one message, wrapped at most


def test_timeout_stops_the_whole_command_with_exit_3(tmp_path):
    """A loop just under the unrolling cap: reading it takes far longer than the 5 s deadline."""
    source = ("import torch\nimport torch.distributed as dist\n\n\ndef example_inputs():\n"
              "    return (torch.randn(4, 8),)\n\n\ndef forward(x):\n    for i in range(99999):\n"
              "        x = x + 1\n    dist.all_reduce(x)\n    return x\n")
    (tmp_path / "m.py").write_text(source)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "verify_agent", "translate", "m.py", "--llm", "off", "--no-exec",
                           "--timeout", "5", "--format", "json"], cwd=tmp_path, capture_output=True, timeout=120)
    assert done.returncode == 3, done.stderr[-500:]
    document = json.loads(done.stdout)
    assert document["verdict"] == "unsupported" and document["diagnostics"][0]["check"] == "timeout"
    assert time.monotonic() - started < 5 + 60  # startup on a loaded machine included


def test_a_command_run_in_process_leaves_no_deadline_behind(tmp_path):
    """A command's --timeout is its own: the API called after it in the same process (the next
    test, a notebook) must not find that deadline running out (it once left later repairs
    a budget of 0 s and no fix)."""
    from verify_agent import deadline

    (tmp_path / "p.vir").write_text((ROOT / "examples" / "ir" / "double_allreduce.vir").read_text())
    outcome = run(tmp_path, ["check", "p.vir", "--format", "json", "--timeout", "1"])
    assert outcome.exit_code == 1 and not outcome.document_missing
    time.sleep(1.2)
    assert deadline.current().remaining() == float("inf")
