"""Re-record the LLM's harness for config_mlp.py after editing it or config_mlp_harness.py.

    python examples/llm/record_harness.py

Writes config_mlp_harness.py, as a model's answer, into llm-answers/ in the response cache format
(entry ParallelMLP), so `verify-agent translate examples/llm/config_mlp.py --entry ParallelMLP`
replays it offline: the harness is run by the tracer and the verdict is the traced run's.
"""
from __future__ import annotations

from pathlib import Path

from agent.cache import CachedAnswer, ResponseCache
from agent.harness_writer import harness_key

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "config_mlp.py"
HARNESS = HERE / "config_mlp_harness.py"
MODEL = "recorded-example"


def main() -> None:
    answer = "```python\n" + HARNESS.read_text(encoding="utf-8") + "```\n"
    key = harness_key(SOURCE.read_text(encoding="utf-8"), "ParallelMLP", MODEL, 1, [])
    ResponseCache(HERE / "llm-answers").put(key, CachedAnswer(answer, MODEL, 0, 0, "python"))
    print(f"recorded the {MODEL} harness for {SOURCE.name} in {HERE / 'llm-answers'}")


if __name__ == "__main__":
    main()
