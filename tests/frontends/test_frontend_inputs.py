"""Reading the file: entry, example inputs, --input, --mesh, and the user errors they can raise."""
from __future__ import annotations

import pytest
from frontend_support import complete, explicit, input_spec, line_of, translate

from frontends.base import SourceError
from verifier.ir import Mesh

MLP = explicit("""
S, H = 8, 16

def example_inputs():
    return torch.randn(S, H), torch.randn(H, 4 * H)

def forward(x, w):
    rank, world = dist.get_rank(), dist.get_world_size()
    return x @ w.chunk(world, dim=1)[rank]
""")


def test_example_inputs_give_named_inputs_with_symbolic_sizes():
    program = complete(MLP).program
    assert [(spec.name, spec.shape) for spec in program.inputs] == [("x", ("S", "H")), ("w", ("H", "4*H"))]
    assert program.dims == {"H": 16, "S": 8}


EMBED = explicit("""
S, H, VOCAB = 8, 16, 32

def example_inputs():
    return torch.zeros(S, dtype=torch.long), torch.randn(VOCAB, H)

def forward(ids, table):
    rank, world = dist.get_rank(), dist.get_world_size()
    return F.embedding(ids, table.chunk(world, dim=1)[rank])
""")


def test_randint_inputs_are_integers_with_their_bounds():
    source = EMBED.replace("torch.zeros(S, dtype=torch.long)", "torch.randint(0, 100, (S,))")
    spec = input_spec(complete(source), "ids")
    assert (spec.dtype, spec.bounds) == ("i64", (0, 100))


def test_long_zeros_input_takes_the_vocabulary_bounds():
    spec = input_spec(complete(EMBED), "ids")
    assert (spec.dtype, spec.bounds) == ("i64", (0, "VOCAB"))


def test_input_option_overrides_the_example_shape():
    program = complete(MLP, inputs={"x": [4, 16]}).program
    assert program.inputs[0].shape == (4, 16)


def test_input_option_gives_shapes_when_there_is_no_example_inputs():
    source = MLP.replace("def example_inputs():\n    return torch.randn(S, H), torch.randn(H, 4 * H)\n", "")
    program = complete(source, inputs={"x": [4, 8], "w": [8, 32]}).program
    assert [spec.shape for spec in program.inputs] == [(4, 8), (8, 32)]


def test_mesh_option_sets_the_mesh():
    assert complete(MLP, mesh="tp=4").program.mesh == Mesh((("tp", 4),))


def test_mesh_defaults_to_tp_2():
    assert complete(MLP).program.mesh == Mesh((("tp", 2),))


def test_mesh_comes_from_init_device_mesh_in_the_file():
    source = MLP.replace("S, H = 8, 16", "S, H = 8, 16\nmesh = init_device_mesh('cuda', (4,), mesh_dim_names=('tp',))")
    source = source.replace("import torch\n",
                            "import torch\nfrom torch.distributed.device_mesh import init_device_mesh\n")
    assert complete(source).program.mesh == Mesh((("tp", 4),))


def test_mesh_comes_from_initialize_model_parallel_in_the_file():
    source = MLP.replace("import torch\n", "import torch\nfrom megatron.core import parallel_state\n")
    setup = "\n\ndef setup():\n    parallel_state.initialize_model_parallel(tensor_model_parallel_size=4)"
    source = source.replace("S, H = 8, 16", "S, H = 8, 16" + setup)
    assert complete(source, entry="forward").program.mesh == Mesh((("tp", 4),))


def test_entry_option_picks_the_function():
    source = MLP + "\n\ndef other(x, w):\n    return x @ w\n"
    assert complete(source, entry="other").entry == "other"


def test_the_one_module_class_no_other_class_uses_is_the_entry():
    source = explicit("""
    H = 16

    class Inner(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(H, H)

        def forward(self, x):
            y = self.lin(x)
            dist.all_reduce(y)
            return y

    class Outer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Inner()

        def forward(self, x):
            return self.inner(x) * 2

    def example_inputs():
        return (torch.randn(4, H),)
    """)
    translation = complete(source)
    assert translation.entry == "Outer" and translation.program.inputs[1].name == "inner.lin.weight"


@pytest.mark.parametrize("text, line, message", [
    ("def forward(x:\n    return x\n", 2, "syntax error"),
    ("import torch\n\ndef a(x):\n    return x\n\ndef b(x):\n    return x\n", None, "no entry found"),
])
def test_unreadable_file_is_a_source_error_naming_file_and_line(text: str, line: int | None, message: str):
    with pytest.raises(SourceError) as raised:
        translate(text, path="bad.py")
    assert (raised.value.file, raised.value.line) == ("bad.py", line) and message in raised.value.message
    assert str(raised.value).startswith("bad.py")


def test_unknown_entry_option_is_a_source_error():
    with pytest.raises(SourceError, match="--entry nope"):
        translate(MLP, path="m.py", entry="nope")


def test_missing_example_inputs_and_input_option_is_a_source_error_at_the_entry():
    source = MLP.replace("def example_inputs():\n    return torch.randn(S, H), torch.randn(H, 4 * H)\n", "")
    with pytest.raises(SourceError) as raised:
        translate(source, path="m.py")
    assert raised.value.line == line_of(source, "def forward(x, w)")
    assert "--input" in raised.value.message and "'x'" in raised.value.message


@pytest.mark.parametrize("mesh", ["tp", "tp=0", "tp=2,tp=2", "tp=two", "world=2"])
def test_bad_mesh_option_is_a_source_error(mesh: str):
    with pytest.raises(SourceError, match="bad --mesh"):
        translate(MLP, path="m.py", mesh=mesh)


def test_input_option_for_an_unknown_parameter_is_a_source_error():
    with pytest.raises(SourceError, match="--input y"):
        translate(MLP, path="m.py", inputs={"y": [4, 4]})


def test_example_inputs_of_the_wrong_count_is_a_source_error():
    source = MLP.replace("torch.randn(S, H), torch.randn(H, 4 * H)", "torch.randn(S, H),")
    with pytest.raises(SourceError, match="returns 1 tensors but the entry takes 2"):
        translate(source, path="m.py")
