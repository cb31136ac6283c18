"""What every frontend returns: an IR program (or none) and what it could not read.

Frontends never guess: a construct they do not know becomes an ``Unsupported`` entry naming
the line and the construct; the agent (LLM path) may take those over, and without it the
verdict is ``unsupported``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from verifier.ir import Program


class SourceError(Exception):
    """The user's file is not what we need (syntax error, no entry, bad --input): exit code 2."""

    def __init__(self, file: str, line: int | None, message: str):
        self.file, self.line, self.message = file, line, message
        super().__init__(f"{file}:{line}: {message}" if line else f"{file}: {message}")


@dataclass(frozen=True)
class Unsupported:
    line: int | None
    construct: str
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.construct}: {self.reason}"


@dataclass
class Translation:
    program: Program | None
    style: str  # explicit | megatron | dtensor
    entry: str
    unsupported: list[Unsupported] = field(default_factory=list)
    provenance: list[str] = field(default_factory=list)  # per op: "frontend" or "llm round N"
    notes: list[str] = field(default_factory=list)  # modelling choices a reader should know about
    backward_bodies: list[Any] = field(default_factory=list)  # custom autograd backwards, for a gradient checker
    # (line, reason) why the single-device reference is not what the file does at world size 1
    # (a world-size branch decided for the mesh); the verifier then does not claim equivalence
    reference_caveats: list[tuple[int | None, str]] = field(default_factory=list)
    # (line, reason) distributed constructs outside the program that was checked
    uncovered: list[tuple[int | None, str]] = field(default_factory=list)
    # (line, reason) custom backwards that were not translated (gradients derived from the forward)
    untranslated_backwards: list[tuple[int | None, str]] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return self.program is not None and not self.unsupported
