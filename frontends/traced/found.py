"""What the child found in a file without running an entry (no torch needed to read it)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Candidate:
    """One distributed entry of the file: ``kind`` "module" or "function"; ``why`` what makes it distributed."""

    name: str
    kind: str
    line: int | None
    why: str


@dataclass(frozen=True)
class Discovery:
    """The file's distributed entries, in source order; ``conventions``: it defines the entry points
    this tool's drivers use (``forward``, ``build``, ``example_module``, ``example_inputs``), so the
    single-entry rules apply; ``default``: the entry those rules pick without ``--entry`` (None: none)."""

    entries: tuple[Candidate, ...]
    conventions: bool = False
    default: str | None = None
