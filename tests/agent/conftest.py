"""Fixtures for the LLM path: a scripted OpenAI-compatible server on 127.0.0.1 and clean settings."""
from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent import LLMSettings
from openai_stub import OpenAIStub

ENV = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "VERIFY_AGENT_MODEL", "VERIFY_AGENT_CACHE")
PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


@pytest.fixture(autouse=True)
def isolated_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No endpoint, key or cache from the machine; traffic to 127.0.0.1 never goes to a proxy."""
    for name in ENV + PROXIES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def stub() -> Iterator[OpenAIStub]:
    server = OpenAIStub().start()
    yield server
    server.stop()


@pytest.fixture
def settings_for(tmp_path: Path):
    """Settings pointing at a stub, with a private cache and fast retries."""

    def make(server: OpenAIStub | None = None, **overrides) -> LLMSettings:
        values = dict(base_url=server.url if server else None, api_key="test-key", model="stub-model",
                      cache_dir=str(tmp_path / "cache"), retry_initial_wait=0.01, retry_max_wait=0.05,
                      retry_deadline=20.0, request_timeout=10.0, execution_timeout=60.0)
        values.update(overrides)
        return LLMSettings(**values)

    return make


@pytest.fixture
def closed_port() -> int:
    """A port on 127.0.0.1 with nothing listening (connection refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
