"""The LLM writes harnesses, not proofs: when verify-agent cannot build an entry or its inputs on its own,
a model proposes a harness (``frontends/traced/harness_file.py``'s format), and the tracer runs it.

The loop: ask (prompt ``prompts/harness_v1.txt``: what a harness is, the simulated world, the entry's
signature, docstring and constructor, why building it failed, the file), read the answer's Python
(``harness_source``: parse, the forbidden constructs), hand it to ``run`` — the caller's traced run of
the user's file with that harness, in the sandboxed child — and:

- the harness raised, or returned something of the wrong shape, or the user's code raised on the
  arguments it built: that error (trimmed) goes back to the model, for at most ``max_rounds`` rounds;
- the harness was refused (it did more than build arguments: ``harness_guard``): final, never sent
  back (a model told how the guard caught it would learn to get around it);
- it ran: the traced run's verdict is the verdict.  The model decided how to build the arguments,
  nothing about the code.

Answers are cached like the translator's (``cache.py``) under the source's hash, the entry and the
model; answers recorded in ``llm-answers/`` next to a file are read too (offline runs).
"""
from __future__ import annotations

import ast
import os
import re
import tempfile
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import prompts

from .cache import CachedAnswer, CacheKey, ResponseCache, sha256
from .client import ChatClient, Completion
from .harness_source import read_answer
from .prompting import numbered
from .settings import LLMSettings

PROMPT_VERSION = "harness-v1"
MAX_SOURCE_CHARS = 60_000
MAX_ERROR_CHARS = 1_500
ACCEPTED, RAISED, REFUSED, MALFORMED = "accepted", "raised", "refused", "malformed"


@dataclass(frozen=True)
class HarnessRun:
    """What running the user's file with a harness gave: ``kind`` accepted | raised | refused."""

    kind: str
    message: str = ""
    result: Any = None       # the caller's traced result (its report when accepted)


@dataclass(frozen=True)
class HarnessAttempt:
    round: int
    outcome: str             # accepted | raised | refused | malformed
    message: str
    cached: bool


@dataclass
class HarnessOutcome:
    entry: str
    attempts: list[HarnessAttempt] = field(default_factory=list)
    harness: Optional[str] = None      # the harness that ran (accepted), or the refused one
    result: Any = None                 # the accepted (or last) run's traced result
    model: Optional[str] = None
    tokens_in: int = 0
    tokens_out: int = 0

    @property
    def rounds(self) -> int:
        return len(self.attempts)

    @property
    def final(self) -> str:
        return self.attempts[-1].outcome if self.attempts else MALFORMED

    def summary(self) -> dict:
        """The report's ``llm_harness`` entry (JSON)."""
        return {"asked": bool(self.attempts), "entry": self.entry, "model": self.model, "rounds": self.rounds,
                "outcome": self.final,
                "attempts": [{"round": a.round, "outcome": a.outcome, "message": a.message, "cached": a.cached}
                             for a in self.attempts],
                "harness": self.harness, "tokens": {"in": self.tokens_in, "out": self.tokens_out},
                "verdict_from": "the traced run of your code with this harness" if self.final == ACCEPTED
                else "no harness ran: nothing was verified with one"}

    def status_line(self) -> str:
        """One line for ``llm_status``: asked, rounds, what became of the harness, where the verdict is from."""
        rounds = f"{self.rounds} round{'s' if self.rounds != 1 else ''}"
        model = f" ({self.model})" if self.model else ""
        if self.final == ACCEPTED:
            return (f"LLM consulted{model} to write a harness for {self.entry}: accepted after {rounds}; it only "
                    f"built the arguments, the verdict comes from the traced run of your code")
        last = self.attempts[-1].message if self.attempts else "no answer"
        if self.final == REFUSED:
            return f"LLM consulted{model} to write a harness for {self.entry}: refused ({last}); nothing was verified"
        return (f"LLM consulted{model} to write a harness for {self.entry}: no harness ran in {rounds} "
                f"(last: {last}); nothing was verified")


