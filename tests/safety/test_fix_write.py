"""``fix --write`` never loses the user's file: atomic replace, backup, refusal on concurrent edits."""
from __future__ import annotations

import codecs
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verify_agent.cli import app
from verify_agent.pipeline import TranslateOptions
from verify_agent.repair.commands import UsageError, fix_file
from verify_agent.repair.safe_write import WriteRefused, read_source, replace_source

ROOT = Path(__file__).resolve().parents[2]
BUGGY = ROOT / "examples" / "models" / "dist_tp_mlp_missing_allreduce.py"


def test_newlines_bom_encoding_and_mode_survive(tmp_path):
    target = tmp_path / "m.py"
    original = "# -*- coding: latin-1 -*-\r\nname = 'caf\xe9'\r\nx = 1\r\n"
    target.write_bytes(original.encode("latin-1"))
    os.chmod(target, 0o640)
    source = read_source(target)
    assert source.text == original.replace("\r\n", "\n") and source.encoding == "iso-8859-1"
    backup = replace_source(source, source.text.replace("x = 1", "x = 2"))
    assert target.read_bytes() == original.replace("x = 1", "x = 2").encode("latin-1")
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert backup is not None and backup.read_bytes() == original.encode("latin-1")


def test_bom_is_kept(tmp_path):
    target = tmp_path / "m.py"
    target.write_bytes(codecs.BOM_UTF8 + b"x = 1\n")
    source = read_source(target)
    assert source.text == "x = 1\n"
    assert replace_source(source, "x = 2\n", backup=False) is None
    assert target.read_bytes() == codecs.BOM_UTF8 + b"x = 2\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.py"]  # no backup, no temp file left


def test_a_change_since_reading_is_never_overwritten(tmp_path):
    target = tmp_path / "m.py"
    target.write_text("x = 1\n")
    source = read_source(target)
    target.write_text("x = 1  # the user's edit\n")
    with pytest.raises(WriteRefused, match="changed"):
        replace_source(source, "x = 2\n")
    assert target.read_text() == "x = 1  # the user's edit\n"


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root ignores file permissions")
def test_read_only_file_is_refused_when_permissions_apply(tmp_path):
    target = tmp_path / "m.py"
    target.write_text("x = 1\n")
    os.chmod(target, 0o444)
    with pytest.raises(WriteRefused, match="read-only"):
        replace_source(read_source(target), "x = 2\n")


def test_read_only_mode_bits_are_refused_even_for_root(tmp_path):
    target = tmp_path / "m.py"
    target.write_text("x = 1\n")
    os.chmod(target, 0o444)
    with pytest.raises(WriteRefused, match="read-only"):
        replace_source(read_source(target), "x = 2\n")
    assert target.read_text() == "x = 1\n"


def test_symlink_stays_a_link(tmp_path):
    real = tmp_path / "real.py"
    real.write_text("x = 1\n")
    link = tmp_path / "link.py"
    link.symlink_to(real)
    replace_source(read_source(link), "x = 2\n", backup=False)
    assert link.is_symlink() and real.read_text() == "x = 2\n"


KILLED_WRITER = textwrap.dedent("""
    import os, sys, time
    from verify_agent.repair.safe_write import read_source, replace_source
    real_fsync = os.fsync
    def slow_fsync(fd):
        print("writing", flush=True)
        time.sleep(60)
    os.fsync = slow_fsync
    source = read_source(sys.argv[1])
    replace_source(source, "y = 2\\n" * 200000, backup=False)
""")


def test_a_kill_during_the_write_leaves_the_old_file(tmp_path):
    target = tmp_path / "m.py"
    target.write_text("x = 1\n")
    child = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(target)], stdout=subprocess.PIPE,
                             cwd=ROOT)
    assert child.stdout.readline().strip() == b"writing"  # the temp file is written, not yet renamed
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert target.read_text() == "x = 1\n"


def test_an_edit_saved_while_fix_searches_wins(tmp_path):
    target = tmp_path / "model.py"
    target.write_text(BUGGY.read_text())
    edited = BUGGY.read_text() + "\n# saved by the user meanwhile\n"
    calls = []

    def user_saves_during_search(message: str) -> None:
        if not calls:
            target.write_text(edited)
        calls.append(message)

    with pytest.raises(UsageError, match="changed while the fix was searched"):
        fix_file(target, write=True, progress=user_saves_during_search,
                 options=TranslateOptions(llm="off", no_exec=True))
    assert target.read_text() == edited
    assert not (tmp_path / "model.py.orig").exists()


def test_fix_write_keeps_crlf_and_a_backup(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    original = BUGGY.read_text().replace("\n", "\r\n").encode()
    (tmp_path / "model.py").write_bytes(original)
    result = CliRunner().invoke(app, ["fix", "model.py", "--write", "--format", "json", "--no-exec"])
    assert result.exit_code == 0, result.output
    written = (tmp_path / "model.py").read_bytes()
    assert b"all_reduce(y)" in written and written.count(b"\r\n") == written.count(b"\n")
    assert (tmp_path / "model.py.orig").read_bytes() == original
