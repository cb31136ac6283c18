"""--harness FILE.py: a harness builds the entry and its inputs in the sandboxed child and nothing more.
The guard compares objects, not names, and watches the recorded run for the harness's own code."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verify_agent.cli import app

pytestmark = pytest.mark.torch
pytest.importorskip("torch")

LAYER = '''import torch
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


class Layer(torch.nn.Module):
    def __init__(self, hidden, activation):
        super().__init__()
        world, rank = dist.get_world_size(), dist.get_rank()
        self.activation = activation
        self.weight = torch.nn.Parameter(torch.randn(hidden, hidden).chunk(world, 1)[rank].clone())

    def forward(self, x):
        piece = x.chunk(dist.get_world_size(), -1)[dist.get_rank()]
        return self.activation(_Reduce.apply(piece @ self.weight.t()))
'''


def run(tmp_path: Path, harness: str, layer: str = LAYER):
    (tmp_path / "layer.py").write_text(layer)
    (tmp_path / "harness.py").write_text(harness)
    result = CliRunner().invoke(app, ["translate", str(tmp_path / "layer.py"), "--entry", "Layer", "--mesh", "tp=2",
                                      "--harness", str(tmp_path / "harness.py"), "--format", "json",
                                      "--no-grad", "x"])
    return result, json.loads(result.stdout)


def messages(document) -> str:
    return " ".join(d["message"] for d in document["diagnostics"])


def test_a_harness_passing_a_torch_function_gives_the_traced_verdict(tmp_path):
    result, document = run(tmp_path, "import torch\n\ndef harness(module, world):\n"
                                     "    return module.Layer(8, torch.tanh), (torch.randn(4, 8),)\n")
    assert result.exit_code == 0, result.output
    assert document["verdict"] == "verified"
    assert "the harness you gave" in document["llm_status"]


def test_harness_code_running_inside_the_entry_is_refused(tmp_path):
    result, document = run(tmp_path, "import torch\n\ndef mine(x):\n    return x * 0\n\n"
                                     "def harness(module, world):\n"
                                     "    return module.Layer(8, mine), (torch.randn(4, 8),)\n")
    assert result.exit_code == 3
    assert document["harness_refused"].startswith("the harness's own code ran inside the recorded entry (mine")


def test_a_subclass_of_the_entry_is_refused(tmp_path):
    result, document = run(tmp_path, "import torch\n\ndef harness(module, world):\n"
                                     "    class Layer(module.Layer):\n"
                                     "        pass\n"
                                     "    return Layer(8, torch.tanh), (torch.randn(4, 8),)\n")
    assert result.exit_code == 3
    assert "is not an object of the file layer.py" in messages(document)


def test_a_method_hidden_on_the_instance_is_refused(tmp_path):
    result, document = run(tmp_path, "import torch\n\ndef harness(module, world):\n"
                                     "    layer = module.Layer(8, torch.tanh)\n"
                                     "    layer.forward = torch.nn.Identity().forward\n"
                                     "    return layer, (torch.randn(4, 8),)\n")
    assert result.exit_code == 3
    assert "hiding the method of Layer" in document["harness_refused"]


def test_a_harness_making_code_at_run_time_is_refused(tmp_path):
    result, document = run(tmp_path, "import torch\n\ndef harness(module, world):\n"
                                     "    made = {}\n"
                                     "    exec('def mine(x):\\n    return x * 0\\n', made)\n"
                                     "    return module.Layer(8, made['mine']), (torch.randn(4, 8),)\n")
    assert result.exit_code == 3
    assert document["harness_refused"].startswith("the harness makes code at run time (exec or compile at its "
                                                  "line 5)")


def test_a_violation_found_with_a_harness_is_confirmed_by_torch_with_it(tmp_path):
    missing = LAYER.replace("self.activation(_Reduce.apply(piece @ self.weight.t()))",
                            "self.activation(piece @ self.weight.t())")
    result, document = run(tmp_path, "import torch\n\ndef harness(module, world):\n"
                                     "    return module.Layer(8, torch.tanh), (torch.randn(4, 8),)\n", missing)
    assert result.exit_code == 1, result.output
    finding = next(d for d in document["diagnostics"] if d["check"] == "equivalence")
    assert finding["line"] == 26
    assert "reproduced by torch" in finding["message"]
