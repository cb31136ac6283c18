"""Read a source file exactly, and replace it without ever losing it (``fix --write``).

Reading keeps what the text form forgets: the encoding (PEP 263 cookie or BOM), the newline
style and the bytes' hash.  Replacing

* refuses when the file's bytes changed since they were read (an edit saved meanwhile wins);
* refuses a read-only file (the user said so);
* keeps a backup ``FILE.orig`` (``FILE.orig.1``, ... if taken) unless told not to;
* writes a temporary file in the same folder, fsyncs it, gives it the original's mode bits
  and renames it over the original (``os.replace`` is atomic on POSIX and Windows), then
  fsyncs the folder — a kill or a full disk at any moment leaves the old file or the new one,
  never a truncated one.
"""
from __future__ import annotations

import codecs
import hashlib
import io
import os
import stat
import tempfile
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import Optional


class WriteRefused(Exception):
    """The file was left as it is; the message says why in one line."""


@dataclass(frozen=True)
class SourceText:
    """A file's text (``\\n`` newlines, no BOM) and how to turn new text back into its bytes."""

    path: Path
    text: str
    encoding: str
    bom: bool
    newline: str
    digest: str

    def encode(self, text: str) -> bytes:
        body = text.replace("\r\n", "\n").replace("\n", self.newline).encode(self.encoding)
        return (codecs.BOM_UTF8 if self.bom else b"") + body


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def decode_source(path: Path, raw: bytes) -> SourceText:
    """Decode like Python does (BOM, coding cookie, else UTF-8); ``UnicodeDecodeError``/``SyntaxError`` if not."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    bom = raw.startswith(codecs.BOM_UTF8)
    codec = "utf-8" if encoding in ("utf-8-sig", "utf-8") else encoding
    text = raw[len(codecs.BOM_UTF8):].decode(codec) if bom else raw.decode(codec)
    crlf = text.count("\r\n")
    newline = "\r\n" if crlf and crlf >= text.count("\n") - crlf else "\n"
    return SourceText(path, text.replace("\r\n", "\n"), codec, bom, newline, digest(raw))


def read_source(path: str | Path) -> SourceText:
    path = Path(path)
    return decode_source(path, path.read_bytes())


def _fsync_folder(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return  # platforms without directory handles
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_new(target: Path, data: bytes, mode: int) -> None:
    """``data`` at ``target`` via temp file + fsync + rename; the temp file never outlives a failure."""
    handle, temp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    temp = Path(temp_name)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, stat.S_IMODE(mode))
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    _fsync_folder(target.parent)


def _backup_path(target: Path) -> Path:
    candidate = target.with_name(target.name + ".orig")
    number = 1
    while candidate.exists():
        candidate = target.with_name(f"{target.name}.orig.{number}")
        number += 1
    return candidate


def replace_source(original: SourceText, new_text: str, *, backup: bool = True) -> Optional[Path]:
    """Write ``new_text`` over ``original.path`` in the original's encoding and newlines; the backup's path.

    Raises ``WriteRefused`` (nothing written) when the file changed since it was read, is
    read-only, or is gone.
    """
    target = Path(os.path.realpath(original.path))  # write through a symlink, keep the link
    try:
        current = target.read_bytes()
        info = target.stat()
    except FileNotFoundError:
        raise WriteRefused(f"{original.path}: the file was removed while the fix was searched; nothing was "
                           f"written") from None
    except OSError as error:
        raise WriteRefused(f"{original.path}: cannot read it again ({error.strerror or error}); nothing was "
                           f"written") from None
    if digest(current) != original.digest:
        raise WriteRefused(f"{original.path}: the file changed while the fix was searched; nothing was written "
                           f"(run fix again on the new version)")
    if not os.access(target, os.W_OK) or not info.st_mode & stat.S_IWUSR:
        raise WriteRefused(f"{original.path}: the file is read-only; nothing was written (make it writable or "
                           f"apply the diff yourself)")
    data = original.encode(new_text)
    saved = None
    try:
        if backup:
            saved = _backup_path(target)
            _write_new(saved, current, info.st_mode)
        if digest(target.read_bytes()) != original.digest:  # last look before the rename
            raise WriteRefused(f"{original.path}: the file changed while the fix was written; nothing was written")
        _write_new(target, data, info.st_mode)
    except OSError as error:
        raise WriteRefused(f"{original.path}: cannot write next to it ({error.strerror or error}); the file is "
                           f"unchanged") from None
    return saved
