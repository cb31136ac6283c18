"""The LLM writes harnesses, not proofs: a real OpenAI-compatible server on 127.0.0.1 answers with a
harness for an entry verify-agent cannot build (its constructor takes a config object nothing
describes); the tracer runs it in the sandbox and the verdict is the traced run of the user's code."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent.harness_source import read_answer
from openai_stub import completion
from verify_agent.cli import app

pytestmark = pytest.mark.torch
pytest.importorskip("torch")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "llm" / "config_mlp.py"
GOOD = """```python
import torch


def harness(module, world):
    config = module.MLPConfig(hidden=16, ffn=32)
    return module.ParallelMLP(config), (torch.randn(8, 16),)
```"""
RAISES = """```python
import torch


def harness(module, world):
    config = module.MLPConfig(16)
    return module.ParallelMLP(config), (torch.randn(8, 16),)
```"""
# its own class under the entry's name (the answer reader lets it through: the guard in the child, which
# compares the objects themselves, refuses it); it would drop the all-reduce
SWAPS = """```python
import torch


class ParallelMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(16, 32, bias=False)

    def forward(self, x):
        return self.up(x).sum(-1, keepdim=True)



def harness(module, world):
    return ParallelMLP(), (torch.randn(8, 16),)
```"""


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    target = tmp_path / "config_mlp.py"
    shutil.copyfile(EXAMPLE, target)   # no recorded answers beside it: the server is asked
    return target


def translate(path: Path, *extra: str):
    result = CliRunner().invoke(app, ["translate", str(path), "--entry", "ParallelMLP", "--mesh", "tp=2",
                                      "--format", "json", "--timeout", "240", *extra])
    return result, json.loads(result.stdout)


def with_server(stub, *extra: str) -> tuple[str, ...]:
    return ("--base-url", stub.url, "--model", "stub-model", *extra)


def test_without_an_endpoint_the_input_error_says_no_model_was_asked(model_file):
    result, document = translate(model_file)

    assert result.exit_code == 2
    assert document["verdict"] == "input-error"
    assert "config" in document["diagnostics"][0]["message"]
    assert document["llm_status"].startswith("LLM not consulted: no endpoint configured")


def test_a_good_harness_gives_the_traced_verdict_of_the_users_code(stub, model_file):
    stub.script = [completion(GOOD)]

    result, document = translate(model_file, *with_server(stub))

    assert result.exit_code == 0, result.output
    assert document["verdict"] == "verified"
    assert document["frontend"].startswith("traced")
    harness = document["llm_harness"]
    assert harness["outcome"] == "accepted" and harness["rounds"] == 1
    assert harness["verdict_from"] == "the traced run of your code with this harness"
    assert "accepted after 1 round" in document["llm_status"]
    assert "the verdict comes from the traced run of your code" in document["llm_status"]
    prompt = stub.user_messages(0)[0]
    assert "def __init__(self, config)" in prompt          # the entry's constructor
    assert "constructor parameter config" in prompt or "config" in prompt.split("could not build it")[1]
    assert "harness(module, world)" in prompt


def test_a_harness_is_cached_by_source_entry_and_model(stub, model_file):
    stub.script = [completion(GOOD)]
    translate(model_file, *with_server(stub))

    result, document = translate(model_file, *with_server(stub))   # the server has no more answers

    assert result.exit_code == 0, result.output
    assert len(stub.requests) == 1
    assert document["llm_harness"]["attempts"][0]["cached"] is True


def test_a_harness_that_raises_goes_back_to_the_model_with_its_error(stub, model_file):
    stub.script = [completion(RAISES), completion(GOOD)]

    result, document = translate(model_file, *with_server(stub))

    assert result.exit_code == 0, result.output
    assert document["verdict"] == "verified"
    attempts = document["llm_harness"]["attempts"]
    assert [a["outcome"] for a in attempts] == ["raised", "accepted"]
    assert "TypeError" in attempts[0]["message"] and "(harness line 5)" in attempts[0]["message"]
    feedback = stub.user_messages(1)[-1]
    assert "Your harness did not run" in feedback and "TypeError" in feedback
    assert len(stub.requests) == 2


def test_a_harness_that_swaps_in_its_own_class_is_refused(stub, model_file):
    stub.script = [completion(SWAPS), completion(GOOD)]

    result, document = translate(model_file, *with_server(stub))

    assert result.exit_code == 3, result.output
    assert document["verdict"] == "unsupported"
    assert document["llm_harness"]["outcome"] == "refused"
    messages = " ".join(d["message"] for d in document["diagnostics"])
    assert "defined in the harness" in messages and "is not an object of the file" in messages
    assert len(stub.requests) == 1   # a refusal is final: the model is not told how it was caught


def test_a_harness_that_monkeypatches_is_refused_before_it_runs(stub, model_file):
    patched = GOOD.replace("    config =", "    module.ParallelMLP.forward = lambda self, x: x\n    config =")
    stub.script = [completion(patched)]

    result, document = translate(model_file, *with_server(stub))

    assert result.exit_code == 3
    assert document["llm_harness"]["outcome"] == "refused"
    assert "assigns to module.ParallelMLP.forward" in document["llm_harness"]["attempts"][0]["message"]


def test_malformed_answers_end_inconclusive_with_a_whole_document(stub, model_file):
    stub.script = [completion("I cannot help with that."), completion("```python\ndef harness(module, world:\n```")]

    result, document = translate(model_file, *with_server(stub, "--max-rounds", "2"))

    assert result.exit_code == 3
    assert document["verdict"] == "unsupported"
    assert document["llm_harness"]["outcome"] == "malformed" and document["llm_harness"]["rounds"] == 2
    assert "LLM gave an invalid answer" in document["diagnostics"][0]["message"]
    assert {"file", "mesh", "diagnostics", "fixes", "stats"} <= set(document)
    assert "could not be used" in stub.user_messages(1)[-1]


def test_a_recorded_harness_runs_offline():
    result, document = translate(EXAMPLE)

    assert result.exit_code == 0, result.output
    assert document["verdict"] == "verified"
    assert document["llm_harness"]["attempts"][0]["cached"] is True
    assert document["llm_harness"]["model"] == "recorded-example"


def test_llm_off_never_asks_for_a_harness(stub, model_file):
    result, document = translate(model_file, *with_server(stub, "--llm", "off"))

    assert result.exit_code == 2
    assert stub.requests == []


def test_the_answer_reader_refuses_what_goes_past_building_arguments():
    assert read_answer(GOOD).refused is None and read_answer(GOOD).malformed is None
    assert "imports sys" in read_answer("```python\nimport sys\ndef harness(module, world):\n    pass\n```").refused
    assert "uses exec" in read_answer("```python\ndef harness(module, world):\n    exec('x')\n```").refused
    assert "reaches into __code__" in read_answer(
        "```python\ndef harness(module, world):\n    code = module.f.__code__\n```").refused
    assert read_answer("no code {").malformed.startswith("the harness does not parse")


def test_every_entry_table_offers_each_unbuildable_entry_to_the_model(stub, model_file):
    model_file.write_text(model_file.read_text() + SECOND_ENTRY)
    stub.script = [completion(GOOD), completion(GOOD.replace("ParallelMLP", "HalfMLP"))]

    result = CliRunner().invoke(app, ["translate", str(model_file), "--mesh", "tp=2", "--format", "json",
                                      "--timeout", "240", *with_server(stub)])
    document = json.loads(result.stdout)

    assert result.exit_code == 0, result.output
    assert [(row["entry"], row["verdict"]) for row in document["entries"]] == [("ParallelMLP", "verified"),
                                                                                ("HalfMLP", "verified")]
    for row in document["entries"]:
        assert row["assumed"][0].startswith("harness built by an LLM (accepted after 1 round(s))")
    assert document["llm_status"].startswith("ParallelMLP: LLM consulted (stub-model) to write a harness")
    assert "HalfMLP: LLM consulted" in document["llm_status"]


SECOND_ENTRY = """

