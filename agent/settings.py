"""How the LLM path is configured: one frozen dataclass, filled from arguments, then the environment.

Environment: ``OPENAI_BASE_URL``, ``OPENAI_API_KEY``, ``VERIFY_AGENT_MODEL`` and
``VERIFY_AGENT_CACHE``.  Arguments win over the environment so a command line is
reproducible on its own.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace

MODES = ("auto", "full", "off")


@dataclass(frozen=True)
class LLMSettings:
    mode: str = "auto"  # auto: only what the frontend marked unsupported; full: the whole file; off: never
    base_url: str | None = None
    api_key: str | None = None
    model: str | None = None
    max_rounds: int = 3
    no_cache: bool = False
    cache_dir: str | None = None
    temperature: float = 0.0
    max_tokens: int = 4096  # per answer
    token_budget: int = 200_000  # prompt + answer tokens over all rounds
    structured: bool = True  # ask for json_schema output first (falls back to .vir text on a 400)
    request_timeout: float = 120.0  # seconds per HTTP request
    retry_attempts: int = 6
    retry_initial_wait: float = 1.0  # seconds; doubles per retry
    retry_max_wait: float = 30.0
    retry_deadline: float = 300.0  # total seconds spent on one request, retries included
    llm_deadline: float = 120.0  # total seconds for every request of one translation, retries included
    max_answer_bytes: int = 1_000_000  # a longer answer is not read: the model is asked to answer compactly
    execute: bool = True  # triage findings on LLM IR by running the source (needs torch)
    execution_timeout: float = 60.0

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.max_rounds < 1:
            raise ValueError("max_rounds must be at least 1")
        if not self.llm_deadline > 0:
            raise ValueError("llm_deadline must be a positive number of seconds")

    @classmethod
    def from_env(cls, **overrides) -> "LLMSettings":
        """Settings from keyword arguments, with unset endpoint/key/model/cache from the environment."""
        given = {k: v for k, v in overrides.items() if v is not None}
        settings = cls(**given)
        return replace(settings,
                       base_url=settings.base_url or os.environ.get("OPENAI_BASE_URL") or None,
                       api_key=settings.api_key or os.environ.get("OPENAI_API_KEY") or None,
                       model=settings.model or os.environ.get("VERIFY_AGENT_MODEL") or None,
                       cache_dir=settings.cache_dir or os.environ.get("VERIFY_AGENT_CACHE") or None)

    from_options = from_env  # the name the CLI pipeline uses

    @property
    def has_endpoint(self) -> bool:
        return bool(self.base_url)
