"""Problems with an IR *as a translation* — the only things the feedback loop may send back.

A ``Problem`` is deliberately a different type from ``verifier.report.Diagnostic``: there is
no conversion from a verification finding to a ``Problem``, so a violation the verifier finds
in the source cannot reach the model as "fix your IR" by accident (see ``agent/loop.py``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from verifier.ir import Op

PARSE, STRUCTURE, SHAPE, FAITHFULNESS, EXECUTION = "parse", "structure", "shape", "faithfulness", "execution"
KINDS = (PARSE, STRUCTURE, SHAPE, FAITHFULNESS, EXECUTION)


@dataclass(frozen=True)
class Problem:
    """One reason the model's answer is not a faithful, readable IR of the source."""

    kind: str
    message: str
    source_line: int | None = None  # the line of the user's file it is about
    answer_line: int | None = None  # the line of the model's answer (parse errors in .vir text)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown problem kind {self.kind!r}")

    def __str__(self) -> str:
        where = f"line {self.source_line}: " if self.source_line is not None else ""
        return f"[{self.kind}] {where}{self.message}"


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "none"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    return str(value)


def describe_op(op: Op) -> str:
    """``y = all_reduce(h, mesh_dim=tp, op=sum) at 14``: how problems quote an op."""
    arguments = list(op.args) + [f"{key}={_value(value)}" for key, value in op.attrs.items()]
    head = f"{', '.join(op.results)} = " if op.results else ""
    where = f" at {op.span.line}" if op.span.line is not None else ""
    return f"{head}{op.kind}({', '.join(arguments)}){where}"
