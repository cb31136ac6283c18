"""Every way an LLM endpoint can fail ends in one line and the right exit code, within the deadline.

401/403/404 and a refused connection end at once, 429, 5xx, hangs, resets and malformed bodies
after retries until ``--llm-deadline``: all as "LLM unavailable" or "LLM gave an invalid answer"
(exit 3: nothing was decided), the message saying what to fix; an oversized answer is not read.
Never exit 4, never a traceback, never past the deadline.
"""
from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fake_llm import BEHAVIOURS, FakeLLM
from verify_agent.cli import app

ROOT = Path(__file__).resolve().parents[2]
MODEL = (ROOT / "examples" / "models" / "dist_tp_mlp_missing_allreduce.py").read_text()
DEADLINE = 2.0


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "VERIFY_AGENT_MODEL", "VERIFY_AGENT_CACHE",
                 "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    (tmp_path / "model.py").write_text(MODEL)
    return tmp_path


def translate(url: str, *extra: str, deadline: float = DEADLINE):
    return CliRunner().invoke(app, ["translate", "model.py", "--llm", "full", "--base-url", url, "--model", "m",
                                    "--no-cache", "--no-exec", "--llm-deadline", str(deadline), "--max-rounds", "2",
                                    "--format", "json", *extra])


@pytest.mark.parametrize("behaviour", [b for b in BEHAVIOURS if b not in ("huge", "trickle")])
def test_endpoint_failure_has_its_exit_code_and_a_document(workdir, behaviour):
    with FakeLLM(behaviour) as server:
        started = time.monotonic()
        result = translate(server.url)
        elapsed = time.monotonic() - started
    assert result.exit_code == 3, result.output
    document = json.loads(result.stdout)
    assert document["verdict"] == "unsupported"
    assert elapsed < DEADLINE + 15
    assert not (workdir / "MARK").exists()


def test_trickling_server_is_cut_off_at_the_deadline(workdir):
    with FakeLLM("trickle") as server:
        started = time.monotonic()
        result = translate(server.url)
        elapsed = time.monotonic() - started
    assert result.exit_code == 3, result.output
    assert "LLM unavailable" in result.stdout
    assert elapsed < DEADLINE + 15


def test_oversized_answer_is_not_read_into_the_report(workdir):
    with FakeLLM("huge", huge_bytes=5_000_000) as server:
        result = translate(server.url)
    assert result.exit_code == 3, result.output[-2000:]
    assert len(result.stdout) < 100_000


def test_refused_connection_is_a_one_line_llm_unavailable(workdir):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = translate(f"http://127.0.0.1:{port}/v1", deadline=60)  # refusal is immediate; a busy machine is not
    assert result.exit_code == 3, result.output
    assert "connection refused" in json.loads(result.stdout)["diagnostics"][0]["message"]
