"""The LLM loop end to end against a real HTTP server on 127.0.0.1 speaking the OpenAI protocol."""
from __future__ import annotations

import pytest

from agent import LLMError, llm_translate
from agent.execute import torch_available
from agent_cases import (EXAMPLE, IR_LAUNDERED, IR_MISSING, IR_OK, IR_WRONG_LINES, ROW_MISSING, ROW_OK, as_json,
                         write)
from frontends.base import Translation, Unsupported
from openai_stub import completion, failure, reset, slow

# Words of a verification finding: none of them may ever reach the model as feedback.
VERDICT_WORDS = ("differs from the single-device", "partial sum", "never reduced", "violation", "counterexample",
                 "not equivalent", "placement")


def _unconfirmed(outcome) -> bool:
    """A proof on LLM-written IR that execution could not confirm is never a pass."""
    return any(d.check == "unsupported" and d.message.startswith("unconfirmed") for d in outcome.report.diagnostics)


def test_malformed_then_unfaithful_then_faithful_answer_is_verified(stub, settings_for, tmp_path):
    path = write(tmp_path, ROW_OK)
    stub.script = [completion('{"mesh": {"tp": 2}, "inputs": ['), completion(as_json(IR_WRONG_LINES)),
                   completion(as_json(IR_OK))]

    outcome = llm_translate(ROW_OK, path, None, settings_for(stub, mode="full"))

    assert outcome.verdict == "verified"
    assert outcome.rounds == 3 and len(stub.requests) == 3
    first = stub.requests[0]
    assert first["model"] == "stub-model"
    assert first["response_format"]["type"] == "json_schema"
    assert first["response_format"]["json_schema"]["schema"]["title"] == "verify-agent IR program"
    parse_feedback = stub.user_messages(1)[-1]
    assert "not valid JSON" in parse_feedback
    faithfulness_feedback = stub.user_messages(2)[-1]
    assert "claims an all_gather, but line 18 (`return y`) has no call that performs one" in faithfulness_feedback
    assert "claims an all_reduce, but line 16" in faithfulness_feedback
    assert "17 |     dist.all_reduce(y)" in faithfulness_feedback  # the cited source line, quoted
    assert outcome.tokens_in == 300 and outcome.tokens_out == 150


def test_provenance_names_the_round_that_first_proposed_each_op(stub, settings_for, tmp_path):
    path = write(tmp_path, ROW_OK)
    stub.script = [completion(as_json(IR_WRONG_LINES)), completion(as_json(IR_OK))]

    outcome = llm_translate(ROW_OK, path, None, settings_for(stub, mode="full", execute=False))

    kinds = [op.kind for op in outcome.translation.program.ops]
    provenance = dict(zip(kinds, outcome.translation.provenance))
    assert provenance["matmul"] == "llm round 1"  # unchanged since round 1
    assert provenance["all_reduce"] == "llm round 2"  # moved to line 17 in round 2
    assert outcome.report.extra["llm"]["provenance"] == {"llm round 1": 3, "llm round 2": 1}


def test_server_errors_rate_limits_timeouts_and_resets_are_retried(stub, settings_for, tmp_path):
    path = write(tmp_path, ROW_OK)
    stub.script = [failure(500, "internal error"), failure(429, "slow down", headers={"Retry-After": "0"}),
                   slow(as_json(IR_OK), seconds=1.0), reset(), completion(as_json(IR_OK))]

    outcome = llm_translate(ROW_OK, path, None, settings_for(stub, mode="full", execute=False, request_timeout=0.3))

    assert outcome.verdict == "unsupported" and _unconfirmed(outcome)  # execution off
    assert len(stub.requests) == 5
    assert outcome.rounds == 1


def test_retries_stop_with_one_line_error(stub, settings_for, tmp_path):
    path = write(tmp_path, ROW_OK)
    stub.script = [failure(503, "overloaded")] * 3

    with pytest.raises(LLMError) as error:
        llm_translate(ROW_OK, path, None, settings_for(stub, mode="full", retry_attempts=3))

    assert "kept failing (HTTP 503)" in str(error.value) and "\n" not in str(error.value)
    assert len(stub.requests) == 3


def test_model_that_never_becomes_faithful_stops_at_max_rounds_as_unsupported(stub, settings_for, tmp_path):
    path = write(tmp_path, ROW_OK)
    stub.script = [completion(as_json(IR_WRONG_LINES))] * 5

    outcome = llm_translate(ROW_OK, path, None, settings_for(stub, mode="full", max_rounds=2))

    assert outcome.verdict == "unsupported"
    assert len(stub.requests) == 2
    head = outcome.report.diagnostics[0]
    assert head.check == "unsupported" and "still not a faithful translation" in head.message
    assert outcome.translation.program is None


