"""``--arg NAME=LITERAL``: a value for an entry's parameter, read with ``ast.literal_eval`` (never
evaluated).  No torch here: the command line checks its arguments before anything runs."""
from __future__ import annotations

import ast
from typing import Any


def parse_arg(text: str) -> tuple[str, Any]:
    """``causal=True`` -> ("causal", True); ``ValueError`` with a sentence for the user otherwise."""
    name, equals, literal = text.partition("=")
    if not equals or not name.strip().isidentifier():
        raise ValueError(f"--arg {text}: expected NAME=LITERAL, e.g. --arg dropout_p=0.0")
    try:
        return name.strip(), ast.literal_eval(literal.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as error:
        raise ValueError(f"--arg {text}: {literal.strip()!r} is not a Python literal (a number, string, "
                         f"True/False/None, or a tuple, list or dict of those)") from error