class HalfMLP(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        world, rank = dist.get_world_size(), dist.get_rank()
        up = torch.randn(config.ffn, config.hidden)
        self.up = torch.nn.Parameter(up.chunk(world, 0)[rank].clone())

    def forward(self, x):
        x = _CopyToParallel.apply(x)
        return _ReduceFromParallel.apply(torch.relu(x @ self.up.t()).sum(-1, keepdim=True))
"""


HEADS = '''import torch
import torch.distributed as dist


class _Reduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x = x.clone()
        dist.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad


class Heads(torch.nn.Module):
    def __init__(self, heads=3, head_dim=4):
        super().__init__()
        world, rank = dist.get_world_size(), dist.get_rank()
        full = torch.randn(heads * head_dim, heads * head_dim)
        self.weight = torch.nn.Parameter(full.chunk(world, 1)[rank].clone())

    def forward(self, x):
        piece = x.chunk(dist.get_world_size(), -1)[dist.get_rank()]
        return _Reduce.apply(piece @ self.weight.t())
'''


def test_a_shape_error_on_inputs_the_tool_chose_is_given_to_the_model(stub, tmp_path):
    (tmp_path / "heads.py").write_text(HEADS)
    stub.script = [completion("```python\nimport torch\n\ndef harness(module, world):\n"
                              "    return module.Heads(heads=4, head_dim=4), (torch.randn(8, 16),)\n```")]

    result = CliRunner().invoke(app, ["translate", str(tmp_path / "heads.py"), "--entry", "Heads", "--mesh", "tp=2",
                                      "--format", "json", "--no-grad", "x", *with_server(stub)])
    document = json.loads(result.stdout)

    assert result.exit_code == 0, result.output
    assert document["verdict"] == "verified"
    assert "mat1 and mat2 shapes cannot be multiplied" in stub.user_messages(0)[0]