def entry_facts(source: str, entry: Optional[str], failure: str) -> tuple[str, str]:
    """(the entry's name, its signature, docstring and constructor as text), read from the source's syntax
    tree (the user's code is never imported here)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return entry or "(see the failure)", ""
    defined = {node.name: node for node in tree.body if isinstance(node, (ast.ClassDef, ast.FunctionDef))}
    name = (entry or "").split("(")[0].strip() or None
    if name is None:
        named = [candidate for candidate in defined if re.search(rf"\b{re.escape(candidate)}\b", failure)]
        name = named[0] if named else None
    node = defined.get(name) if name else None
    if node is None:
        listed = ", ".join(defined) or "none"
        return name or "(the file's distributed entry)", f"Top-level classes and functions of the file: {listed}\n"
    lines = [f"Defined at line {node.lineno}:"]
    if isinstance(node, ast.ClassDef):
        bases = ", ".join(ast.unparse(base) for base in node.bases)
        lines.append(f"class {node.name}({bases})")
        doc = ast.get_docstring(node)
        if doc:
            lines.append(f'    """{doc.strip()[:800]}"""')
        for method in node.body:
            if isinstance(method, ast.FunctionDef) and method.name in ("__init__", "forward"):
                lines.append(f"    def {method.name}({ast.unparse(method.args)})  # line {method.lineno}")
                doc = ast.get_docstring(method)
                if doc:
                    lines.append(f'        """{doc.strip()[:800]}"""')
    else:
        lines.append(f"def {node.name}({ast.unparse(node.args)})")
        doc = ast.get_docstring(node)
        if doc:
            lines.append(f'    """{doc.strip()[:800]}"""')
    return name, "\n".join(lines) + "\n"


def harness_key(source: str, entry: str, model: Optional[str], round_number: int, feedback: list[str]) -> CacheKey:
    slug = re.sub(r"[^A-Za-z0-9_]+", "_", entry)[:60] or "entry"
    return CacheKey(sha256(source), PROMPT_VERSION, model, f"harness-{slug}", round_number,
                    sha256("\n\n".join(feedback)))


def has_recorded_harness(source: str, path: str, entry: str, cache_dir: Optional[str] = None) -> bool:
    """Whether a first-round harness for (source, entry) is cached or recorded next to ``path``."""
    cache = ResponseCache.for_source(path, cache_dir)
    return cache.get(harness_key(source, entry, None, 1, [])) is not None


def write_harness(source: str, path: str, entry: Optional[str], failure: str, settings: LLMSettings,
                  run: Callable[[str], HarnessRun], progress: Optional[Callable[[str], None]] = None
                  ) -> HarnessOutcome:
    """Ask for a harness until one runs, is refused, or ``settings.max_rounds`` are spent.  Raises
    ``LLMUnavailable`` / ``LLMInvalidAnswer`` (from the client) when the endpoint cannot be used."""
    say = progress or (lambda message: None)
    name, signature = entry_facts(source, entry, failure)
    outcome = HarnessOutcome(entry=name, model=settings.model)
    cache = ResponseCache.for_source(path, settings.cache_dir)
    text = source if len(source) <= MAX_SOURCE_CHARS else source[:MAX_SOURCE_CHARS] + "\n# ... (cut)"
    messages = [{"role": "user", "content": prompts.render(
        "harness", entry=name, path=os.path.basename(path), signature=signature, failure=_trim(failure),
        source=numbered(text))}]
    feedback: list[str] = []
    client: Optional[ChatClient] = None
    for round_number in range(1, settings.max_rounds + 1):
        if outcome.tokens_in + outcome.tokens_out >= settings.token_budget:
            break
        key = harness_key(source, name, outcome.model if round_number > 1 else settings.model, round_number,
                          feedback)
        cached = None if settings.no_cache else cache.get(key)
        if cached is not None:
            answer, from_cache = cached.text, True
            outcome.model = cached.model or outcome.model
        else:
            if not settings.has_endpoint:
                break
            client = client or ChatClient(settings)
            say(f"llm: asking {settings.model} for a harness of {name} (round {round_number})")
            completion: Completion = client.complete(messages)
            outcome.tokens_in += completion.tokens_in
            outcome.tokens_out += completion.tokens_out
            answer, from_cache = completion.text, False
            if not settings.no_cache and not completion.truncated:
                cache.put(key, CachedAnswer(answer, settings.model or "", completion.tokens_in,
                                            completion.tokens_out, "python"))
        messages.append({"role": "assistant", "content": answer})
        code = read_answer(answer)
        if code.malformed:
            outcome.attempts.append(HarnessAttempt(round_number, MALFORMED, code.malformed, from_cache))
            note = _feedback(f"Your answer could not be used: {code.malformed}.")
        elif code.refused:
            outcome.harness = code.code
            outcome.attempts.append(HarnessAttempt(round_number, REFUSED, code.refused, from_cache))
            return outcome
        else:
            say(f"llm: running {path} with the model's harness (round {round_number})")
            ran = _run_harness(code.code, run)
            outcome.result = ran.result
            outcome.attempts.append(HarnessAttempt(round_number, ran.kind, _trim(ran.message), from_cache))
            if ran.kind in (ACCEPTED, REFUSED):
                outcome.harness = code.code
                return outcome
            note = _feedback(f"Your harness did not run: {_trim(ran.message)}")
        feedback.append(note)
        messages.append({"role": "user", "content": note})
    return outcome


def _run_harness(code: str, run: Callable[[str], HarnessRun]) -> HarnessRun:
    with tempfile.TemporaryDirectory(prefix="verify-agent-harness-") as folder:
        harness_path = os.path.join(folder, "llm_harness.py")
        with open(harness_path, "w", encoding="utf-8") as handle:
            handle.write(code)
        return run(harness_path)


def _feedback(problem: str) -> str:
    return (f"{problem}\nAnswer with the complete corrected harness, one ```python block defining "
            f"harness(module, world).")


def _trim(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= MAX_ERROR_CHARS else text[:MAX_ERROR_CHARS] + " ..."
