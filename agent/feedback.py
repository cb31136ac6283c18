"""The message that sends a rejected IR back to the model: problems plus the source lines they cite.

Only ``Problem``s can be rendered here (parse, structure, shape, faithfulness, execution) —
never a verification diagnostic.  The loop's policy (``agent/loop.py``) decides which
problems exist; this module only words them, quoting each cited line so the model does not
have to count lines again.
"""
from __future__ import annotations

from collections.abc import Sequence

import prompts

from .problems import KINDS, Problem
from .source_facts import SourceFacts

MAX_PROBLEMS = 20


def feedback_message(problems: Sequence[Problem], facts: SourceFacts) -> str:
    if not problems:
        raise ValueError("no problems to send back")
    for problem in problems:
        if not isinstance(problem, Problem) or problem.kind not in KINDS:
            raise TypeError("only translation problems may be sent back to the model")
    shown = list(problems)[:MAX_PROBLEMS]
    listed = "\n".join(f"{number}. {problem}" for number, problem in enumerate(shown, start=1))
    if len(problems) > len(shown):
        listed += f"\n... and {len(problems) - len(shown)} more of the same kinds"
    cited = sorted({p.source_line for p in shown if p.source_line is not None and facts.line_text(p.source_line)})
    quoted = ""
    if cited:
        width = len(str(cited[-1]))
        quoted = "\nThe source lines cited above:\n" + "\n".join(
            f"{line:>{width}} | {facts.line_text(line)}" for line in cited)
    return prompts.render("feedback", problems=listed, quoted=quoted).rstrip() + "\n"
