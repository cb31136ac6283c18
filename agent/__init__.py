"""The LLM path: translate what the deterministic frontend cannot read, faithfully, in bounded rounds.

Entry points (what the CLI calls):

* ``llm_translate(source, path, base, settings, progress)`` -> ``LLMOutcome`` (final
  translation with per-op provenance, final report, tokens, rounds);
* ``LLMSettings.from_env(...)`` — arguments first, then ``OPENAI_BASE_URL``,
  ``OPENAI_API_KEY``, ``VERIFY_AGENT_MODEL``, ``VERIFY_AGENT_CACHE``;
* ``needs_llm_message(unsupported)`` — "these regions needed an LLM: line N: construct: reason";
* ``LLMError`` — the endpoint cannot be used (one-line message, exit code 2).

The feedback policy — what may be sent back to the model and what never is — is in
``agent/loop.py``.
"""
from .client import LLMError
from .ir_json import ir_schema, program_from_json, program_to_json
from .loop import LLMOutcome, llm_translate
from .regions import needs_llm_diagnostics, needs_llm_message
from .settings import LLMSettings

__all__ = ["LLMError", "LLMOutcome", "LLMSettings", "llm_translate", "needs_llm_message", "needs_llm_diagnostics",
           "ir_schema", "program_from_json", "program_to_json"]
