"""Library files as they are: every distributed entry of a file, each built by a harness, one table.

``translate FILE`` without ``--entry`` on a file that is not a driver written for this tool finds
its distributed entries (modules and functions that communicate, directly or through the
package's own mappings; helpers are not entries), builds each one's constructor and call
arguments from defaults, type hints and config classes, and reports one row per entry; the exit
code is the worst verdict.  The package below is our own code, written in the style of
Megatron-like libraries (an ``mpu`` module, mappings as autograd Functions, layers using them);
the real libraries' files are checked where they are installed (marked ``realcode``).
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import warm_cli

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

REPO = Path(__file__).resolve().parents[2]
HAVE = {name: importlib.util.find_spec(name) is not None for name in ("fairscale", "megatron", "litgpt",
                                                                      "transformers")}

MPU = '''\
import torch.distributed as dist

_TP_GROUP = None


def initialize_model_parallel(tensor_parallel_size=1):
    global _TP_GROUP
    _TP_GROUP = dist.new_group(list(range(tensor_parallel_size)))


def model_parallel_is_initialized():
    return _TP_GROUP is not None


def destroy_model_parallel():
    global _TP_GROUP
    _TP_GROUP = None


def get_tp_group():
    return _TP_GROUP


def get_tp_world_size():
    return dist.get_world_size(group=_TP_GROUP)


def get_tp_rank():
    return dist.get_rank(group=_TP_GROUP)
'''

MAPPINGS = '''\
import torch
import torch.distributed as dist

from .mpu import get_tp_group


class _Reduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x = x.clone()
        dist.all_reduce(x, group=get_tp_group())
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad


class _Copy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        dist.all_reduce(grad, group=get_tp_group())
        return grad


def reduce_from_tp(x):
    return _Reduce.apply(x)


def copy_to_tp(x):
    return _Copy.apply(x)
'''

LAYERS = '''\
import torch

from . import mappings
from .mpu import get_tp_rank, get_tp_world_size


def _rows(full, dim):
    piece = full.shape[dim] // get_tp_world_size()
    return full.narrow(dim, get_tp_rank() * piece, piece).clone()


class ParallelMLP(torch.nn.Module):
    def __init__(self, hidden: int = 8, ffn: int = 16):
        super().__init__()
        generator = torch.Generator().manual_seed(0)
        self.w1 = torch.nn.Parameter(_rows(torch.randn(ffn, hidden, generator=generator), 0))
        self.w2 = torch.nn.Parameter(_rows(torch.randn(hidden, ffn, generator=generator), 1))

    def forward(self, x):
        x = mappings.copy_to_tp(x)
        h = torch.relu(x @ self.w1.t())
        return mappings.reduce_from_tp(h @ self.w2.t())


class ParallelMLPNoCopy(ParallelMLP):
    def forward(self, x):
        h = torch.relu(x @ self.w1.t())
        return mappings.reduce_from_tp(h @ self.w2.t())


def make_hook_factory(scale):
    def hook(x):
        return mappings.reduce_from_tp(x * scale)
    return hook


def _private(x):
    return mappings.reduce_from_tp(x)


def plain(x):
    return x * 2
'''
# the forward that lacks the copy: its first use of x (where the missing copy_to_tp belongs)
BUG_LINE = LAYERS.splitlines().index("class ParallelMLPNoCopy(ParallelMLP):") + 3


@pytest.fixture(scope="module")
def package(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("project")
    folder = root / "tinylib"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "mpu.py").write_text(MPU)
    (folder / "mappings.py").write_text(MAPPINGS)
    (folder / "layers.py").write_text(LAYERS)
    return root


def translate(target: str, *args: str) -> tuple[dict, int]:
    proc = warm_cli.run(["translate", target, *args, "--format", "json", "--timeout", "600"], cwd=REPO, timeout=900)
    try:
        return json.loads(proc.stdout), proc.returncode
    except json.JSONDecodeError:
        raise AssertionError(f"no JSON document (exit {proc.returncode}): {proc.stderr[-2000:]}")


def _rows(report: dict) -> dict:
    return {row["entry"]: row for row in report["entries"]}


def test_every_distributed_entry_of_a_package_file_gets_its_own_verdict(package):
    report, code = translate(str(package / "tinylib" / "layers.py"), "--mesh", "tp=2")
    rows = _rows(report)
    # helpers are not entries: a private function, a factory, a function that never communicates
    assert list(rows) == ["ParallelMLP", "ParallelMLPNoCopy"]
    assert rows["ParallelMLP"]["verdict"] == "verified", rows["ParallelMLP"]
    assert rows["ParallelMLPNoCopy"]["verdict"] == "violations", rows["ParallelMLPNoCopy"]
    assert rows["ParallelMLPNoCopy"]["line"] == BUG_LINE, rows["ParallelMLPNoCopy"]
    assert "reproduced by torch" in rows["ParallelMLPNoCopy"]["reason"]   # confirmed on real gloo ranks
    assert "copy_to_tp" in rows["ParallelMLP"]["found_because"] or "reduce_from_tp" in rows["ParallelMLP"][
        "found_because"]
    # the input was built from the constructor's own size (hidden=8), and said
    assert any("x=randn[4, 2, 8]" in a for a in rows["ParallelMLP"]["assumed"]), rows["ParallelMLP"]["assumed"]
    # the exit code is the worst verdict: a violation
    assert (report["verdict"], code) == ("violations", 1)


def test_the_package_mappings_are_entries_and_their_autograd_functions_are_not(package):
    from frontends.traced.found import Discovery
    from frontends.traced.runner import TraceOptions, discover_file

    found = discover_file(package / "tinylib" / "mappings.py", TraceOptions(timeout=120))
    assert isinstance(found, Discovery) and not found.conventions
    assert [(c.name, c.kind) for c in found.entries] == [("reduce_from_tp", "function"), ("copy_to_tp", "function")]
    assert "applies _Reduce" in found.entries[0].why


@pytest.mark.realcode
@pytest.mark.skipif(not HAVE["fairscale"] or not HAVE["megatron"], reason="fairscale and megatron-core needed")
def test_installed_library_files_list_their_entries_not_their_helpers():
    from frontends.traced.found import Discovery
    from frontends.traced.location import module_file
    from frontends.traced.runner import TraceOptions, discover_file

    fairscale = discover_file(module_file("fairscale.nn.model_parallel.mappings"), TraceOptions(timeout=200))
    assert isinstance(fairscale, Discovery)
    assert [c.name for c in fairscale.entries] == ["copy_to_model_parallel_region",
                                                   "reduce_from_model_parallel_region",
                                                   "scatter_to_model_parallel_region",
                                                   "gather_from_model_parallel_region"]
    mlp = discover_file(module_file("megatron.core.transformer.mlp"), TraceOptions(timeout=200))
    assert isinstance(mlp, Discovery)
    assert [c.name for c in mlp.entries] == ["MLP"]   # not apply_swiglu_sharded_factory


@pytest.mark.realcode
@pytest.mark.skipif(not HAVE["fairscale"], reason="fairscale needed")
def test_a_fairscale_layer_is_built_from_its_signature_and_verified():
    report, code = translate("fairscale.nn.model_parallel.layers", "--entry", "ColumnParallelLinear",
                             "--mesh", "tp=2")
    assert (report["verdict"], code) == ("verified", 0), [d["message"][:300] for d in report["diagnostics"]]
    said = " ".join(report["assumptions"])
    assert "harness built in_features=16; out_features=32; input_=randn[4, 2, 16]" in said
    assert "fairscale.nn.model_parallel.initialize.initialize_model_parallel" in said


def test_an_inference_mode_entry_runs_under_no_grad_and_the_json_says_why(tmp_path):
    path = tmp_path / "serve.py"
    path.write_text("import torch\nimport torch.distributed as dist\n\n\n@torch.inference_mode()\n"
                    "def mean_over_ranks(x: torch.Tensor) -> torch.Tensor:\n    y = x * 2\n"
                    "    dist.all_reduce(y)\n    return y / dist.get_world_size()\n")
    report, code = translate(str(path), "--mesh", "tp=2")   # its one distributed entry, found without --entry
    assert (report["verdict"], code) == ("verified", 0), [d["message"][:300] for d in report["diagnostics"]]
    assert any("@torch.inference_mode()" in a and "torch.no_grad()" in a for a in report["assumptions"])


# --- harness building, in-process (no user code runs: library classes only) ----------------------

@pytest.mark.realcode
@pytest.mark.skipif(not HAVE["megatron"], reason="megatron-core needed")
def test_megatron_core_configs_are_built_small_and_divisible_by_the_world():
    from megatron.core.tensor_parallel.layers import RowParallelLinear
    from megatron.core.transformer.mlp import MLP, MLPSubmodules
    from megatron.core.transformer.transformer_config import TransformerConfig

    from frontends.traced import configs, harness

    config, said = configs.build_config(TransformerConfig, 4)
    assert (config.hidden_size, config.num_attention_heads, config.num_layers, config.ffn_hidden_size) == (16, 4, 1, 32)
    assert config.tensor_model_parallel_size == 4 and config.hidden_dropout == 0.0
    assert said.startswith("TransformerConfig(tensor_model_parallel_size=4")
    harness.reset()
    built = harness.constructor_arguments(MLP, {}, 0, 2)
    assert isinstance(built["config"], TransformerConfig) and isinstance(built["submodules"], MLPSubmodules)
    assert built["submodules"].linear_fc1.__name__ == "ColumnParallelLinear"
    harness.reset()
    built = harness.constructor_arguments(RowParallelLinear, {}, 0, 2)
    # flags without defaults: bias on, nothing assumed already parallel
    assert (built["bias"], built["input_is_parallel"], built["skip_bias_add"]) == (True, False, False)
    assert (built["input_size"], built["output_size"]) == (16, 32)
    assert "init_method=torch.nn.init.xavier_normal_" in harness.built()[0]


@pytest.mark.realcode
@pytest.mark.skipif(not HAVE["litgpt"] or not HAVE["transformers"], reason="litgpt and transformers needed")
def test_litgpt_and_hf_configs_are_built_small():
    from litgpt import Config
    from transformers import LlamaConfig

    from frontends.traced import configs

    assert configs.is_config_class(Config) and configs.is_config_class(LlamaConfig)
    litgpt_config, _ = configs.build_config(Config, 2)
    assert (litgpt_config.n_embd, litgpt_config.n_head, litgpt_config.n_layer, litgpt_config.head_size) == (16, 4, 1, 4)
    llama, said = configs.build_config(LlamaConfig, 2)
    assert (llama.hidden_size, llama.num_attention_heads, llama.num_hidden_layers, llama.vocab_size) == (16, 4, 1, 64)
    assert said.startswith("LlamaConfig(")


def test_a_parameter_that_cannot_be_built_is_named_with_its_type_in_one_line():
    import inspect

    from frontends.traced import harness

    def all_to_all(x: torch.Tensor, scatter_idx, gather_idx: int, group=None):
        return x

    params = [p for p in inspect.signature(all_to_all).parameters.values() if p.name in ("x", "scatter_idx")]
    with pytest.raises(harness.Unbuildable) as raised:
        harness.call_arguments(all_to_all, None, params, 2)
    message = str(raised.value)
    assert message.startswith("cannot build parameter scatter_idx (no type hint)") and "\n" not in message
    assert "--arg scatter_idx=LITERAL" in message


def test_token_ids_stay_below_the_embedding_size_and_optional_tensors_are_none():
    import inspect
    from typing import Optional

    from frontends.traced import harness

    embedding = torch.nn.Embedding(24, 8)

    def forward(input_ids, attention_mask: Optional[torch.Tensor]):
        return input_ids

    params = list(inspect.signature(forward).parameters.values())
    harness.reset()
    (name, ids), (_, mask) = harness.call_arguments(forward, embedding, params, 2)
    assert ids.dtype == torch.int64 and int(ids.max()) < 24 and mask is None
    assert "input_ids=integers in [0, 24)" in harness.built()[0]


@pytest.mark.realcode
@pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None, reason="deepspeed needed")
def test_deepspeed_sequence_parallel_groups_are_set_up_on_the_simulated_world_and_torn_down():
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    import deepspeed.sequence.layer as layer
    from deepspeed.utils import groups
    from frontends.traced import package_state

    dist.init_process_group("fake", rank=1, world_size=4, store=FakeStore())
    try:
        said = package_state.set_up(layer, 4)
        assert (groups._get_sequence_parallel_world_size(), groups._get_sequence_parallel_rank()) == (4, 1)
        assert said and "sequence_parallel=4" in said[0]
        package_state.reset()
        assert groups.mesh_device is None and package_state.SET_UP == []
    finally:
        package_state.reset()
        dist.destroy_process_group()


def test_a_linear_functions_weight_flags_and_optional_bias_are_built_from_the_input():
    import inspect
    from typing import Optional

    from frontends.traced import harness

    def linear_with_allreduce(input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                              allreduce_dgrad: bool, sequence_parallel: bool, group=None):
        return input

    params = [p for p in inspect.signature(linear_with_allreduce).parameters.values()
              if p.default is inspect.Parameter.empty]
    harness.reset()
    built = dict(harness.call_arguments(linear_with_allreduce, None, params, 2))
    assert tuple(built["input"].shape) == (4, 2, 16) and tuple(built["weight"].shape) == (32, 16)
    assert built["bias"] is None and built["allreduce_dgrad"] is False and built["sequence_parallel"] is False


@pytest.mark.realcode
@pytest.mark.skipif(not HAVE["fairscale"], reason="fairscale needed")
def test_fairscales_in_place_reduce_of_its_input_runs_to_a_verdict_torch_confirms():
    """fairscale's reduce_from_model_parallel_region all-reduces its input in place and marks it dirty: the
    entry is handed an activation (it was 'a leaf Variable ... used in an in-place operation').  Given the
    same whole input on every rank, its output is the sum over the ranks, which real gloo ranks show too."""
    report, code = translate("fairscale.nn.model_parallel.mappings", "--entry", "reduce_from_model_parallel_region",
                             "--mesh", "tp=2")
    assert (report["verdict"], code) == ("violations", 1), [d["message"][:300] for d in report["diagnostics"]]
    assert report["confirmed_by_torch"]
    (error,) = [d for d in report["diagnostics"] if d["severity"] == "error"]
    assert error["message"].startswith("output 0 differs") and "all_reduce" in error["message"]
