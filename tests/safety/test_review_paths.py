"""``review`` reads ``git diff -z``: renamed, deleted and non-ASCII paths are all handled."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from verify_agent.repair.commands import UsageError
from verify_agent.repair.review import changed_files


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True,
                   capture_output=True)


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q")
    (root / "keep.py").write_text("x = 1\n")
    (root / "old name.py").write_text("def f():\n    return 1\n" * 20)
    (root / "gone.py").write_text("y = 2\n")
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "base")
    return root


def test_renames_deletions_and_non_ascii_names(repo):
    _git(repo, "mv", "old name.py", "renamed.py")
    _git(repo, "rm", "-q", "gone.py")
    (repo / "modèle_ünï.py").write_text("z = 3\n")
    (repo / "keep.py").write_text("x = 2\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "change")
    assert sorted(changed_files("HEAD~1", repo)) == ["keep.py", "modèle_ünï.py", "renamed.py"]


def test_a_ref_that_looks_like_an_option_is_refused(repo, tmp_path):
    with pytest.raises(UsageError, match="expected a git ref"):
        changed_files(f"--output={tmp_path / 'written'}", repo)
    assert not (tmp_path / "written").exists()
