"""The torch-op table shared by every style: each spelling maps to one IR op with its attributes."""
from __future__ import annotations

import pytest
from frontend_support import complete, explicit, kinds, line_of, only, ops, translate


def program_of(body: str, inputs: str = "torch.randn(S, H), torch.randn(H, H)", params: str = "x, w"):
    """A file whose forward(params) returns ``body`` (one expression)."""
    return explicit(f"""
    S, H, V = 8, 16, 32

    def example_inputs():
        return ({inputs},)

    def forward({params}):
        return {body}
    """)


@pytest.mark.parametrize("expression, kind", [
    ("x @ w", "matmul"), ("torch.matmul(x, w)", "matmul"), ("x.mm(w)", "matmul"),
    ("F.linear(x, w)", "linear"), ("torch.exp(x)", "exp"), ("x.log()", "log"), ("torch.tanh(x)", "tanh"),
    ("torch.sigmoid(x)", "sigmoid"), ("x.sqrt()", "sqrt"), ("torch.rsqrt(x)", "rsqrt"), ("F.gelu(x)", "gelu"),
    ("F.gelu(x, approximate='tanh')", "gelu_tanh"), ("F.silu(x)", "silu"), ("F.relu(x)", "relu"), ("-x", "neg"), ("x.abs()", "abs"), ("x.clone()", "identity"),
    ("x.float().half()", "cast"),
])
def test_spelling_maps_to_ir_op(expression: str, kind: str):
    assert kinds(complete(program_of(expression)))[-1] == kind


@pytest.mark.parametrize("expression, kind, attrs", [
    ("x + 1", "add", {"scalar": 1}), ("x * 0.5", "mul", {"scalar": 0.5}),
    ("1 - x", "sub", {"scalar": 1, "reverse": True}),
    ("2.0 / x", "div", {"scalar": 2.0, "reverse": True}), ("x ** 2", "pow", {"scalar": 2}),
    ("x / H", "div", {"scalar": "H"}), ("x > 0", "gt", {"scalar": 0}), ("0 < x", "gt", {"scalar": 0}),
])
def test_scalar_operands_become_attributes(expression: str, kind: str, attrs: dict):
    op = only(complete(program_of(expression)), kind)
    assert op.attrs == attrs and len(op.args) == 1


@pytest.mark.parametrize("expression, kind, attrs", [
    ("torch.softmax(x, dim=-1)", "softmax", {"dim": -1}), ("F.log_softmax(x, 0)", "log_softmax", {"dim": 0}),
    ("x.sum(dim=-1, keepdim=True)", "sum", {"dim": 1, "keepdim": True}), ("x.mean()", "mean", {}),
    ("x.amax(dim=(0, 1))", "amax", {"dim": [0, 1]}), ("torch.max(x, dim=1)[0]", "amax", {"dim": 1}),
    ("x.transpose(0, 1)", "transpose", {"dim0": 0, "dim1": 1}), ("x.T", "transpose", {"dim0": 0, "dim1": 1}),
    ("x.permute(1, 0)", "permute", {"dims": [1, 0]}), ("x.view(-1)", "reshape", {"shape": [-1]}),
    ("x.reshape(S * H)", "reshape", {"shape": ["H*S"]}), ("x.unsqueeze(0)", "reshape", {"shape": [1, "S", "H"]}),
    ("x[:, :4]", "slice", {"dim": 1, "end": 4}), ("x[-2:]", "slice", {"dim": 0, "start": -2}),
    ("torch.cat([x, w], dim=0)", "cat", {"dim": 0}), ("x.to(torch.bfloat16)", "cast", {"dtype": "bf16"}),
    ("F.layer_norm(x, (H,), eps=1e-6)", "layer_norm", {"eps": 1e-6}),
    ("F.scaled_dot_product_attention(x, w, w, is_causal=True)", "sdpa", {"causal": True}),
    ("torch.zeros(S, H) + x", "zeros", {"shape": ["S", "H"], "dtype": "f32"}),
])
def test_op_attributes(expression: str, kind: str, attrs: dict):
    assert only(complete(program_of(expression)), kind).attrs == attrs


def test_chunk_unpacks_into_one_value_per_piece():
    source = explicit("""
    S, H = 8, 16

    def example_inputs():
        return (torch.randn(S, 3 * H),)

    def forward(x):
        q, k, v = x.chunk(3, dim=1)
        return q + k + v
    """)
    chunk = only(complete(source), "chunk")
    assert chunk.results == ("q", "k", "v") and chunk.attrs == {"chunks": 3, "dim": 1}


def test_split_with_sizes_is_split_with_those_sizes():
    op = only(complete(program_of("sum(torch.split(x, [4, 12], dim=1)[0:1])")), "split")
    assert op.attrs == {"sizes": [4, 12], "dim": 1}


def test_where_masked_fill_and_boolean_logic():
    source = program_of("torch.where((x > 0) & ~(w < 1), x, w).masked_fill(x == 0, -1.0)")
    assert kinds(complete(source)) == ["gt", "lt", "logical_not", "logical_and", "where", "eq", "masked_fill"]


def test_embedding_and_cross_entropy():
    source = program_of("F.cross_entropy(F.embedding(ids, table) @ out, labels, reduction='sum')",
                        inputs="torch.randint(0, V, (S,)), torch.randn(V, H), torch.randn(H, V), "
                               "torch.randint(0, V, (S,))", params="ids, table, out, labels")
    translation = complete(source)
    assert only(translation, "cross_entropy").attrs == {"reduction": "sum"}
    assert only(translation, "embedding").args == ("ids", "table")


def test_layer_norm_module_parameters_are_inputs_named_by_their_path():
    source = explicit("""
    S, H = 8, 16

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.LayerNorm(H)
            self.proj = torch.nn.Linear(H, H, bias=False)

        def forward(self, x):
            y = self.proj(self.norm(x))
            dist.all_reduce(y)
            return y

    def example_inputs():
        return (torch.randn(S, H),)
    """)
    translation = complete(source)
    assert [spec.name for spec in translation.program.inputs] == ["x", "norm.weight", "norm.bias", "proj.weight"]
    assert only(translation, "layer_norm").args == ("x", "norm.weight", "norm.bias")
    assert translation.program.inputs[1].span.line == line_of(source, "self.norm = ")


def test_each_op_carries_its_source_line():
    source = explicit("""
    S, H = 8, 16

    def example_inputs():
        return torch.randn(S, H), torch.randn(H, H)

    def forward(x, w):
        h = x @ w
        a = F.gelu(h)
        return a.sum(dim=0)
    """)
    translation = complete(source)
    assert [(op.kind, op.span.line) for op in ops(translation)] == [
        ("matmul", line_of(source, "h = x @ w")), ("gelu", line_of(source, "a = F.gelu")),
        ("sum", line_of(source, "return a.sum"))]


def test_values_are_named_after_the_variables_they_are_assigned_to():
    source = explicit("""
    def example_inputs():
        return torch.randn(4, 4), torch.randn(4, 4)

    def forward(x, w):
        h = x @ w
        h = torch.tanh(h)
        return h
    """)
    assert [op.results for op in ops(complete(source))] == [("h",), ("h_1",)]


def test_unknown_library_function_is_unsupported_at_its_line():
    source = program_of("torch.special.erfinv(x)")
    translation = translate(source)
    assert translation.program is None
    assert translation.unsupported[0].line == line_of(source, "erfinv")
    assert translation.unsupported[0].construct == "torch.special.erfinv"
