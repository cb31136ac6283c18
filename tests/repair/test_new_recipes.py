"""The repair space's recipes as text edits (no torch): what each proposes at a recorded line.

Each candidate is only text until it is traced, proven and confirmed on real ranks
(tests/repair/test_traced_fix_twins.py); here: the edit is proposed, in the file's idioms, at the line.
"""
from __future__ import annotations

from pathlib import Path

from frontends.patches.at_line import Site, candidates

CASES = Path(__file__).parent / "cases"


def _line(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def _candidates(name: str, site_of: str, op: str = ""):
    """Every candidate at the line of ``name`` holding ``site_of``, the run's op there being ``op``."""
    path = CASES / name
    text = path.read_text()
    return candidates(text, str(path), [Site(_line(text, site_of), op)], limit=100)


def test_plain_file_gets_the_region_pair_with_its_replicated_input_guarded():
    found = _candidates("tp_mlp_plain_missing_allreduce.py", "y = h @", "partial")
    region = [c for c in found if c.recipe == "reduce_region"]
    assert region, [c.description for c in found]
    patched = region[0].patched
    assert "class _ReduceFromRanks(torch.autograd.Function):" in patched
    assert "h = F.gelu(_CopyToRanks.apply(x) @ w_up.chunk(world, dim=1)[rank])" in patched
    assert "    y = _ReduceFromRanks.apply(y)\n    return y" in patched
    # the plain all-reduce is proposed too, and ranks first (cheapest spelling), then the pair
    assert [c.recipe for c in found[:2]] == ["reduce_after", "reduce_region"]


def test_file_with_its_own_reducing_function_gets_no_added_pair():
    found = _candidates("vocab_embedding_unmasked.py", "out = F.embedding", "embedding")
    assert not [c for c in found if c.recipe == "reduce_region"]


def test_unmasked_lookup_gets_a_mask_of_the_foreign_ids():
    found = _candidates("vocab_embedding_unmasked.py", "out = F.embedding", "clamp")
    (mask,) = [c for c in found if c.recipe == "mask_ids"]
    assert "foreign = (ids < start) | (ids >= start + local.shape[0])" in mask.patched
    assert "out = F.embedding(local_ids, local)" in mask.patched
    assert "out = out.masked_fill(foreign.unsqueeze(-1), 0.0)" in mask.patched
    assert mask.prior < 10


def test_off_by_one_range_check_is_flipped():
    path = Path(__file__).resolve().parents[2] / "examples" / "realworld" / "vocab_parallel_embedding_mask_off_by_one.py"
    text = path.read_text()
    found = candidates(text, str(path), [Site(_line(text, "F.embedding(masked_input"), "embedding")], limit=100)
    flips = [c for c in found if c.recipe == "mask_bounds"]
    assert any("(input_ids < self.vocab_start_index)" in c.patched for c in flips), [c.description for c in flips]


def test_reduce_op_and_dim_keywords_change_at_the_line(tmp_path):
    path = tmp_path / "m.py"
    text = ("import torch\nimport torch.distributed as dist\n\n\ndef f(x):\n"
            "    dist.all_reduce(x, op=dist.ReduceOp.MAX)\n    return torch.softmax(x, dim=0)\n")
    path.write_text(text)
    ops = {c.description for c in candidates(text, str(path), [Site(6, "all_reduce")], limit=100)
           if c.recipe == "change_op"}
    assert ops == {"`all_reduce` on line 6: op MAX -> SUM", "`all_reduce` on line 6: op MAX -> AVG",
                   "`all_reduce` on line 6: op MAX -> the default SUM"}
    dims = [c for c in candidates(text, str(path), [Site(7, "softmax")], limit=100) if c.recipe == "dim_keyword"]
    assert {"torch.softmax(x, dim=1)", "torch.softmax(x, dim=-1)"} <= {
        next(line.strip()[7:] for line in c.patched.splitlines() if "softmax" in line) for c in dims}


def test_value_passed_on_unmapped_gets_the_missing_partner_mapping(tmp_path):
    path = tmp_path / "m.py"
    text = ("from megatron.core import tensor_parallel\n\n\ndef forward(hidden):\n    x = hidden\n"
            "    out = x * 2\n    return tensor_parallel.gather_from_sequence_parallel_region(out)\n")
    path.write_text(text)
    wrapped = [c for c in candidates(text, str(path), [Site(6, "mul")], limit=100) if c.recipe == "wrap_mapping"]
    assert wrapped[0].description == ("`hidden` on line 5 passed through "
                                      "tensor_parallel.scatter_to_sequence_parallel_region")
    assert "    x = tensor_parallel.scatter_to_sequence_parallel_region(hidden)\n" in wrapped[0].patched


def test_seed_that_adds_the_rank_loses_the_rank_term():
    text = ("import os\nimport torch\n\nfor i in range(3):\n    torch.manual_seed(i + int(os.environ[\"RANK\"]))\n"
            "    x = torch.rand(4, 2)\n")
    found = [c for c in candidates(text, "launch.py", [Site(6, "rand")], limit=100) if c.recipe == "same_seed"]
    assert [c.patched for c in found] == [text.replace('i + int(os.environ["RANK"])', "i")]


def test_seed_without_the_rank_is_left_alone():
    text = "import torch\nimport torch.distributed as dist\n\ntorch.manual_seed(1234)\nx = torch.rand(4, 2)\n"
    assert not [c for c in candidates(text, "f.py", [Site(5, "rand")], limit=100) if c.recipe == "same_seed"]


def test_recipes_answering_the_culprit_op_come_first():
    """gloo's AVG all-reduce divides in the collective: the division named at the collective's line is
    answered by changing the op, before the layout edits of the line above it."""
    text = ("import torch.distributed as dist\n\n\ndef forward(x, w):\n"
            "    rank, world = dist.get_rank(), dist.get_world_size()\n"
            "    y = x.chunk(world, dim=1)[rank] @ w.chunk(world, dim=0)[rank]\n"
            "    dist.all_reduce(y, op=dist.ReduceOp.AVG)\n    return y\n")
    found = candidates(text, "f.py", [Site(7, "div"), Site(6, "chunk", guessed=True)], limit=100)
    assert found[0].recipe == "change_op" and "op=dist.ReduceOp.SUM" in found[0].patched
    assert {c.recipe for c in found[:3]} == {"change_op"}


def test_gather_buffer_without_a_collective_gets_the_all_gather_after_it():
    text = ("import torch\nimport torch.distributed as dist\n\n\ndef gather(t, world):\n"
            "    pieces = [torch.empty_like(t) for _ in range(world)]\n    return torch.cat(pieces, dim=1)\n")
    found = [c for c in candidates(text, "f.py", [Site(7, "cat")], limit=100) if c.recipe == "fill_gather_buffer"]
    assert found[0].patched == text.replace("range(world)]\n", "range(world)]\n    dist.all_gather(pieces, t)\n")
    assert "torch.distributed.nn.functional.all_gather(t)" in found[1].patched


def test_gather_buffer_a_collective_fills_is_left_alone():
    text = ("import torch\nimport torch.distributed as dist\n\n\ndef gather(t, world):\n"
            "    pieces = [torch.empty_like(t) for _ in range(world)]\n    dist.all_gather(pieces, t)\n"
            "    return torch.cat(pieces, dim=1)\n")
    assert not [c for c in candidates(text, "f.py", [Site(8, "cat")], limit=100) if c.recipe == "fill_gather_buffer"]


def test_norm_in_a_sequence_parallel_file_gets_its_parameters_marked():
    text = ("import torch\nfrom megatron.core import tensor_parallel\n\n\nclass Block(torch.nn.Module):\n"
            "    def __init__(self, config):\n        super().__init__()\n        self.norm = torch.nn.LayerNorm(8)\n\n"
            "    def forward(self, x):\n        return self.norm(tensor_parallel.scatter_to_sequence_parallel_region(x))\n")
    found = [c for c in candidates(text, "f.py", [Site(8, "", True)], limit=100) if c.recipe == "mark_sequence_parallel"]
    assert found[0].patched == text.replace(
        "LayerNorm(8)\n", 'LayerNorm(8)\n        for param in self.norm.parameters():\n'
                          '            setattr(param, "sequence_parallel", config.sequence_parallel)\n')


def test_norm_without_sequence_parallelism_is_left_alone():
    text = ("import torch\n\n\nclass Block(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.norm = torch.nn.LayerNorm(8)\n")
    assert not [c for c in candidates(text, "f.py", [Site(7, "", True)], limit=100)
                if c.recipe == "mark_sequence_parallel"]


def test_input_whose_gradient_differs_is_guarded_at_the_line():
    found = _candidates("dp_loss_plain_allreduce_grad_local.py", "err = x.chunk", "mm")
    assert not [c for c in found if c.recipe == "guard_input"]          # the run named no input
    path = CASES / "dp_loss_plain_allreduce_grad_local.py"
    text = path.read_text()
    site = Site(_line(text, "err = x.chunk"), "mm", gradient=True, input="w")
    (guard,) = [c for c in candidates(text, str(path), [site], limit=100) if c.recipe == "guard_input"]
    assert "    err = x.chunk(world, dim=0)[rank] @ _CopyToRanks.apply(w)\n" in guard.patched
    assert "class _CopyToRanks(torch.autograd.Function):" in guard.patched


def test_line_applying_a_function_to_its_own_result_is_a_communicating_line():
    from frontends.patches.at_line import communicating_lines

    path = CASES / "tp_mlp_copied_twice.py"
    text = path.read_text()
    line = _line(text, "CopyToRegion.apply(CopyToRegion.apply(x))")
    assert line in [site.line for site in communicating_lines(text, str(path))]
    once = text.replace("CopyToRegion.apply(CopyToRegion.apply(x))", "CopyToRegion.apply(x)")
    assert line not in [site.line for site in communicating_lines(once, str(path))]


def test_name_all_reduced_in_place_is_divided_after_the_collective():
    path = CASES / "dp_mean_loss_summed.py"
    text = path.read_text()
    found = candidates(text, str(path), [Site(_line(text, "dist.all_reduce(loss)"), "all_reduce")], limit=100)
    (divide,) = [c for c in found if c.recipe == "add_scaling"]
    assert "    dist.all_reduce(loss)\n    loss = loss / dist.get_world_size()\n    return loss\n" in divide.patched
