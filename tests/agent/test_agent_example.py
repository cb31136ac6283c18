"""examples/llm: a file only the LLM path can read, replayed offline from its recorded answer."""
from __future__ import annotations

import json

from agent import LLMSettings, llm_translate
from agent.execute import torch_available
from agent.ir_json import program_from_json
from agent_cases import EXAMPLE
from frontends.base import Translation, Unsupported
from verifier.text_format import parse_program

RECORDED = EXAMPLE.parent / "llm-answers"


def test_example_replays_offline_from_its_recorded_answer(tmp_path):
    base = Translation(None, "explicit", "forward", [Unsupported(27, "self.after(y)", "call through a function table")])
    settings = LLMSettings.from_env(cache_dir=str(tmp_path / "empty-cache"))  # no endpoint, no model
    assert settings.base_url is None

    outcome = llm_translate(EXAMPLE.read_text(), str(EXAMPLE), base, settings)

    assert outcome.verdict == "verified"
    assert outcome.cached_rounds == 1 and outcome.tokens_in == 0
    assert outcome.model == "recorded-example"
    assert outcome.translation.provenance == ["llm round 1"] * 6
    all_reduce = next(op for op in outcome.translation.program.ops if op.kind == "all_reduce")
    assert all_reduce.span.line == 27  # the call through the function table
    note = outcome.report.diagnostics[-1].message
    assert note.startswith("cross-checked by execution" if torch_available() else "the IR was proposed by an LLM")


def test_recorded_answers_match_the_example_ir():
    # re-record with: python examples/llm/record_answer.py
    expected = parse_program(EXAMPLE.with_suffix(".vir").read_text())
    files = sorted(RECORDED.glob("*/*.json"))
    assert {json.loads(f.read_text())["key"]["mode"] for f in files} == {"auto", "full"}
    for path in files:
        assert program_from_json(json.loads(path.read_text())["answer"]["text"]) == expected
