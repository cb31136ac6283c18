"""Source recipes: an IR change becomes the smallest edit of the file, in its own idioms."""
from __future__ import annotations

import pytest

from frontends.patches import CannotPatch, patch_source
from verifier.synthesis.edits import Change, Step
from verifier.text_format import parse_program

EXPLICIT = """import torch
import torch.distributed as dist


def forward(x, w):
    y = x @ w
    dist.all_reduce(y, op=dist.ReduceOp.MAX)
    return y
"""


def _ir(line_of_matmul: int, line_of_reduce: int):
    """The IR of EXPLICIT, with the lines its two ops come from."""
    return parse_program(f"""mesh tp=2
dim S=4, H=4
input x: f32[S, H] {{tp: S(1)}}
input w: f32[H, H] {{tp: S(0)}}
y = matmul(x, w) at {line_of_matmul}
z = all_reduce(y, mesh_dim=tp, op=max) at {line_of_reduce}
output z {{tp: R}}
""")


def test_changing_the_reduce_op_rewrites_only_the_op_name():
    program = _ir(6, 7)
    change = Change("change", 7, value="y", result="z", kind="all_reduce", old_kind="all_reduce", mesh_dim="tp",
                    attrs=(("mesh_dim", "tp"), ("op", "sum")), old_attrs=(("mesh_dim", "tp"), ("op", "max")))
    patch = patch_source(EXPLICIT, "m.py", "explicit", [(change, program)])
    assert patch.diff.count("\n-") == 1 and "+    dist.all_reduce(y, op=dist.ReduceOp.SUM)" in patch.diff


def test_removing_a_collective_deletes_its_line():
    program = _ir(6, 7)
    change = Change("remove", 7, value="y", result="z", kind="all_reduce", old_kind="all_reduce", mesh_dim="tp")
    patched = patch_source(EXPLICIT, "m.py", "explicit", [(change, program)]).patched
    assert patched == EXPLICIT.replace("    dist.all_reduce(y, op=dist.ReduceOp.MAX)\n", "")


def test_inserting_an_all_reduce_of_a_sub_expression_names_it_first():
    source = "import torch\nimport torch.distributed as dist\n\n\ndef forward(x, w):\n    return torch.tanh(x @ w)\n"
    program = parse_program("""mesh tp=2
input x: f32[4, 4] {tp: S(1)}
input w: f32[4, 4] {tp: S(0)}
t1 = matmul(x, w) at 6
t2 = tanh(t1) at 6
output t2 {tp: R}
""")
    change = Change("insert", 6, value="t1", kind="all_reduce", mesh_dim="tp", attrs=(("op", "sum"),),
                    steps=(Step("all_reduce", (("op", "sum"),)),), results=("t1_ar",))
    patched = patch_source(source, "m.py", "explicit", [(change, program)]).patched
    assert patched.endswith("    partial = x @ w\n    dist.all_reduce(partial)\n    return torch.tanh(partial)\n")


def test_megatron_all_reduce_becomes_the_mapping_function():
    source = ("import torch\nimport torch.nn.functional as F\n"
              "from megatron.core.tensor_parallel.mappings import copy_to_tensor_model_parallel_region\n\n\n"
              "def forward(x, w):\n    return F.silu(x @ w)\n")
    program = parse_program("""mesh tp=2
input x: f32[4, 4] {tp: S(1)}
input w: f32[4, 4] {tp: S(0)}
t1 = matmul(x, w) at 7
t2 = silu(t1) at 7
output t2 {tp: R}
""")
    change = Change("insert", 7, value="t1", kind="all_reduce", mesh_dim="tp", attrs=(("op", "sum"),),
                    steps=(Step("all_reduce", (("op", "sum"),)),), results=("t1_ar",))
    patched = patch_source(source, "m.py", "megatron", [(change, program)]).patched
    assert "import copy_to_tensor_model_parallel_region, reduce_from_tensor_model_parallel_region" in patched
    assert "return F.silu(reduce_from_tensor_model_parallel_region(x @ w))" in patched


def test_a_change_without_a_faithful_spelling_is_refused():
    program = _ir(6, 7)
    change = Change("change", 7, value="y", result="z", kind="reduce_scatter", old_kind="all_reduce",
                    mesh_dim="tp", attrs=(("dim", 0),))
    with pytest.raises(CannotPatch):
        patch_source(EXPLICIT, "m.py", "explicit", [(change, program)])
