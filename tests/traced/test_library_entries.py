"""Entries as libraries ship them, built by the harness instead of asked for.

- a custom ``torch.autograd.Function`` named by ``--entry`` runs through ``Cls.apply`` with its forward's
  parameters after ``ctx`` (calling the class only made a Function object: nothing ran, "unsupported");
- a module's input-size constructor parameter takes the given input's last dim (megatron-core's
  ``RowParallelLinear`` with ``--input input_=4x2x32`` was built 16 wide: "mat1 and mat2 shapes cannot be
  multiplied");
- a parallel style named by ``--entry`` (torch's ``ParallelStyle``, transformers' ``TensorParallelLayer``)
  is applied to a linear on the simulated mesh (the style object alone computes nothing);
- an integer target follows the given logits: their shape without the last dim, values below it;
- a ``DeviceMesh`` parameter left at None is given the simulated world's mesh;
- a function that parallelizes a module it is given (litgpt's ``tensor_parallel_linear``) is checked on that
  module, a Lightning ``Fabric`` given as a stand-in of the simulated world.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import warm_cli

pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[2]
CASE = str(Path(__file__).parent / "cases" / "e1_function_entry.py")


def translate(*args: str) -> tuple[int, dict]:
    run = warm_cli.run(["translate", *args, "--format", "json", "--timeout", "300"], cwd=REPO, timeout=600)
    return run.returncode, json.loads(run.stdout)


def _messages(body: dict) -> list[str]:
    return [d["message"] for d in body["diagnostics"]]


@pytest.mark.torch
def test_an_autograd_function_entry_runs_through_apply_and_is_verified():
    code, body = translate(CASE, "--entry", "_AverageOverRanks", "--input", "x=4x8")
    assert (code, body["verdict"]) == (0, "verified"), _messages(body)[:4]


@pytest.mark.torch
def test_an_autograd_function_entry_that_scales_by_the_world_is_a_violation():
    code, body = translate(CASE, "--entry", "_SumOverRanks", "--input", "x=4x8")
    assert (code, body["verdict"]) == (1, "violations"), _messages(body)[:4]
    # the all-reduce in forward (line 25) is where the ranks part from one device
    assert any(d["severity"] == "error" and d["line"] in (24, 25, 26) for d in body["diagnostics"]), \
        [(d["line"], d["message"][:80]) for d in body["diagnostics"]]


@pytest.mark.torch
@pytest.mark.realcode
def test_a_row_parallel_linear_is_built_as_wide_as_its_given_input():
    pytest.importorskip("megatron.core")
    code, body = translate("megatron.core.tensor_parallel.layers", "--entry", "RowParallelLinear",
                           "--input", "input_=4x2x32")
    assert (code, body["verdict"]) == (0, "verified"), _messages(body)[:4]
    assert any("input_size=32 (the given input's last dim)" in m for m in _messages(body))


_ROWWISE_ON_GLOO = """
import os, sys, torch, torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import RowwiseParallel, parallelize_module
rank, world = int(sys.argv[1]), int(sys.argv[2])
dist.init_process_group("gloo", rank=rank, world_size=world, init_method="file://" + sys.argv[3])
torch.manual_seed(0)
linear = torch.nn.Linear(16, 32)
x = torch.randn(4, 2, 16)
whole = linear(x).detach()
model = parallelize_module(linear, init_device_mesh("cpu", (world,)), RowwiseParallel())
out = model(x.chunk(world, dim=-1)[rank])   # each rank its block of the last dim, as input_layouts states
print(float((out - whole).abs().max()))
"""


@pytest.mark.torch
def test_a_torch_style_states_the_blocks_it_takes_by_its_own_layouts(tmp_path):
    # RowwiseParallel takes each rank's block of the input's last dim (its input_layouts): given the whole
    # input, its ranks raised in DTensor's sharding propagation ("unsupported"); gloo agrees with one device
    # when each rank is given its block
    script = tmp_path / "rowwise.py"
    script.write_text(_ROWWISE_ON_GLOO)
    ranks = [subprocess.Popen([sys.executable, str(script), str(r), "2", str(tmp_path / "store")],
                              stdout=subprocess.PIPE, text=True) for r in range(2)]
    assert all(float(p.communicate(timeout=300)[0]) < 1e-5 for p in ranks)
    code, body = translate("torch.distributed.tensor.parallel.style", "--entry", "RowwiseParallel")
    assert (code, body["verdict"]) == (0, "verified"), _messages(body)[:4]
    assert any("RowwiseParallel states input=Shard(-1)" in m for m in _messages(body))
    # the user's own statement wins over the style's
    code, body = translate("torch.distributed.tensor.parallel.style", "--entry", "RowwiseParallel",
                           "--expect", "input=Replicate")
    assert (code, body["verdict"]) == (3, "unsupported"), _messages(body)[:4]


def test_a_style_with_arguments_is_made_after_its_lines_were_watched():
    # the watcher of the lines that make styles once removed a __new__ it had set on ParallelStyle, and
    # afterwards ColwiseParallel(use_local_output=False) raised "object.__new__() takes exactly one argument"
    from torch.distributed.tensor.parallel import ColwiseParallel

    from frontends.traced.parameter_lines import ParameterLines
    from frontends.traced.spans import SpanFinder

    with ParameterLines().watching(SpanFinder(__file__, __file__)):
        inside = ColwiseParallel(use_local_output=False)
    assert not inside.use_local_output and not ColwiseParallel(use_local_output=False).use_local_output


@pytest.mark.torch
@pytest.mark.realcode
def test_a_transformers_style_entry_is_applied_to_a_linear_and_checked():
    pytest.importorskip("transformers")
    # ColwiseParallel(gather_output=True): the column-sharded linear's output gathered back (gloo: agrees)
    code, body = translate("transformers.integrations.tensor_parallel", "--entry",
                           "ColwiseParallel(gather_output=True)", "--input", "input=4x16")
    assert (code, body["verdict"]) == (0, "verified"), _messages(body)[:4]
    assert any("ColwiseParallel applied to nn.Linear(16, 32)" in m for m in _messages(body))


@pytest.mark.torch
@pytest.mark.realcode
def test_an_integer_target_follows_the_given_logits():
    # megatron-core's vocab_parallel_cross_entropy(vocab_parallel_logits, target): the target is built as
    # integers below the given logits' vocabulary, of their shape without it (it was [2, 4] below 16
    # against logits [4, 2, 16]: an input error)
    pytest.importorskip("megatron.core")
    code, body = translate("megatron.core.tensor_parallel.cross_entropy", "--entry", "vocab_parallel_cross_entropy",
                           "--input", "vocab_parallel_logits=4x2x16", "--expect", "vocab_parallel_logits=Shard(-1)")
    assert (code, body["verdict"]) == (0, "verified"), _messages(body)[:4]
    assert any("target=integers in [0, 16) of shape [4, 2]" in m for m in _messages(body))


@pytest.mark.torch
@pytest.mark.realcode
def test_a_mesh_left_at_none_is_the_simulated_worlds():
    # torchtitan's dist_sum_tensor(x, mesh=None) reduces nothing without a mesh ("nothing distributed was
    # checked"); given the world's mesh it sums x over the ranks, which one device does not (gloo: differs)
    pytest.importorskip("torchtitan")
    code, body = translate("torchtitan.distributed.utils", "--entry", "dist_sum_tensor", "--input", "x=4")
    assert (code, body["verdict"]) == (1, "violations"), _messages(body)[:4]
    assert any("mesh=a 1-D mesh tp=2" in m for m in _messages(body))
    assert any(d["severity"] == "error" and "all_reduce" in d["message"] for d in body["diagnostics"])


@pytest.mark.torch
@pytest.mark.realcode
def test_a_function_that_parallelizes_a_module_is_checked_on_that_module():
    # litgpt's tensor_parallel_linear(fabric, linear, style) shards the linear in place and returns None
    # (it was 'cannot build parameter fabric'); the linear it shards is traced.  Written for inference,
    # its column split leaves the input's gradient partial on each rank (gloo: differs)
    pytest.importorskip("litgpt")
    code, body = translate("litgpt.generate.tp", "--entry", "tensor_parallel_linear", "--input", "input=4x16",
                           "--expect", "out=Shard(-1)", "--arg", "style='colwise'")
    assert (code, body["verdict"]) == (1, "violations"), _messages(body)[:4]
    assert any("passed to tensor_parallel_linear" in m and "Fabric stand-in" in m for m in _messages(body))
    assert any(d["severity"] == "error" and "gradient of input" in d["message"] for d in body["diagnostics"])


@pytest.mark.torch
@pytest.mark.realcode
def test_a_rank_rejecting_values_the_harness_drew_is_not_a_violation():
    # DeepSpeed's vocab_parallel_cross_entropy with its tp_group left at None treats a rank's logits block
    # as the whole vocabulary and rejects the drawn targets above it: the arguments are the harness's, not
    # a bug (gloo, with the group and vocabulary range given: agrees); it was reported as a violation
    pytest.importorskip("deepspeed")
    code, body = translate("deepspeed.sequence.cross_entropy", "--entry", "vocab_parallel_cross_entropy",
                           "--input", "vocab_parallel_logits=4x16", "--expect", "vocab_parallel_logits=Shard(-1)")
    assert (code, body["verdict"]) == (3, "unsupported"), _messages(body)[:4]
    assert any("on values the harness drew for target" in m for m in _messages(body))
