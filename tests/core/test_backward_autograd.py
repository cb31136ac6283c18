"""Generated VJPs against real autograd: torch differentiates the single-device program.

For each program with gradients, the IR's own backward program (evaluated with NumPy on a
mesh of size 1) must give the same gradients as ``torch.autograd`` applied to a direct torch
evaluation of the forward ops.  The equivalence check then carries correctness to the
parallel program; this test pins down the reference side.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from verifier.backward import BackwardUnsupported, gradient_program  # noqa: E402
from verifier.calls import expand_calls  # noqa: E402
from verifier.engine import Engine  # noqa: E402
from verifier.equivalence import random_inputs  # noqa: E402
from verifier.backends import NumpyBackend  # noqa: E402
from verifier.ir import Gradient  # noqa: E402
from verifier.shapes import instantiate, reduced_env  # noqa: E402
from verifier.text_format import parse_program  # noqa: E402
from verifier.wellformed import infer_shapes  # noqa: E402

pytestmark = pytest.mark.torch
ROOT = Path(__file__).parents[2] / "examples" / "ir"


def _dim(x, attrs, key="dim", default=0):
    return int(attrs.get(key, default))


def _scalar_pair(args, attrs):
    if len(args) == 2:
        return args
    c = attrs["scalar"]
    return (c, args[0]) if attrs.get("reverse") else (args[0], c)


def _unit(value):
    if isinstance(value, str):
        import re
        return int(eval(re.sub(r"\b\w+_size\b", "1", value), {"__builtins__": {}}))  # noqa: S307 - test-only
    return int(value)


TORCH_OPS = {
    "matmul": lambda a, k: torch.matmul(*a),
    "linear": lambda a, k: F.linear(*a),
    "add": lambda a, k: (lambda x, y: x + y)(*_scalar_pair(a, k)),
    "sub": lambda a, k: (lambda x, y: x - y)(*_scalar_pair(a, k)),
    "mul": lambda a, k: (lambda x, y: x * y)(*_scalar_pair(a, k)),
    "div": lambda a, k: (lambda x, y: x / y)(*_scalar_pair(a, k)),
    "neg": lambda a, k: -a[0],
    "exp": lambda a, k: torch.exp(a[0]),
    "log": lambda a, k: torch.log(a[0]),
    "tanh": lambda a, k: torch.tanh(a[0]),
    "sigmoid": lambda a, k: torch.sigmoid(a[0]),
    "relu": lambda a, k: F.relu(a[0]),
    "gelu": lambda a, k: F.gelu(a[0]),
    "gelu_tanh": lambda a, k: F.gelu(a[0], approximate="tanh"),
    "silu": lambda a, k: F.silu(a[0]),
    "softmax": lambda a, k: F.softmax(a[0], dim=_dim(a[0], k, default=-1)),
    "log_softmax": lambda a, k: F.log_softmax(a[0], dim=_dim(a[0], k, default=-1)),
    "layer_norm": lambda a, k: F.layer_norm(a[0], a[0].shape[-1:], *a[1:], eps=float(k.get("eps", 1e-5))),
    "rms_norm": lambda a, k: F.rms_norm(a[0], a[0].shape[-1:], *a[1:], eps=float(k.get("eps", 1e-6))),
    "sdpa": lambda a, k: F.scaled_dot_product_attention(*a, is_causal=bool(k.get("causal"))),
    "reshape": lambda a, k: a[0].reshape([_unit(d) for d in k["shape"]]),
    "transpose": lambda a, k: a[0].transpose(_dim(a[0], k, "dim0", -2), _dim(a[0], k, "dim1", -1)),
    "sum": lambda a, k: a[0].sum(dim=k.get("dim"), keepdim=bool(k.get("keepdim"))) if k.get("dim") is not None
    else a[0].sum(),
    "mean": lambda a, k: a[0].mean(dim=k.get("dim"), keepdim=bool(k.get("keepdim"))) if k.get("dim") is not None
    else a[0].mean(),
    "identity": lambda a, k: a[0],
    "all_reduce": lambda a, k: a[0],
    "all_gather": lambda a, k: a[0],
    "reduce_scatter": lambda a, k: a[0],
    "local_chunk": lambda a, k: a[0],
    "world_size": lambda a, k: torch.tensor(1.0, dtype=torch.float64),
}


def torch_gradients(program, inputs, cotangents):
    values = {name: torch.tensor(value, dtype=torch.float64, requires_grad=True) for name, value in inputs.items()}
    for op in program.ops:
        result = TORCH_OPS[op.kind]([values[a] for a in op.args], op.attrs)
        values[op.results[0]] = result
    loss = sum((values[out.name] * torch.tensor(cotangents[out.name])).sum() for out in program.outputs)
    loss.backward()
    return {g.input: values[g.input].grad.numpy() for g in program.gradients}


def ir_gradients(program, inputs, cotangents):
    shapes = infer_shapes(program).shapes
    joint = gradient_program(program, shapes)
    unit = program.mesh.unit()
    feed = dict(inputs)
    feed.update({f"dout_{name}": value for name, value in cotangents.items()})
    (env,) = Engine(joint, unit, NumpyBackend(), [feed]).run()
    return {g.input: env[f"grad_{g.input}"] for g in program.gradients}


def with_all_gradients(program):
    from dataclasses import replace

    return replace(program, backward_ops=(),
                   gradients=tuple(Gradient(spec.name, f"grad_{spec.name}") for spec in program.inputs
                                   if spec.dtype.startswith("f")))


CASES = sorted(p for p in ROOT.rglob("*.vir")
               if not {op for op in p.read_text().split()} & {"def", "embedding(", "call("})


def _supported(program) -> bool:
    return all(op.kind in TORCH_OPS for op in program.ops)


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.name)
def test_generated_gradients_match_torch_autograd(path):
    program = parse_program(path.read_text(), str(path))
    program = expand_calls(instantiate(program, reduced_env(program)))
    program = with_all_gradients(program)
    if not _supported(program):
        pytest.skip("uses an op this torch mirror does not cover")
    inputs = random_inputs(program, seed=3)
    shapes = infer_shapes(program).shapes
    rng = np.random.default_rng(4)
    cotangents = {out.name: rng.standard_normal(shapes[out.name]) for out in program.outputs}
    expected = torch_gradients(program, inputs, cotangents)
    try:
        got = ir_gradients(program, inputs, cotangents)
    except BackwardUnsupported as reason:
        pytest.skip(str(reason))
    for name, value in expected.items():
        assert np.allclose(got[name], value, rtol=1e-6, atol=1e-8), (name, got[name], value)


def test_attention_layernorm_and_cross_entropy_vjps_match_autograd():
    text = """
