"""What user code writes to its temporary directory does not outlive the run.

Each child that runs user code gets a temporary directory of its own (TMPDIR, TMP, TEMP), removed when
the child ends: a file or a library it imports (wandb makes a media directory at import and removes it
only at a clean interpreter exit, which a killed or ``os._exit``-ing rank never has) cannot litter the
user's temporary directory with one directory per run.  Before, the child used the tool's.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from frontends.sandbox import run_python

REPO = Path(__file__).resolve().parents[2]

LEAVES_TEMP_FILES = '''\
import os
import tempfile

left = tempfile.mkdtemp(prefix="left-behind-")
with open(os.path.join(left, "media.bin"), "wb") as media:
    media.write(b"x" * 1024)
print(left)
os._exit(0)   # no interpreter exit: nothing of the file's own clean-up runs
'''


def _tool_temp(tmp_path: Path, monkeypatch) -> Path:
    tool_temp = tmp_path / "tool_temp"
    tool_temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tool_temp))
    monkeypatch.setattr(tempfile, "tempdir", None)
    return tool_temp


def test_a_childs_temporary_files_are_removed_when_it_ends(tmp_path, monkeypatch):
    tool_temp = _tool_temp(tmp_path, monkeypatch)
    result = run_python(["-c", LEAVES_TEMP_FILES], timeout=60)
    assert result.ok, result.stderr
    left = Path(result.stdout.decode().strip())
    assert left.name.startswith("left-behind-")
    assert not left.exists()
    assert os.listdir(tool_temp) == []


ROW_PARALLEL = '''\
import tempfile

import torch
import torch.distributed as dist

LEFT = tempfile.mkdtemp(prefix="left-behind-")


def example_inputs():
    return torch.randn(4, 8), torch.randn(8, 4)


def forward(x, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    y = x.chunk(world, dim=1)[rank] @ w.chunk(world, dim=0)[rank]
    dist.all_reduce(y)
    return y
'''


@pytest.mark.torch
def test_translate_leaves_nothing_in_the_users_temporary_directory(tmp_path, monkeypatch):
    """Cold and warm runs (``translate DIR`` forks the files' runs from a server), the tracer's ranks and
    the gloo confirmation alike."""
    pytest.importorskip("torch")
    tool_temp = _tool_temp(tmp_path, monkeypatch)
    files = tmp_path / "files"
    files.mkdir()
    (files / "a_row_parallel.py").write_text(ROW_PARALLEL, encoding="utf-8")
    (files / "b_missing_reduce.py").write_text(ROW_PARALLEL.replace("    dist.all_reduce(y)\n", ""),
                                               encoding="utf-8")
    proc = subprocess.run([sys.executable, "-c", "from verify_agent.cli import main; main()", "translate",
                           str(files), "--format", "json", "--timeout", "120"],
                          capture_output=True, text=True, cwd=str(REPO), timeout=600)
    verdicts = {Path(body["file"]).name: body["verdict"] for body in json.loads(proc.stdout)["files"]}
    assert verdicts == {"a_row_parallel.py": "verified", "b_missing_reduce.py": "violations"}
    left = [name for name in os.listdir(tool_temp) if name.startswith("left-behind-")]
    assert left == []
