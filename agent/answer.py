"""Read the model's answer: JSON (structured output) or ``.vir`` text, into a ``Program``.

Models wrap answers in code fences or add a sentence around them even when told not to; we
accept the first JSON object or the first fenced/bare ``.vir`` program and report anything
else as a ``parse`` problem that names the place (``ops.3.args`` or ``line:col``).  Spans get
the user's file name; ``source`` is always the file being checked, whatever the model wrote.
"""
from __future__ import annotations

import json
import re
from dataclasses import replace

from pydantic import ValidationError

from verifier.ir import Program, Span
from verifier.text_format import ParseError, parse_program

from .ir_json import program_from_json
from .problems import PARSE, Problem

_FENCE = re.compile(r"```[A-Za-z]*\n(.*?)```", re.S)
_JSON_START = re.compile(r'\{\s*"')
MAX_PROBLEMS = 8


def _json_part(text: str) -> str | None:
    for block in [m.group(1) for m in _FENCE.finditer(text)] + [text]:
        stripped = block.strip()
        if stripped.startswith("{"):
            return stripped
        match = _JSON_START.search(stripped)  # prose around a JSON object: `{` then a quoted key
        end = stripped.rfind("}")
        if match and end > match.start():
            return stripped[match.start():end + 1]
    return None


def _vir_part(text: str) -> str:
    blocks = [m.group(1) for m in _FENCE.finditer(text)]
    return blocks[0] if blocks else text


def _attach(program: Program, path: str) -> Program:
    def span(old: Span) -> Span:
        return Span(old.line, path)

    def ops(items):
        return tuple(replace(o, span=span(o.span)) for o in items)

    return replace(program, source=path,
                   inputs=tuple(replace(s, span=span(s.span)) for s in program.inputs),
                   ops=ops(program.ops), backward_ops=ops(program.backward_ops),
                   outputs=tuple(replace(o, span=span(o.span)) for o in program.outputs),
                   gradients=tuple(replace(g, span=span(g.span)) for g in program.gradients),
                   functions={name: replace(f, ops=ops(f.ops)) for name, f in program.functions.items()})


def parse_answer(text: str, path: str) -> Program | list[Problem]:
    """The program in ``text``, or the problems that stop us from reading it."""
    if not text.strip():
        return [Problem(PARSE, "the answer was empty; answer with the complete IR")]
    candidate = _json_part(text)
    if candidate is not None:
        try:
            data = json.loads(candidate)
        except json.JSONDecodeError as exc:
            return [Problem(PARSE, f"the answer is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
                            answer_line=exc.lineno)]
        try:
            return _attach(program_from_json(data), path)
        except ValidationError as exc:
            return [Problem(PARSE, _validation_text(error, data)) for error in exc.errors()[:MAX_PROBLEMS]]
        except ValueError as exc:
            return [Problem(PARSE, f"the JSON does not describe an IR program: {exc}")]
    body = _vir_part(text)
    try:
        return _attach(parse_program(body, None), path)
    except ParseError as exc:
        lines = body.splitlines()
        quoted = lines[exc.line - 1].strip() if 1 <= exc.line <= len(lines) else ""
        return [Problem(PARSE, f"IR line {exc.line}, column {exc.col}: {exc.message}"
                               + (f" in `{quoted}`" if quoted else ""), answer_line=exc.line)]


def _validation_text(error: dict, data: object) -> str:
    location = ".".join(str(part) for part in error.get("loc", ()))
    message = error.get("msg", "invalid")
    context = ""
    loc = error.get("loc", ())
    if len(loc) >= 2 and loc[0] == "ops" and isinstance(loc[1], int) and isinstance(data, dict):
        ops = data.get("ops")
        if isinstance(ops, list) and loc[1] < len(ops):
            context = f" (op {json.dumps(ops[loc[1]])[:160]})"
    return f"JSON {location or '(top level)'}: {message}{context}"