mesh tp=1
input x: f32[3, 4] {tp: R}
input g: f32[4] {tp: R}
input b: f32[4] {tp: R}
input wq: f32[4, 4] {tp: R}
n = layer_norm(x, g, b) at 1
q = matmul(n, wq) at 2
q3 = reshape(q, shape=[3, 2, 2]) at 3
qt = transpose(q3, dim0=0, dim1=1) at 4
c0 = sdpa(qt, qt, qt, causal=true) at 5
c = gelu_tanh(c0) at 5
s = log_softmax(c, dim=-1) at 6
r = rms_norm(s) at 7
output r {tp: R}
"""
    program = with_all_gradients(parse_program(text))
    inputs = random_inputs(program, seed=5)
    rng = np.random.default_rng(6)
    cotangents = {"r": rng.standard_normal((2, 3, 2))}
    expected = torch_gradients(program, inputs, cotangents)
    got = ir_gradients(program, inputs, cotangents)
    for name, value in expected.items():
        assert np.allclose(got[name], value, rtol=1e-5, atol=1e-7), name


def test_cross_entropy_gradient_matches_autograd():
    program = with_all_gradients(parse_program(
        "mesh tp=1\ninput z: f32[4, 5] {tp: R}\ninput t: i64[4] {tp: R} range(0, 5)\n"
        "l = cross_entropy(z, t) at 1\noutput l {tp: R}\n"))
    inputs = random_inputs(program, seed=7)
    values = {"z": torch.tensor(inputs["z"], requires_grad=True)}
    F.cross_entropy(values["z"], torch.tensor(inputs["t"])).backward()
    got = ir_gradients(program, inputs, {"l": np.array(1.0)})
    assert np.allclose(got["z"], values["z"].grad.numpy(), rtol=1e-6, atol=1e-9)
    assert math.isfinite(float(got["z"].sum()))
