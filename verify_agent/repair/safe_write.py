"""Read a source file exactly, and replace it without ever losing it (``fix --write``).

Reading keeps what the text form forgets: the encoding (PEP 263 cookie or BOM), the exact
text with each line's own ending, and the bytes' hash.  New text goes back line by line: lines
the fix did not touch keep their bytes (CRLF next to LF, tabs, no newline at the end); a line the
fix wrote takes the ending of the line it replaces or follows.  Replacing

* takes an advisory lock (``flock``) on the file: a second ``fix --write`` on the same file
  while one is writing is refused, never interleaved;
* refuses when the file's bytes changed since they were read (an edit saved meanwhile wins,
  and so does a ``fix --write`` that finished first);
* refuses a read-only file (the user said so);
* keeps a backup ``FILE.orig`` (``FILE.orig.1``, ... if taken) unless told not to;
* a file with one name: writes a temporary file in the same folder, fsyncs it, gives it the
  original's mode bits and renames it over the original (``os.replace`` is atomic on POSIX and
  Windows), then fsyncs the folder — a kill or a full disk at any moment leaves the old file or
  the new one, never a truncated one;
* a file with hard links (a rename would split them): writes in place, into the same inode,
  after an fsynced copy of the old bytes (``FILE.orig``, or a hidden temporary copy with
  ``--no-backup``) that is removed only once the new bytes are fsynced; a failed write puts the
  old bytes back, and if even that fails the message names the copy.
"""
from __future__ import annotations

import codecs
import contextlib
import difflib
import hashlib
import io
import os
import re
import stat
import tempfile
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: the content check alone guards concurrent writers
    fcntl = None  # type: ignore[assignment]

_LINE = re.compile(r"[^\n]*\n|[^\n]+")  # a line with its ending ("\r\n" ends in "\n"), or a last unended line
_BLANK = " \t\r\n\f"
_DIFF_CELLS = 4_000_000  # above this many line pairs the changed middle is replaced whole

class WriteRefused(Exception):
    """The file was left as it is; the message says why in one line."""


@dataclass(frozen=True)
class SourceText:
    """A file's text (``\\n`` newlines, no BOM) and how to turn new text back into its bytes."""

    path: Path
    text: str
    encoding: str
    bom: bool
    newline: str  # the most common ending: for lines a fix adds where no neighbour has one
    digest: str
    exact: Optional[str] = None  # the decoded text with every line's own ending (None: ``text`` with ``newline``)

    def encode(self, text: str) -> bytes:
        """``text``'s bytes: untouched lines exactly as read, new lines with their neighbours' endings."""
        exact = self.exact if self.exact is not None else self.text.replace("\n", self.newline)
        body = splice_lines(exact, text.replace("\r\n", "\n"), self.newline).encode(self.encoding)
        return (codecs.BOM_UTF8 if self.bom else b"") + body


def _ending(line: str) -> str:
    return "\r\n" if line.endswith("\r\n") else "\n" if line.endswith("\n") else ""


def splice_lines(exact: str, new_text: str, default_newline: str) -> str:
    """``new_text`` (``\\n`` endings) written with ``exact``'s own lines wherever they are unchanged.

    A line ``new_text`` adds or rewrites takes the ending of the original line it replaces, else
    of the line before it (after it at the top), else ``default_newline``; a last line without
    an ending stays without one.  Whitespace-only lines that ``new_text`` merely drops, and the
    file's whitespace after its last line, are kept: they mean nothing to Python, and the patch
    editor's round trip loses some (a tab-only last line).
    """
    last = exact.find("\n", len(exact.rstrip(_BLANK)))
    if 0 <= last < len(exact) - 1:  # whitespace after the last line's ending: kept as it is
        body = exact[:last + 1]
        return splice_lines(body, new_text.rstrip(_BLANK) + "\n", default_newline) + exact[len(body):]
    old = _LINE.findall(exact)
    plain = [line[:-2] + "\n" if line.endswith("\r\n") else line for line in old]
    new = _LINE.findall(new_text)
    head = 0
    while head < min(len(plain), len(new)) and plain[head] == new[head]:
        head += 1
    tail = 0
    while tail < min(len(plain), len(new)) - head and plain[-1 - tail] == new[-1 - tail]:
        tail += 1
    middle_old, middle_new = plain[head:len(plain) - tail], new[head:len(new) - tail]
    if len(middle_old) * len(middle_new) <= _DIFF_CELLS:
        blocks = difflib.SequenceMatcher(None, middle_old, middle_new, autojunk=False).get_opcodes()
    else:
        blocks = [("replace", 0, len(middle_old), 0, len(middle_new))]
    out = old[:head]
    for tag, i1, i2, j1, j2 in blocks:
        i1, i2 = i1 + head, i2 + head
        if tag == "equal" or (tag == "delete" and all(not line.strip() for line in old[i1:i2])):
            out += old[i1:i2]  # a whitespace-only line a fix drops is kept (libcst's round trip loses some)
            continue
        for k, line in enumerate(new[head + j1:head + j2]):
            if not line.endswith("\n"):
                out.append(line)
                continue
            near = [i1 + k] if i1 + k < i2 else []
            near += [i2 - 1] if i2 > i1 else []
            near += [i1 - 1, i1]
            endings = [_ending(old[i]) for i in near if 0 <= i < len(old) and _ending(old[i])]
            out.append(line[:-1] + (endings[0] if endings else default_newline))
    out += old[len(old) - tail:] if tail else []
    return "".join(out)


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
    return SourceText(path, text.replace("\r\n", "\n"), codec, bom, newline, digest(raw), text)


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


