"""Errors of the lifter: bad input (a usage error, exit code 2) and constructs it cannot model.

``LiftInputError`` prints as one line ``file:line: expected ...`` so editors can jump to it.
``Unsupported`` is raised inside a frontend for one construct and turned into an
``unsupported`` diagnostic by the caller: the verdict is then never a silent pass.
"""
from __future__ import annotations


class LiftInputError(ValueError):
    """The kernel file or a command-line argument is malformed."""

    def __init__(self, message: str, file: str | None = None, line: int | None = None):
        self.file, self.line, self.message = file, line, message
        where = f"{file or '<input>'}:{line if line is not None else 0}"
        super().__init__(f"{where}: {' '.join(message.split())}")


class Unsupported(Exception):
    """A construct the lifter cannot model; ``line`` is the kernel source line."""

    def __init__(self, line: int | None, reason: str):
        self.line, self.reason = line, reason
        super().__init__(f"line {line}: {reason}")


class Rejected(Unsupported):
    """TileLang itself rejects the kernel at the file's own sizes (an operand shape check of its
    tile ops): a finding about the file, reported as a ``build`` violation at ``line``."""


class InfiniteValue(Unsupported):
    """The symbolic run met arithmetic on an infinity it cannot decide (``-inf - -inf``)."""


class LiftInternalError(RuntimeError):
    """A failure of the lifter itself (exit code 4), never reported as ``unsupported``."""