def test_real_bug_stays_a_violation_and_is_never_sent_back(stub, settings_for, tmp_path):
    path = write(tmp_path, ROW_MISSING)
    # The model first "repairs" the source (an all-reduce on the return line), then answers faithfully.
    stub.script = [completion(as_json(IR_LAUNDERED)), completion(as_json(IR_MISSING)), completion(as_json(IR_OK))]

    outcome = llm_translate(ROW_MISSING, path, None, settings_for(stub, mode="full", max_rounds=3))

    assert outcome.verdict == "violations"
    assert len(stub.requests) == 2  # the violation ended the loop: no third request
    feedback = stub.feedback_texts()
    assert len(feedback) == 1 and "claims an all_reduce, but line 17 (`return y`)" in feedback[0]
    for text in feedback:
        assert not any(word in text.lower() for word in VERDICT_WORDS)
    errors = [d for d in outcome.report.diagnostics if d.severity == "error"]
    assert errors and errors[0].line == 16
    expected = "confirmed by execution" if torch_available() else "unconfirmed"
    assert expected in errors[0].message


def test_faithful_answer_for_a_buggy_source_is_reported_after_one_request(stub, settings_for, tmp_path):
    path = write(tmp_path, ROW_MISSING)
    stub.script = [completion(as_json(IR_MISSING)), completion(as_json(IR_OK))]

    outcome = llm_translate(ROW_MISSING, path, None, settings_for(stub, mode="full", execute=False))

    assert outcome.verdict == "violations"
    assert len(stub.requests) == 1 and stub.feedback_texts() == []
    assert "unconfirmed" in outcome.report.diagnostics[0].message


@pytest.mark.skipif(not torch_available(), reason="needs torch to run the source")
def test_execution_sends_back_an_ir_the_source_contradicts(stub, settings_for):
    source = EXAMPLE.read_text()
    without_reduce = (EXAMPLE.with_suffix(".vir").read_text()
                      .replace("y = all_reduce(p, mesh_dim=tp, op=sum) at 27\noutput y", "output p"))
    stub.script = [completion(as_json(without_reduce)), completion(as_json(EXAMPLE.with_suffix(".vir").read_text()))]

    outcome = llm_translate(source, str(EXAMPLE), None, settings_for(stub, mode="full"))

    assert outcome.verdict == "verified"
    assert len(stub.requests) == 2
    (feedback,) = stub.feedback_texts()
    assert "gives the same result on 1 and on 2 ranks" in feedback
    assert "your IR computes p[" in feedback and "but the source computes" in feedback
    assert any(d.message.startswith("cross-checked by execution") for d in outcome.report.diagnostics)


def test_bad_key_is_a_one_line_error(stub, settings_for, tmp_path):
    stub.script = [failure(401, "Incorrect API key provided")]
    with pytest.raises(LLMError) as error:
        llm_translate(ROW_OK, write(tmp_path, ROW_OK), None, settings_for(stub, mode="full"))
    assert "401" in str(error.value) and "OPENAI_API_KEY" in str(error.value) and "\n" not in str(error.value)
    assert len(stub.requests) == 1


def test_unknown_model_is_a_one_line_error(stub, settings_for, tmp_path):
    stub.script = [failure(404, "The model `nope` does not exist")]
    with pytest.raises(LLMError) as error:
        llm_translate(ROW_OK, write(tmp_path, ROW_OK), None, settings_for(stub, mode="full", model="nope"))
    assert "model 'nope' not found" in str(error.value) and "\n" not in str(error.value)


def test_no_endpoint_is_a_one_line_error(settings_for, tmp_path, closed_port):
    settings = settings_for(None, mode="full", base_url=f"http://127.0.0.1:{closed_port}/v1")
    with pytest.raises(LLMError) as error:
        llm_translate(ROW_OK, write(tmp_path, ROW_OK), None, settings)
    assert "connection refused" in str(error.value) and "\n" not in str(error.value)


def test_cache_hit_makes_zero_requests(stub, settings_for, tmp_path):
    path = write(tmp_path, ROW_OK)
    stub.script = [completion(as_json(IR_OK))]
    settings = settings_for(stub, mode="full", execute=False)
    first = llm_translate(ROW_OK, path, None, settings)

    again = llm_translate(ROW_OK, path, None, settings)

    assert first.verdict == again.verdict == "unsupported"  # execution off: the proof on LLM IR is unconfirmed
    assert len(stub.requests) == 1
    assert again.cached_rounds == 1 and again.tokens_in == again.tokens_out == 0
    assert again.report.extra["llm"]["model"] == "stub-model"


def test_no_cache_asks_again(stub, settings_for, tmp_path):
    path = write(tmp_path, ROW_OK)
    stub.script = [completion(as_json(IR_OK)), completion(as_json(IR_OK))]
    llm_translate(ROW_OK, path, None, settings_for(stub, mode="full", execute=False))

    outcome = llm_translate(ROW_OK, path, None, settings_for(stub, mode="full", execute=False, no_cache=True))

    assert len(stub.requests) == 2 and outcome.cached_rounds == 0


