"""What a command prints when it ends without a report: an input error, a timeout, a bug of ours.

People get one line on stderr.  Machine formats always get a document on stdout as well, so a
CI step that parses the output never reads an empty file:

* ``--format json``: the report object with ``"verdict": "input-error" | "error" | "unsupported"``;
* ``--format sarif``: a run whose invocation failed, with a tool execution notification;
* ``--format github``: an ``::error`` workflow command.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Optional

INPUT_ERROR, INTERNAL_ERROR, TIMED_OUT = "input-error", "error", "unsupported"
TOOL_URI = "https://github.com/verify-agent/verify-agent"
REPORT_BUG = f"this is a bug in verify-agent: please report it at {TOOL_URI}/issues with the command and the file"

_LOCATION = re.compile(r"^(?P<file>[^\n]*?):(?P<line>\d+): ")


@dataclass(frozen=True)
class Failure:
    """Why a command ended without a report; ``check`` names the kind (input, internal, timeout)."""

    verdict: str
    check: str
    message: str
    file: Optional[str] = None
    line: Optional[int] = None
    seconds: float = 0.0
    extra: Optional[dict] = None   # further keys of the JSON document (e.g. why the file was not traced)


def located(verdict: str, check: str, message: str, file: Optional[str], seconds: float = 0.0,
            extra: Optional[dict] = None) -> Failure:
    """A failure whose message may start with ``FILE:LINE: `` (then the line is taken from it)."""
    match = _LOCATION.match(message)
    line = int(match.group("line")) if match else None
    return Failure(verdict, check, message, file, line, seconds, extra)


def as_json(failure: Failure) -> str:
    document: dict[str, Any] = {
        "verdict": failure.verdict, "file": failure.file, "mesh": {},
        "diagnostics": [{"check": failure.check, "severity": "error", "line": failure.line,
                         "message": failure.message, "hint": None, "counterexample": None}],
        "fixes": [], "stats": {"ops": 0, "seconds": round(failure.seconds, 4)}, "proven": []}
    document.update(failure.extra or {})
    return json.dumps(document, indent=2)


def as_sarif(failure: Failure) -> str:
    notification: dict[str, Any] = {"level": "error", "message": {"text": failure.message},
                                    "descriptor": {"id": f"verify-agent/{failure.check}"}}
    if failure.file:
        location: dict[str, Any] = {"artifactLocation": {"uri": failure.file}}
        if failure.line:
            location["region"] = {"startLine": failure.line}
        notification["locations"] = [{"physicalLocation": location}]
    sarif = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{"tool": {"driver": {"name": "verify-agent", "informationUri": TOOL_URI, "rules": []}},
                  "invocations": [{"executionSuccessful": False,
                                   "toolExecutionNotifications": [notification]}],
                  "results": []}],
    }
    return json.dumps(sarif, indent=2)


def as_github(failure: Failure) -> str:
    where = ",".join(part for part in (f"file={failure.file}" if failure.file else "",
                                       f"line={failure.line}" if failure.line else "") if part)
    text = failure.message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return f"::error {where + ',' if where else ''}title=verify-agent {failure.check}::{text}"


def render(failure: Failure, fmt: str) -> Optional[str]:
    """The document for ``fmt`` (json, sarif, github), or None for text (stderr says it all)."""
    return {"json": as_json, "sarif": as_sarif, "github": as_github}.get(fmt, lambda _: None)(failure)