@contextlib.contextmanager
def _exclusive(target: Path, shown: Path) -> Iterator[None]:
    """Hold an advisory lock on ``target`` (the inode the path names now), or refuse at once."""
    try:
        fd = os.open(target, os.O_RDONLY)
    except FileNotFoundError:
        raise WriteRefused(f"{shown}: the file was removed while the fix was searched; nothing was written") from None
    except OSError as error:
        raise WriteRefused(f"{shown}: cannot open it again ({error.strerror or error}); nothing was written") from None
    try:
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise WriteRefused(f"{shown}: another verify-agent fix --write is writing this file; nothing was "
                                   f"written (run fix again when it is done)") from None
            except OSError:
                pass  # a file system without locks: the content checks below still hold
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(target))
        except OSError:
            same = False
        if not same:  # the path names another file now (a writer renamed over it): re-read
            raise WriteRefused(f"{shown}: the file changed while the fix was searched; nothing was written (run fix "
                               f"again on the new version)")
        yield
    finally:
        os.close(fd)  # releases the lock


def replace_source(original: SourceText, new_text: str, *, backup: bool = True) -> Optional[Path]:
    """Write ``new_text`` over ``original.path``: untouched lines byte for byte; the backup's path.

    Raises ``WriteRefused`` (nothing written) when the file changed since it was read, is
    read-only, is gone, or another ``fix --write`` holds it.
    """
    target = Path(os.path.realpath(original.path))  # write through a symlink, keep the link
    with _exclusive(target, original.path):
        return _replace_locked(original, target, original.encode(new_text), backup)


def _replace_locked(original: SourceText, target: Path, data: bytes, backup: bool) -> Optional[Path]:
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
    saved = None
    try:
        if backup:
            saved = _backup_path(target)
            _write_new(saved, current, info.st_mode)
        if digest(target.read_bytes()) != original.digest:  # last look before the write
            raise WriteRefused(f"{original.path}: the file changed while the fix was written; nothing was written")
        if info.st_nlink > 1:
            _write_in_place(original.path, target, current, data, info.st_mode, saved)
        else:
            _write_new(target, data, info.st_mode)
    except OSError as error:
        raise WriteRefused(f"{original.path}: cannot write next to it ({error.strerror or error}); the file is "
                           f"unchanged") from None
    return saved


def _write_in_place(shown: str | Path, target: Path, old: bytes, data: bytes, mode: int,
                    saved: Optional[Path]) -> None:
    """``data`` into ``target``'s own inode (every hard link sees it), with the old bytes safe first.

    ``saved`` is an fsynced backup already; without one a hidden copy is written next to the file
    and removed only after the new bytes are fsynced.  A failed write puts the old bytes back.
    """
    keep = saved
    if keep is None:
        handle, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".old")
        os.close(handle)
        keep = Path(name)
        try:
            _write_new(keep, old, mode)
        except BaseException:
            keep.unlink(missing_ok=True)
            raise
    try:
        _overwrite(target, data)
    except BaseException as error:
        try:
            _overwrite(target, old)
        except BaseException:
            raise WriteRefused(f"{shown}: writing failed halfway and the old contents could not be put back; they "
                               f"are in {keep}") from None
        if saved is None:
            keep.unlink(missing_ok=True)
        if isinstance(error, OSError):
            raise WriteRefused(f"{shown}: cannot write it ({error.strerror or error}); the file is unchanged") from None
        raise
    if saved is None:
        keep.unlink(missing_ok=True)
        _fsync_folder(target.parent)


def _overwrite(target: Path, data: bytes) -> None:
    fd = os.open(target, os.O_WRONLY)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.ftruncate(fd, len(data))
        os.fsync(fd)
    finally:
        os.close(fd)
