"""Results of verification: diagnostics and the report every front end and CLI prints.

The JSON shape is the contract of DESIGN.md; ``Report.to_json`` is the only place it is built.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

VERIFIED, VIOLATIONS, UNSUPPORTED = "verified", "violations", "unsupported"
EXIT_CODES = {VERIFIED: 0, VIOLATIONS: 1, UNSUPPORTED: 3}
EXIT_USAGE = 2


def worst_exit_code(codes) -> int:
    """The exit code of several verdicts (files, entries): violations (1) first, then unsupported (3),
    then the highest of the rest (an internal error 4 over an input error 2 over verified 0)."""
    return max(codes, key=lambda code: (code == 1, code == 3, code))

ERROR, WARNING, NOTE = "error", "warning", "note"


@dataclass
class Counterexample:
    """A concrete witness, in the user's terms, re-checked by concrete evaluation."""

    inputs: dict[str, Any]
    reference: dict[str, Any]
    per_rank: dict[str, dict[str, Any]]
    value: str
    confirmed: bool = True
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "inputs": self.inputs, "reference": self.reference,
                "per_rank": self.per_rank, "confirmed_by_evaluation": self.confirmed, "note": self.note}


@dataclass
class Diagnostic:
    check: str
    severity: str
    message: str
    line: int | None = None
    counterexample: Counterexample | None = None
    hint: str | None = None
    column: int | None = None  # 1-based, where the source gives one (a kernel's statement)
    # where the repair goes (the line a verified fix changes, or after which it inserts), when one was
    # found; ``line`` is where the first diverging value is produced
    repair_line: int | None = None
    # the file ``line`` is in when it is not the report's file: a module of the user's own package
    # the checked file calls into (its path); ``repair_line`` is always in the report's file
    file: str | None = None
    # a wait the checked file's own lines miss (async hygiene): (the async op's line, the first early read's
    # line or None when the handle is never waited on); the front end that holds the source turns it into a
    # ``repair_line``, the line after which the wait goes
    missing_wait: tuple[int, int | None] | None = field(default=None, compare=False)

    def to_json(self) -> dict[str, Any]:
        return {"check": self.check, "severity": self.severity, "line": self.line, "column": self.column,
                "file": self.file, "repair_line": self.repair_line, "message": self.message, "hint": self.hint,
                "counterexample": self.counterexample.to_json() if self.counterexample else None}


@dataclass
class Fix:
    description: str
    patch: str
    comm_cost: float

    def to_json(self) -> dict[str, Any]:
        return {"description": self.description, "patch": self.patch, "comm_cost": self.comm_cost}


@dataclass
class Report:
    file: str | None
    mesh: dict[str, int]
    diagnostics: list[Diagnostic] = field(default_factory=list)
    fixes: list[Fix] = field(default_factory=list)
    ops: int = 0
    seconds: float = 0.0
    proven: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        if any(d.severity == ERROR and d.check != "unsupported" for d in self.diagnostics):
            return VIOLATIONS
        if any(d.check == "unsupported" for d in self.diagnostics) or not self.proven:
            return UNSUPPORTED
        return VERIFIED

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    def add(self, diagnostic: Diagnostic) -> None:
        self.diagnostics.append(diagnostic)

    def to_json(self) -> dict[str, Any]:
        body = {"verdict": self.verdict, "file": self.file, "mesh": self.mesh,
                "diagnostics": [d.to_json() for d in self.diagnostics],
                "fixes": [f.to_json() for f in self.fixes],
                "stats": {"ops": self.ops, "seconds": round(self.seconds, 4)},
                "proven": self.proven}
        body.update(self.extra)
        return body
