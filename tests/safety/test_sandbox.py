"""User code runs only in children with a scrubbed environment, a time limit and a memory limit."""
from __future__ import annotations

import textwrap
import time

import pytest

from frontends.sandbox import is_secret, run_python, scrub


def test_secrets_and_proxies_are_scrubbed_and_the_rest_kept():
    env = {"OPENAI_API_KEY": "sk", "OPENAI_BASE_URL": "http://x", "MY_TOKEN": "t", "AWS_REGION": "r",
           "HTTPS_PROXY": "p", "PATH": "/bin", "HOME": "/h", "LANG": "C"}
    assert scrub(env) == {"PATH": "/bin", "HOME": "/h", "LANG": "C"}
    assert is_secret("github_token") and not is_secret("PYTHONPATH")


def test_child_sees_no_api_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    monkeypatch.setenv("VERIFY_AGENT_SAFETY_PROBE", "x")
    result = run_python(["-c", "import os; print(sorted(k for k in os.environ if 'OPENAI' in k or 'PROBE' in k))"],
                        timeout=30)
    assert result.ok and result.stdout.strip() == b"[]"


def test_child_is_killed_at_its_timeout():
    started = time.monotonic()
    result = run_python(["-c", "import time; time.sleep(60)"], timeout=1.0)
    assert result.timed_out and not result.ok
    assert time.monotonic() - started < 10


def test_child_memory_is_limited():
    result = run_python(["-c", "x = bytearray(3 * 2**30); print('allocated')"], timeout=30, memory_bytes=1 * 2**30)
    assert result.returncode != 0 and b"allocated" not in result.stdout
    assert b"MemoryError" in result.stderr


def test_worker_may_only_reach_the_loopback_interface():
    code = textwrap.dedent("""
        import socket
        from frontends.sandbox import enter_child
        enter_child(memory_bytes=None)
        try:
            socket.create_connection(("203.0.113.1", 80), timeout=1)
            print("connected")
        except PermissionError:
            print("refused")
        server = socket.socket(); server.bind(("127.0.0.1", 0)); server.listen()
        socket.create_connection(server.getsockname(), timeout=1)
        print("loopback ok")
    """)
    result = run_python(["-c", code], timeout=60)
    assert result.stdout.splitlines() == [b"refused", b"loopback ok"], result.stderr[-500:]


SOURCE = '''
import os
import torch
import torch.distributed as dist


def example_inputs():
    return (torch.ones(4),)


def forward(x):
    leaked = 1.0 if any("OPENAI" in name for name in os.environ) else 0.0
    return x * 0 + leaked
'''


@pytest.mark.torch
def test_execution_triage_runs_the_file_without_the_api_key(monkeypatch):
    pytest.importorskip("torch")
    from agent.execute import run_source

    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    execution = run_source(SOURCE, "leak.py", mesh=(("tp", 2),), timeout=60)
    assert execution.reference.ok and execution.parallel.ok, (execution.reference, execution.parallel)
    flat = [float(v) for out in execution.reference.outputs[0] for v in __import__("numpy").ravel(out)]
    assert flat == [0.0, 0.0, 0.0, 0.0]


def test_no_exec_turns_off_the_llm_paths_execution_triage(monkeypatch):
    """--no-exec reaches the LLM path: its settings say execute=False, so triage never runs the file."""
    import agent

    from verify_agent.pipeline import TranslateOptions, translate_and_verify

    seen = {}

    class Stop(Exception):
        pass

    def capture(source, path, translation, settings, progress, **kwargs):
        seen["execute"] = settings.execute
        raise Stop()

    monkeypatch.setattr(agent, "llm_translate", capture, raising=False)
    from pathlib import Path

    source = (Path(__file__).resolve().parents[2] / "examples" / "models" / "dist_tp_mlp_ok.py").read_text()
    for no_exec in (True, False):
        with pytest.raises(Stop):
            translate_and_verify(source, "m.py", TranslateOptions(llm="full", no_exec=no_exec))
        assert seen["execute"] is (not no_exec)
