"""``fix --write`` changes only the lines of the fix: the other bytes, the inode and a racing writer's work survive.

Bytes outside the edit are kept byte for byte (CRLF next to LF, tabs, a BOM, no newline at the
end); a file with hard links is written in place so every name sees the fix; of two
``fix --write`` on one file exactly one writes and the other is refused (exit 2, one line).
"""
from __future__ import annotations

import codecs
import errno
import fcntl
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verify_agent.cli import app
from verify_agent.repair import safe_write
from verify_agent.repair.safe_write import WriteRefused, read_source, replace_source

ROOT = Path(__file__).resolve().parents[2]
BUGGY = ROOT / "examples" / "models" / "dist_tp_mlp_missing_allreduce.py"
FIX_LINE = b"    dist.all_reduce(y)"


def mixed_endings(text: str) -> bytes:
    """Every third line CRLF, a tab in a comment, no newline at the end."""
    lines = text.rstrip("\n").split("\n")
    lines[1] = "#\tindented with a tab\t"
    ended = [line + ("\r\n" if index % 3 == 0 else "\n") for index, line in enumerate(lines[:-1])]
    return ("".join(ended) + lines[-1]).encode()


def without_fix_line(data: bytes) -> bytes:
    """``data`` with the one line the fix adds taken out (with its ending)."""
    start = data.index(FIX_LINE)
    end = data.index(b"\n", start) + 1
    return data[:start] + data[end:]


def fix_write(folder: Path, *extra: str):
    return CliRunner().invoke(app, ["fix", "model.py", "--write", "--format", "json", "--no-exec", *extra])


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_mixed_line_endings_tabs_and_no_final_newline_are_kept_outside_the_fix(workdir):
    original = mixed_endings(BUGGY.read_text())
    (workdir / "model.py").write_bytes(original)
    result = fix_write(workdir)
    assert result.exit_code == 0, result.output
    written = (workdir / "model.py").read_bytes()
    assert FIX_LINE in written
    assert without_fix_line(written) == original


def test_the_added_line_takes_the_ending_of_the_line_before_it(workdir):
    original = mixed_endings(BUGGY.read_text())
    (workdir / "model.py").write_bytes(original)
    fix_write(workdir)
    written = (workdir / "model.py").read_bytes()
    before = written[:written.index(FIX_LINE)]
    added = written[written.index(FIX_LINE):]
    assert added[len(FIX_LINE):].startswith(b"\r\n" if before.endswith(b"\r\n") else b"\n")


def test_a_bom_and_crlf_file_keeps_both(workdir):
    original = codecs.BOM_UTF8 + BUGGY.read_bytes().replace(b"\n", b"\r\n")
    (workdir / "model.py").write_bytes(original)
    assert fix_write(workdir).exit_code == 0
    written = (workdir / "model.py").read_bytes()
    assert written.startswith(codecs.BOM_UTF8) and written.count(b"\r\n") == written.count(b"\n")
    assert without_fix_line(written) == original


def test_a_hard_linked_file_is_written_in_place_and_every_name_sees_the_fix(workdir):
    (workdir / "model.py").write_bytes(BUGGY.read_bytes())
    os.link(workdir / "model.py", workdir / "other_name.py")
    inode = (workdir / "model.py").stat().st_ino
    result = fix_write(workdir)
    assert result.exit_code == 0, result.output
    assert (workdir / "model.py").stat().st_ino == inode
    assert (workdir / "model.py").stat().st_nlink == 2
    assert FIX_LINE in (workdir / "other_name.py").read_bytes()
    assert (workdir / "model.py.orig").read_bytes() == BUGGY.read_bytes()


def test_a_hard_linked_file_without_backup_leaves_no_copy_behind(workdir):
    (workdir / "model.py").write_bytes(BUGGY.read_bytes())
    os.link(workdir / "model.py", workdir / "other_name.py")
    assert fix_write(workdir, "--no-backup").exit_code == 0
    assert FIX_LINE in (workdir / "other_name.py").read_bytes()
    assert sorted(p.name for p in workdir.iterdir()) == ["model.py", "other_name.py"]


