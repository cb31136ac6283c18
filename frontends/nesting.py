"""How deeply a Python file nests, measured with the tokenizer before any parser sees it.

Parsers recurse: Python's ``ast`` raises RecursionError, libcst can crash the process on a
few thousand nested operators (``x + x + ... + x``, ``- - - x``).  The tokenizer does not
recurse, so it measures first: per bracket level, the operators since the last comma (a
long chain nests one level per operator; a long flat list does not), plus the bracket and
indentation depth.  A file over ``MAX_DEPTH`` is an input error, reported with its line.
"""
from __future__ import annotations

import io
import keyword
import tokenize

MAX_DEPTH = 200
_NOT_NESTING = {",", ":", ".", ";", "=", "->", "@", "(", ")", "[", "]", "{", "}"}
_OPENERS, _CLOSERS = "([{", ")]}"
_WORD_OPERATORS = {"and", "or", "not", "if", "else", "lambda", "in", "is", "await"}


def nesting_problem(text: str, max_depth: int = MAX_DEPTH) -> tuple[int, str] | None:
    """(line, message) when ``text`` nests deeper than ``max_depth``; None otherwise (or if it
    does not tokenize: the parser reports that better)."""
    chains = [0]  # operators since the last comma, per open bracket
    indent = 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            kind, value, line = token.type, token.string, token.start[0]
            if kind == tokenize.INDENT:
                indent += 1
            elif kind == tokenize.DEDENT:
                indent -= 1
            elif kind == tokenize.NEWLINE:
                chains = [0]
            elif kind == tokenize.OP and value in _OPENERS:
                chains.append(0)
            elif kind == tokenize.OP and value in _CLOSERS:
                if len(chains) > 1:
                    chains.pop()
            elif kind == tokenize.OP and value == ",":
                chains[-1] = 0
            elif (kind == tokenize.OP and value not in _NOT_NESTING) or (
                    kind == tokenize.NAME and value in _WORD_OPERATORS and keyword.iskeyword(value)):
                chains[-1] += 1
            depth = sum(chains) + len(chains) + indent
            if depth > max_depth:
                return line, (f"the code nests more than {max_depth} levels deep here (operators, brackets and "
                              f"blocks); verify-agent does not read code this deep — split the expression")
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    return None
