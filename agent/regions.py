"""What to tell the user when the frontend left regions unread and no LLM may read them."""
from __future__ import annotations

from collections.abc import Sequence

from frontends.base import Unsupported
from verifier.report import ERROR, Diagnostic

HINT = "set OPENAI_BASE_URL (or --base-url) and VERIFY_AGENT_MODEL (or --model) to let an LLM translate them"


def needs_llm_message(unsupported: Sequence[Unsupported]) -> str:
    """``these regions needed an LLM:`` followed by ``line N: construct: reason`` lines."""
    if not unsupported:
        return ""
    return "these regions needed an LLM:\n" + "\n".join(f"  {item}" for item in unsupported)


def needs_llm_diagnostics(unsupported: Sequence[Unsupported], why: str = HINT) -> list[Diagnostic]:
    """One ``unsupported`` diagnostic per region, each naming its line, with ``why`` as the hint."""
    return [Diagnostic("unsupported", ERROR, f"{item.construct}: {item.reason} (needs an LLM translation)",
                       item.line, hint=why) for item in unsupported]