def test_endpoint_without_structured_output_gets_vir_text(stub, settings_for, tmp_path):
    path = write(tmp_path, ROW_OK)
    stub.script = [failure(400, "response_format json_schema is not supported by this server"),
                   completion("Here is the IR:\n```vir\n" + IR_OK + "```\n")]

    outcome = llm_translate(ROW_OK, path, None, settings_for(stub, mode="full", execute=False))

    assert outcome.verdict == "unsupported" and _unconfirmed(outcome)  # execution off
    assert "response_format" in stub.requests[0] and "response_format" not in stub.requests[1]
    assert "```vir fenced block" in stub.requests[1]["messages"][0]["content"]


def test_auto_mode_sends_the_frontend_regions_and_keeps_its_collectives(stub, settings_for, tmp_path):
    path = write(tmp_path, ROW_OK)
    base = Translation(None, "explicit", "forward", [Unsupported(14, "x.chunk", "test: pretend unknown")])
    stub.script = [completion(as_json(IR_OK))]

    outcome = llm_translate(ROW_OK, path, base, settings_for(stub, execute=False))

    assert outcome.verdict == "unsupported" and _unconfirmed(outcome)  # execution off
    task = stub.user_messages(0)[0]
    assert "- line 14: x.chunk: test: pretend unknown" in task
    assert "17 |     dist.all_reduce(y)" in task
    assert outcome.translation.unsupported == []


def test_off_mode_never_calls_and_lists_the_regions(stub, settings_for, tmp_path):
    path = write(tmp_path, ROW_OK)
    base = Translation(None, "explicit", "forward", [Unsupported(27, "MyTPLinear", "unknown wrapper class")])

    outcome = llm_translate(ROW_OK, path, base, settings_for(stub, mode="off"))

    assert outcome.verdict == "unsupported" and stub.requests == []
    assert "these regions needed an LLM:\n  line 27: MyTPLinear: unknown wrapper class" == \
        outcome.report.extra["needs_llm"]
    assert outcome.report.diagnostics[0].line == 27


def test_auto_mode_without_endpoint_reports_the_regions(settings_for, tmp_path):
    path = write(tmp_path, ROW_OK)
    base = Translation(None, "explicit", "forward", [Unsupported(27, "MyTPLinear", "unknown wrapper class")])

    outcome = llm_translate(ROW_OK, path, base, settings_for(None))

    assert outcome.verdict == "unsupported" and not outcome.used_llm
    assert "OPENAI_BASE_URL" in outcome.report.diagnostics[0].hint


def test_full_mode_without_endpoint_is_an_error(settings_for, tmp_path):
    with pytest.raises(LLMError, match="--llm full needs an LLM endpoint"):
        llm_translate(ROW_OK, write(tmp_path, ROW_OK), None, settings_for(None, mode="full"))


# Passes every faithfulness check for ROW_MISSING (no collective is claimed) but leaves out the
# code's own slicing, so it verifies: only running the source shows it hides the real bug.
IR_HIDES_BUG = """mesh tp=2
dim N=4, D=8
input x: f32[N, D] {tp: R} at 12
input w: f32[D, D] {tp: R} at 12
y = matmul(x, w) at 16
output y {tp: R}
"""


@pytest.mark.skipif(not torch_available(), reason="needs torch to run the source")
def test_ir_that_hides_a_real_bug_is_caught_by_execution(stub, settings_for, tmp_path):
    path = write(tmp_path, ROW_MISSING)
    stub.script = [completion(as_json(IR_HIDES_BUG)), completion(as_json(IR_MISSING))]

    outcome = llm_translate(ROW_MISSING, path, None, settings_for(stub, mode="full"))

    assert outcome.verdict == "violations"
    (feedback,) = stub.feedback_texts()
    assert "gives a different result than on 1 rank" in feedback
    assert "your IR is equivalent to its single-device version" in feedback
    error = next(d for d in outcome.report.diagnostics if d.severity == "error")
    assert error.line == 16 and "confirmed by execution" in error.message


@pytest.mark.skipif(not torch_available(), reason="needs torch to run the source")
def test_ir_that_hides_a_real_bug_in_the_last_round_is_not_handed_out(stub, settings_for, tmp_path):
    path = write(tmp_path, ROW_MISSING)
    stub.script = [completion(as_json(IR_HIDES_BUG))]

    outcome = llm_translate(ROW_MISSING, path, None, settings_for(stub, mode="full", max_rounds=1))

    assert outcome.verdict == "violations"
    assert outcome.translation.program is None  # a re-check elsewhere cannot turn it into "verified"
    assert "confirmed by execution" in outcome.report.diagnostics[-1].message
