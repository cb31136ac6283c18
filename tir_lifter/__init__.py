"""TileLang / TVM TIR kernels -> lifted tile programs -> checks (``verify-agent lift``).

``run_lift(path, kernel, spec, mesh, shards)`` returns a ``verifier.report.Report``; bad
input raises :class:`LiftInputError` (one line, ``file:line: expected ...``).
"""
from .errors import LiftInputError, LiftInternalError, Unsupported
from .lift import run_lift

__all__ = ["run_lift", "LiftInputError", "LiftInternalError", "Unsupported"]
