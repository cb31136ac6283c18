"""A string in the user's file where a size is expected is data, never code (issue 14).

The payload would create ``MARK`` in the working folder if anything evaluated it; every
command must end with a clean input error (exit 2) or ``unsupported`` (exit 3) instead.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verify_agent.cli import app

PAYLOAD = "__import__('os').system('touch MARK') or 4"

PLACES = {
    "example_inputs": f'torch.zeros("{PAYLOAD}", 8)',
    "view": None,
    "chunk": None,
}


def payload_file(place: str) -> str:
    inputs = PLACES["example_inputs"] if place == "example_inputs" else "torch.randn(4, 8)"
    body = {
        "example_inputs": "y = x.chunk(world, dim=0)[rank]",
        "view": f'y = x.view("{PAYLOAD}", 8).chunk(world, dim=0)[rank]',
        "chunk": f'y = x.chunk("{PAYLOAD}", dim=0)[rank]',
    }[place]
    return f'''import torch
import torch.distributed as dist


def example_inputs():
    return ({inputs},)


def forward(x):
    rank, world = dist.get_rank(), dist.get_world_size()
    {body}
    dist.all_reduce(y)
    return y
'''


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "VERIFY_AGENT_MODEL"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


@pytest.mark.parametrize("place", sorted(PLACES))
@pytest.mark.parametrize("command", [["translate", "--llm", "off"], ["fix"]])
def test_payload_in_a_size_does_not_run(in_tmp, place, command):
    (in_tmp / "model.py").write_text(payload_file(place))
    result = CliRunner().invoke(app, [*command, "model.py", "--format", "json"])
    assert not (in_tmp / "MARK").exists()
    assert result.exit_code in (2, 3), result.output
    assert '"verdict": "input-error"' in result.output or '"verdict": "unsupported"' in result.output


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True,
                   capture_output=True)


def test_payload_does_not_run_under_review(in_tmp):
    repo = in_tmp / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "README").write_text("x\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "base")
    (repo / "model.py").write_text(payload_file("example_inputs"))
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "payload")
    result = CliRunner().invoke(app, ["review", "--base", "HEAD~1", "--repo", str(repo),
                                      "--review-json", str(in_tmp / "r.json"), "--sarif", str(in_tmp / "r.sarif")])
    assert not (in_tmp / "MARK").exists() and not (repo / "MARK").exists()
    assert result.exit_code in (0, 3), result.output
    assert "model.py" in (in_tmp / "r.json").read_text()  # listed as not checked, with the reason
