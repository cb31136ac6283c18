"""examples/llm: a file only the LLM path can read, replayed offline from its recorded answer."""
from __future__ import annotations

import json

from agent import LLMSettings, has_cached_response, llm_translate
from agent.execute import torch_available
from agent.ir_json import program_from_json
from agent_cases import EXAMPLE
from frontends import translate_source
from verifier.text_format import parse_program

RECORDED = EXAMPLE.parent / "llm-answers"


def test_deterministic_frontend_cannot_read_the_example():
    base = translate_source(EXAMPLE.read_text(), str(EXAMPLE))
    assert base.program is None and [item.line for item in base.unsupported] == [37]


def test_example_replays_offline_from_its_recorded_answer(tmp_path):
    base = translate_source(EXAMPLE.read_text(), str(EXAMPLE))
    settings = LLMSettings.from_env(cache_dir=str(tmp_path / "empty-cache"))  # no endpoint, no model
    assert settings.base_url is None

    outcome = llm_translate(EXAMPLE.read_text(), str(EXAMPLE), base, settings)

    assert outcome.verdict == "verified"
    assert outcome.cached_rounds == 1 and outcome.tokens_in == 0
    assert outcome.model == "recorded-example"
    assert outcome.translation.provenance == ["llm round 1"] * 6
    all_reduce = next(op for op in outcome.translation.program.ops if op.kind == "all_reduce")
    assert all_reduce.span.line == 27  # inside the helper the decorator registered
    note = outcome.report.diagnostics[-1].message
    assert note.startswith("cross-checked by execution" if torch_available() else "the IR was proposed by an LLM")


def test_recorded_answers_match_the_example_ir():
    # re-record with: python examples/llm/record_answer.py
    expected = parse_program(EXAMPLE.with_suffix(".vir").read_text())
    files = sorted(f for f in RECORDED.glob("*/*.json") if not f.name.startswith("harness-"))  # IR answers only
    assert {json.loads(f.read_text())["key"]["mode"] for f in files} == {"auto", "full"}
    for path in files:
        assert program_from_json(json.loads(path.read_text())["answer"]["text"]) == expected


def test_recorded_answer_is_found_next_to_the_example_only():
    source = EXAMPLE.read_text()
    assert has_cached_response(source, path=str(EXAMPLE))
    assert has_cached_response(source, model="recorded-example", path=str(EXAMPLE), mode="auto")
    assert not has_cached_response(source, model="another-model", path=str(EXAMPLE))
    assert not has_cached_response(source)  # the working cache (here: empty) alone


def test_outcome_note_says_what_the_llm_path_did(tmp_path):
    outcome = llm_translate(EXAMPLE.read_text(), str(EXAMPLE), translate_source(EXAMPLE.read_text(), str(EXAMPLE)),
                            LLMSettings.from_options(cache_dir=str(tmp_path), execute=False))
    # execution is off, so the proof on the recorded LLM IR is unconfirmed: not a pass
    assert outcome.note == ("LLM translation (recorded-example): unsupported after 1 round(s), 1 from the cache; "
                            "no tokens spent")

