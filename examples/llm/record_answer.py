"""Re-record the LLM answer for tp_function_table.py after editing it or its .vir.

    python examples/llm/record_answer.py

Writes the answer (the .vir in the IR's JSON form) into llm-answers/ in the response cache
format, for both --llm auto and --llm full, so `verify-agent translate` replays it offline.
"""
from __future__ import annotations

import json
from pathlib import Path

import prompts
from agent.cache import CachedAnswer, CacheKey, ResponseCache, sha256
from agent.ir_json import program_to_json
from verifier.text_format import parse_program

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "tp_function_table.py"
MODEL = "recorded-example"


def main() -> None:
    source = SOURCE.read_text(encoding="utf-8")
    answer = json.dumps(program_to_json(parse_program(SOURCE.with_suffix(".vir").read_text(encoding="utf-8"))))
    cache = ResponseCache(HERE / "llm-answers")
    for mode in ("auto", "full"):
        key = CacheKey(sha256(source), prompts.PROMPT_VERSION, MODEL, mode, 1, sha256(""))
        cache.put(key, CachedAnswer(answer, MODEL, 0, 0, "json"))
    print(f"recorded {MODEL} answers for {SOURCE.name} in {HERE / 'llm-answers'}")


if __name__ == "__main__":
    main()
