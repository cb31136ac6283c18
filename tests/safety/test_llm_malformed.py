"""Whatever an LLM endpoint sends back, `translate` ends as exit 3 with one line and a whole document.

One test per class of malformed or failing answer (``malformed_llm.CLASSES``): the first
diagnostic is "LLM unavailable: ..." or "LLM gave an invalid answer: ...", on one line; never
exit 4.  The report also says when no model was consulted, and why.
"""
from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from malformed_llm import CLASSES, RawLLM
from verify_agent.cli import app

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "examples" / "models"
BUGGY = MODELS / "dist_tp_mlp_missing_allreduce.py"  # traced and static frontends both read it whole
TRACED_OK = MODELS / "dist_rowparallel_ok.py"  # the traced frontend verifies it
NEEDS_LLM = ROOT / "examples" / "llm" / "tp_function_table.py"  # the static frontend cannot read all of it
INVALID = {"truncated-json", "not-json", "wrong-schema", "empty-choices", "null-message", "content-not-text",
           "invalid-utf8", "html-page"}  # a body cut off by a closed connection is "unavailable"
PREFIXES = ("LLM unavailable: ", "LLM gave an invalid answer: ")


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "VERIFY_AGENT_MODEL", "VERIFY_AGENT_CACHE",
                 "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    (tmp_path / "model.py").write_bytes(BUGGY.read_bytes())
    return tmp_path


def translate(url: str | None, *extra: str, file: str = "model.py", fmt: str = "json"):
    endpoint = ["--base-url", url, "--model", "m"] if url else []
    return CliRunner().invoke(app, ["translate", file, *endpoint, "--no-cache", "--llm-deadline", "2",
                                    "--max-rounds", "2", "--format", fmt, *extra])


def first_message(result) -> str:
    document = json.loads(result.stdout)
    assert document["verdict"] == "unsupported"
    return document["diagnostics"][0]["message"]


@pytest.mark.parametrize("kind", sorted(CLASSES))
def test_each_malformed_or_failing_answer_is_exit_3_with_one_line(workdir, kind):
    with RawLLM(CLASSES[kind]) as server:
        result = translate(server.url, "--llm", "full", "--no-exec")
    assert result.exit_code == 3, result.output
    message = first_message(result)
    prefix = "LLM gave an invalid answer: " if kind in INVALID else "LLM unavailable: "
    assert message.startswith(prefix) and "\n" not in message
    assert json.loads(result.stdout)["llm_status"].startswith(prefix)
    assert server.requests >= 1


def test_a_refused_connection_is_exit_3_llm_unavailable(workdir):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = translate(f"http://127.0.0.1:{port}/v1", "--llm", "full", "--no-exec")
    assert result.exit_code == 3, result.output
    message = first_message(result)
    assert message.startswith("LLM unavailable: ") and "connection refused" in message


def test_a_server_that_hangs_past_the_command_timeout_is_exit_3_with_a_document(workdir):
    with RawLLM(CLASSES["hang"]) as server:
        result = CliRunner().invoke(app, ["translate", "model.py", "--llm", "full", "--no-exec", "--base-url",
                                          server.url, "--model", "m", "--no-cache", "--timeout", "4",
                                          "--format", "json"])
    assert result.exit_code == 3, result.output
    assert first_message(result).startswith(PREFIXES)


def test_sarif_output_is_a_whole_document_when_the_answer_is_truncated(workdir):
    with RawLLM(CLASSES["truncated-json"]) as server:
        result = translate(server.url, "--llm", "full", "--no-exec", fmt="sarif")
    assert result.exit_code == 3, result.output
    results = json.loads(result.stdout)["runs"][0]["results"]
    assert results[0]["message"]["text"].startswith("LLM gave an invalid answer: ")


def test_text_output_says_the_llm_gave_an_invalid_answer(workdir):
    with RawLLM(CLASSES["not-json"]) as server:
        result = translate(server.url, "--llm", "full", "--no-exec", fmt="text")
    assert result.exit_code == 3
    assert "LLM gave an invalid answer: " in result.stdout


def test_no_endpoint_configured_is_said_in_the_report(workdir):
    (workdir / "table.py").write_bytes(NEEDS_LLM.read_bytes())
    result = translate(None, "--no-exec", file="table.py")
    assert result.exit_code == 3
    assert json.loads(result.stdout)["llm_status"] == ("LLM not consulted: no endpoint configured (pass --base-url "
                                                       "or set OPENAI_BASE_URL)")


def test_a_file_the_static_frontend_reads_whole_says_the_llm_was_not_consulted(workdir):
    result = translate(None, "--no-exec", fmt="text")
    assert result.exit_code == 1
    assert "LLM not consulted: the static frontend read the whole file" in result.stdout


def test_a_file_the_traced_frontend_decided_says_the_llm_was_not_consulted(workdir):
    pytest.importorskip("torch")
    result = translate(None)
    assert result.exit_code == 1
    assert json.loads(result.stdout)["llm_status"].startswith("LLM not consulted: the traced frontend decided")


def test_llm_full_asks_the_model_about_a_file_the_traced_run_verifies(workdir):
    pytest.importorskip("torch")
    (workdir / "ok.py").write_bytes(TRACED_OK.read_bytes())
    with RawLLM(CLASSES["status-401"]) as server:
        result = translate(server.url, "--llm", "full", file="ok.py")
    assert server.requests >= 1
    assert result.exit_code == 3, result.output
    assert "401" in first_message(result)


def test_llm_full_never_lets_a_model_overrule_a_bug_the_traced_run_showed(workdir):
    pytest.importorskip("torch")
    with RawLLM(CLASSES["status-401"]) as server:
        result = translate(server.url, "--llm", "full")
    assert result.exit_code == 1, result.output
    assert server.requests == 0
    document = json.loads(result.stdout)
    assert document["verdict"] == "violations"
    assert document["llm_status"].startswith("LLM not consulted: the traced frontend found violations")
