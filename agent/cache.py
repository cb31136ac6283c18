"""Response cache: a re-run of the same file costs nothing and gives the same answer.

Key: the source's SHA-256, the prompt version, the model, the mode (auto/full), the round,
and the SHA-256 of the feedback sent so far.  The frontend's partial output and the exact
prompt text are deliberately *not* in the key: a recorded answer stays usable when the
deterministic frontend improves, and it is re-checked (faithfulness, verification,
execution) on every use anyway, so a stale answer can cost a round but never a wrong verdict.

Layout: ``<dir>/<source sha[:16]>/<version>-<mode>-r<round>-<feedback sha[:12]>-<model>.json``,
one JSON file per answer.  The directory is ``VERIFY_AGENT_CACHE`` or ``.verify-agent-cache``
in the current directory; ``llm-answers/`` next to the source file is read as well (never
written), so recorded answers can ship with an example.  With no model configured
(offline), an answer recorded by any model is used.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

CACHE_ENV = "VERIFY_AGENT_CACHE"
DEFAULT_DIR = ".verify-agent-cache"
RECORDED_DIR = "llm-answers"  # next to a source file: answers shipped with it (read, never written)


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CacheKey:
    source_sha256: str
    prompt_version: str
    model: str | None  # None: any recorded model (offline replay)
    mode: str
    round: int
    feedback_sha256: str

    def file_name(self, model: str) -> str:
        slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model)[:80]
        return f"{self.prompt_version}-{self.mode}-r{self.round}-{self.feedback_sha256[:12]}-{slug}.json"

    def pattern(self) -> str:
        return f"{self.prompt_version}-{self.mode}-r{self.round}-{self.feedback_sha256[:12]}-*.json"


@dataclass(frozen=True)
class CachedAnswer:
    text: str
    model: str
    tokens_in: int
    tokens_out: int
    response_format: str  # "json" | "vir"


class ResponseCache:
    def __init__(self, directory: Path, read_also: tuple[Path, ...] = ()):
        self.directory = directory
        self.read_also = tuple(p for p in read_also if p.resolve() != directory.resolve())

    @classmethod
    def for_source(cls, source_path: str, directory: str | None = None) -> "ResponseCache":
        primary = Path(directory or os.environ.get(CACHE_ENV) or DEFAULT_DIR)
        beside = Path(source_path).resolve().parent / RECORDED_DIR
        return cls(primary, (beside,))

    def _folder(self, root: Path, key: CacheKey) -> Path:
        return root / key.source_sha256[:16]

    def get(self, key: CacheKey) -> CachedAnswer | None:
        for root in (self.directory, *self.read_also):
            folder = self._folder(root, key)
            if not folder.is_dir():
                continue
            candidates = ([folder / key.file_name(key.model)] if key.model else sorted(folder.glob(key.pattern())))
            for path in candidates:
                answer = self._read(path, key)
                if answer is not None:
                    return answer
        return None

    def _read(self, path: Path, key: CacheKey) -> CachedAnswer | None:
        try:
            body = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        stored = body.get("key", {})
        wanted = {k: v for k, v in asdict(key).items() if not (k == "model" and v is None)}
        if any(stored.get(k) != v for k, v in wanted.items()):
            return None
        try:
            return CachedAnswer(**body["answer"])
        except (KeyError, TypeError):
            return None

    def put(self, key: CacheKey, answer: CachedAnswer) -> None:
        folder = self._folder(self.directory, key)
        folder.mkdir(parents=True, exist_ok=True)
        body = {"key": {**asdict(key), "model": answer.model}, "answer": asdict(answer)}
        handle, temporary = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            json.dump(body, stream, indent=2)
            stream.write("\n")
        os.replace(temporary, folder / key.file_name(answer.model))


def has_cached_response(source: str, model: str | None = None, path: str | None = None,
                        cache_dir: str | None = None, mode: str | None = None) -> bool:
    """Whether a first-round answer for ``source`` is cached (or recorded next to ``path``),
    so the LLM path can run offline.  ``None`` for model or mode means any."""
    from prompts import PROMPT_VERSION

    cache = ResponseCache.for_source(path or ".", cache_dir)
    if path is None:
        cache = ResponseCache(cache.directory)
    empty = sha256("")
    return any(cache.get(CacheKey(sha256(source), PROMPT_VERSION, model, m, 1, empty)) is not None
               for m in ((mode,) if mode else ("auto", "full")))

