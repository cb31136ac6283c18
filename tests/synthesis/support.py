"""Helpers for the synthesis tests: example files, and applying a unified diff the way `patch` does."""
from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
IR_EXAMPLES = REPO / "examples" / "ir"
TEMPORAL_EXAMPLES = REPO / "examples" / "temporal"
MODELS = REPO / "examples" / "models"

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def apply_unified_diff(original: str, diff: str) -> str:
    """Apply a unified diff (as produced by difflib) to ``original``; context lines must match."""
    old = original.splitlines(keepends=True)
    out: list[str] = []
    position = 0  # next line of ``old`` not yet copied
    lines = diff.splitlines(keepends=True)
    index = 0
    while index < len(lines):
        match = _HUNK.match(lines[index])
        index += 1
        if not match:
            continue
        start = int(match.group(1)) - (0 if match.group(2) == "0" else 1)
        out.extend(old[position:start])
        position = start
        while index < len(lines) and not lines[index].startswith("@@"):
            line = lines[index]
            index += 1
            tag, text = line[:1], line[1:]
            if tag == " ":
                assert old[position] == text, f"context mismatch at line {position + 1}: {old[position]!r} != {text!r}"
                out.append(text)
                position += 1
            elif tag == "-":
                assert old[position] == text, f"removed line mismatch at line {position + 1}"
                position += 1
            elif tag == "+":
                out.append(text)
            elif line.startswith("\\"):
                continue
    out.extend(old[position:])
    return "".join(out)


def changed_line_count(diff: str) -> int:
    return sum(1 for line in diff.splitlines() if line[:1] in "+-" and not line.startswith(("+++", "---")))