def test_a_failed_in_place_write_puts_the_old_bytes_back(tmp_path, monkeypatch):
    target = tmp_path / "m.py"
    target.write_bytes(b"x = 1\r\ny = 2\n")
    os.link(target, tmp_path / "link.py")
    source = read_source(target)
    real_overwrite = safe_write._overwrite
    calls = []

    def disk_full_once(path, data):
        calls.append(data)
        if len(calls) == 1:
            with open(path, "r+b") as half:
                half.write(data[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")
        real_overwrite(path, data)

    monkeypatch.setattr(safe_write, "_overwrite", disk_full_once)
    with pytest.raises(WriteRefused, match="No space left on device.*unchanged"):
        replace_source(source, "x = 1\nz = 3\n", backup=False)
    assert target.read_bytes() == b"x = 1\r\ny = 2\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.py", "m.py"]


def test_a_writer_holding_the_lock_makes_the_second_refuse(tmp_path):
    target = tmp_path / "m.py"
    target.write_text("x = 1\n")
    source = read_source(target)
    with open(target, "rb") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        with pytest.raises(WriteRefused, match="another verify-agent fix --write is writing this file"):
            replace_source(source, "x = 2\n", backup=False)
    assert target.read_text() == "x = 1\n"


RACER = textwrap.dedent("""
    import os, sys, time
    from verify_agent.repair.safe_write import WriteRefused, read_source, replace_source
    target, name, go = sys.argv[1], sys.argv[2], sys.argv[3]
    source = read_source(target)
    real_fsync = os.fsync
    def slow_fsync(fd):  # a slow disk: the write holds the lock long enough for the other racer
        time.sleep(0.5)
        real_fsync(fd)
    os.fsync = slow_fsync
    print("ready", flush=True)
    while not os.path.exists(go):
        time.sleep(0.001)
    try:
        replace_source(source, source.text + f"# written by {name}\\n", backup=False)
        print("wrote", flush=True)
    except WriteRefused as refused:
        print("refused", refused, flush=True)
""")


def test_two_writer_processes_racing_on_one_file_one_wins(tmp_path):
    target = tmp_path / "m.py"
    target.write_bytes(b"x = 1\r\ny = 2\n")
    os.link(target, tmp_path / "link.py")  # in place: both racers open the same inode
    go = tmp_path / "go"
    racers = [subprocess.Popen([sys.executable, "-c", RACER, str(target), name, str(go)], cwd=ROOT,
                               stdout=subprocess.PIPE, text=True) for name in ("a", "b")]
    for racer in racers:
        assert racer.stdout.readline().strip() == "ready"
    go.touch()
    answers = [racer.communicate(timeout=60)[0].strip() for racer in racers]
    assert sorted(answer.split()[0] for answer in answers) == ["refused", "wrote"], answers
    winner = "ab"[[answer.split()[0] for answer in answers].index("wrote")]
    assert target.read_bytes() == f"x = 1\r\ny = 2\n# written by {winner}\n".encode()
    loser = next(answer for answer in answers if answer.startswith("refused"))
    assert "another verify-agent fix --write is writing this file" in loser or "changed" in loser


def test_two_fix_write_commands_racing_one_wins_the_other_exits_2(tmp_path):
    """Started together, one writes; the other is refused (exit 2), or, when it read the file only
    after the winner wrote it, finds nothing to fix (exit 0, no write).  Never two writes."""
    target = tmp_path / "model.py"
    target.write_bytes(mixed_endings(BUGGY.read_text()))
    original = target.read_bytes()
    command = [sys.executable, "-m", "verify_agent", "fix", "model.py", "--write", "--format", "json", "--no-exec"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    racers = [subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True) for _ in range(2)]
    outputs = [racer.communicate(timeout=240) for racer in racers]
    documents = [json.loads(out) for out, _ in outputs]
    wrote = [racer.returncode == 0 and "before" in document for racer, document in zip(racers, documents)]
    assert wrote.count(True) == 1, outputs
    loser = wrote.index(False)
    if racers[loser].returncode == 2:
        assert documents[loser]["verdict"] == "input-error"
        assert outputs[loser][1].strip().splitlines()[-1].startswith("error: model.py: ")
    else:  # it read the file after the winner had written it
        assert racers[loser].returncode == 0 and documents[loser]["verdict"] == "verified"
    written = target.read_bytes()
    assert written.count(FIX_LINE) == 1 and without_fix_line(written) == original
    assert (tmp_path / "model.py.orig").read_bytes() == original
    assert not (tmp_path / "model.py.orig.1").exists()


@pytest.mark.parametrize("tail", [b"\t", b"\t\r\n", b"\n  \n\n"])
def test_whitespace_after_the_last_line_is_kept(workdir, tail):
    original = BUGGY.read_bytes().replace(b"\n", b"\r\n") + tail
    (workdir / "model.py").write_bytes(original)
    assert fix_write(workdir).exit_code == 0
    assert without_fix_line((workdir / "model.py").read_bytes()) == original
