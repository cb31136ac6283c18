"""The LLM path: translate what the deterministic frontend cannot read, faithfully, in bounded rounds.

Entry points (what the CLI calls):

* ``llm_translate(source, path, base, settings, progress)`` -> ``LLMOutcome`` (final
  translation with per-op provenance, final report, tokens, rounds);
* ``LLMSettings.from_env(...)`` — arguments first, then ``OPENAI_BASE_URL``,
  ``OPENAI_API_KEY``, ``VERIFY_AGENT_MODEL``, ``VERIFY_AGENT_CACHE``;
* ``needs_llm_message(unsupported)`` — "these regions needed an LLM: line N: construct: reason";
* ``has_cached_response(source, model, path)`` — whether an answer is cached or recorded
  next to the file (the LLM path then runs offline);
* ``LLMError`` — the LLM settings are incomplete (no endpoint, no model: exit code 2);
  its subclass ``LLMUnavailable`` — the endpoint failed or refused (exit code 3), and
  ``LLMInvalidAnswer`` — it answered with something that is not a chat completion (exit 3).

The feedback policy — what may be sent back to the model and what never is — is in
``agent/loop.py``.  Names are imported lazily: the execution workers import ``agent.worker``
and must not pay for the client, the verifier and the solver.
"""
from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "LLMError": "client", "LLMUnavailable": "client", "LLMInvalidAnswer": "client",
    "LLMOutcome": "loop", "llm_translate": "loop", "LLMSettings": "settings",
    "needs_llm_message": "regions", "needs_llm_diagnostics": "regions", "has_cached_response": "cache",
    "ir_schema": "ir_json", "program_from_json": "ir_json", "program_to_json": "ir_json",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value
