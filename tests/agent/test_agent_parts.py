"""The loop's parts on their own: reading answers, the cache, settings, running the source."""
from __future__ import annotations

import pytest

from agent import LLMSettings
from agent.answer import parse_answer
from agent.cache import CachedAnswer, CacheKey, ResponseCache
from agent.execute import run_source, torch_available
from agent.feedback import feedback_message
from agent.problems import FAITHFULNESS, Problem
from agent.source_facts import read_source
from agent.triage import CONFIRMED, Runner, triage_counterexample
from agent_cases import IR_MISSING, IR_OK, ROW_MISSING, ROW_OK, as_json
from verifier.text_format import parse_program


def test_answer_in_json_with_prose_and_fence_is_read():
    program = parse_answer("Sure! Here it is:\n```json\n" + as_json(IR_OK) + "\n```", "model.py")
    assert program == parse_program(IR_OK, "model.py").__class__(**{**parse_program(IR_OK, "model.py").__dict__,
                                                                     "source": "model.py"})


def test_answer_in_vir_text_is_read_with_the_users_file_name():
    program = parse_answer("```vir\n" + IR_OK + "```", "model.py")
    assert program.source == "model.py" and program.ops[0].span.file == "model.py"


def test_vir_parse_error_names_line_and_column_of_the_answer():
    (problem,) = parse_answer("mesh tp=2\ny = matmul(x w) at 3\n", "model.py")
    assert problem.kind == "parse" and problem.answer_line == 2
    assert problem.message.startswith("IR line 2, column 14: expected ',' or ')'")


def test_empty_answer_is_a_problem():
    (problem,) = parse_answer("  \n", "model.py")
    assert "empty" in problem.message


def test_feedback_quotes_the_cited_source_lines():
    facts = read_source(ROW_OK, "model.py")
    text = feedback_message([Problem(FAITHFULNESS, "something about the all-reduce", 17)], facts)
    assert "1. [faithfulness] line 17: something about the all-reduce" in text
    assert "17 |     dist.all_reduce(y)" in text


def test_feedback_refuses_anything_but_translation_problems():
    from verifier.report import Diagnostic
    with pytest.raises(TypeError):
        feedback_message([Diagnostic("equivalence", "error", "output y differs")], read_source(ROW_OK, "m.py"))


def test_cache_round_trip_and_any_model_lookup(tmp_path):
    cache = ResponseCache(tmp_path / "cache")
    key = CacheKey("ab" * 32, "v1", "model/a:1", "full", 1, "cd" * 32)
    cache.put(key, CachedAnswer("answer", "model/a:1", 10, 5, "json"))
    assert cache.get(key).text == "answer"
    assert cache.get(CacheKey("ab" * 32, "v1", None, "full", 1, "cd" * 32)).model == "model/a:1"
    assert cache.get(CacheKey("ab" * 32, "v1", "model/b", "full", 1, "cd" * 32)) is None
    assert cache.get(CacheKey("ab" * 32, "v2", "model/a:1", "full", 1, "cd" * 32)) is None


def test_settings_take_arguments_before_the_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    monkeypatch.setenv("VERIFY_AGENT_MODEL", "from-env")
    settings = LLMSettings.from_env(model="from-args", max_rounds=None)
    assert settings.base_url == "http://127.0.0.1:1/v1" and settings.model == "from-args"
    assert settings.max_rounds == 3
    with pytest.raises(ValueError):
        LLMSettings(mode="sometimes")


needs_torch = pytest.mark.skipif(not torch_available(), reason="needs torch to run the source")


@needs_torch
def test_source_runs_on_one_and_two_ranks(tmp_path):
    path = tmp_path / "model.py"
    path.write_text(ROW_MISSING)
    execution = run_source(ROW_MISSING, str(path), mesh=(("tp", 2),), timeout=30)
    assert execution.reference.ok and execution.parallel.ok
    assert execution.difference() is not None  # the missing all-reduce shows in real numbers


@needs_torch
def test_deadlocked_source_times_out(tmp_path):
    # Both ranks wait for the other to send first.
    source = ROW_OK.replace("    dist.all_reduce(y)\n", "    dist.recv(y, src=1 - rank)\n")
    path = tmp_path / "model.py"
    path.write_text(source)
    execution = run_source(source, str(path), mesh=(("tp", 2),), timeout=2)
    assert execution.parallel.timed_out
    assert "deadlock" in execution.parallel.failure()


@needs_torch
def test_counterexample_on_faithful_ir_of_buggy_source_is_confirmed(tmp_path):
    path = tmp_path / "model.py"
    path.write_text(ROW_MISSING)
    finding = triage_counterexample(parse_program(IR_MISSING), read_source(ROW_MISSING, str(path)),
                                    Runner(ROW_MISSING, str(path), "forward", 30))
    assert finding.status == CONFIRMED and finding.note.startswith("confirmed by execution")
