"""Differential test: random SPMD programs, checker verdict vs independent numeric truth.

Each generated program is evaluated by ``independent.py`` (no shared code with the checker)
on every rank and on one rank, on random inputs.  The checker must never say ``verified``
when the numbers differ, and must not report violations when they agree.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import independent
from verifier.check import check_program
from verifier.ir import Mesh, Op, Output, Program, Span, TensorSpec
from verifier.placements import Partial, R, Shard

MESHES = [(("tp", 2),), (("tp", 3),), (("dp", 2), ("tp", 2))]
PLACEMENTS = [("R",), ("S", 0), ("S", 1), ("P",)]


def _ir_placement(p):
    return R if p[0] == "R" else Partial("sum") if p[0] == "P" else Shard(p[1])


@st.composite
def programs(draw):
    mesh = draw(st.sampled_from(MESHES))
    n = 12
    names = [name for name, _ in mesh]
    # Mostly the matmul shardings real code uses, sometimes anything.
    usual = st.sampled_from([(("R",), ("S", 1)), (("S", 1), ("S", 0)), (("S", 0), ("R",)), (("R",), ("R",)),
                             (("P",), ("R",))])
    pairs = [draw(st.one_of(usual, usual, usual, st.tuples(st.sampled_from(PLACEMENTS),
                                                          st.sampled_from(PLACEMENTS)))) for _ in mesh]
    x_pl = tuple(pair[0] for pair in pairs)
    w_pl = tuple(pair[1] for pair in pairs)
    ops = [("matmul", "v0", ("x", "w"), {})]
    count = draw(st.integers(1, 3))
    current = "v0"
    for k in range(1, count + 1):
        kind = draw(st.sampled_from(["neg", "gelu", "relu", "add", "mul", "transpose", "sum", "softmax",
                                     "all_reduce", "all_gather", "reduce_scatter", "local_chunk", "div_world"]))
        mesh_dim = draw(st.sampled_from(names))
        dim = draw(st.integers(0, 1))
        attrs = {}
        args = (current,)
        if kind == "add":
            args = (current, current)
        elif kind == "mul":
            attrs = {"scalar": 2.0}
        elif kind == "sum":
            attrs = {"dim": dim}
        elif kind in ("all_reduce", "reduce_scatter"):
            attrs = {"mesh_dim": mesh_dim, "op": draw(st.sampled_from(["sum", "max", "avg"]))}
            if kind == "reduce_scatter":
                attrs["dim"] = dim
        elif kind in ("all_gather", "local_chunk"):
            attrs = {"mesh_dim": mesh_dim, "dim": dim}
        elif kind == "div_world":
            attrs = {"mesh_dim": mesh_dim}
        result = f"v{k}"
        ops.append((kind, result, args, attrs))
        current = result
    out_pl = tuple(draw(st.sampled_from(PLACEMENTS)) for _ in mesh)
    if draw(st.booleans()):  # often expect what the placement rules infer, so "verified" cases occur
        inferred = _inferred(mesh, n, x_pl, w_pl, ops, current, out_pl)
        out_pl = inferred or out_pl
    return mesh, n, x_pl, w_pl, ops, current, out_pl


def _inferred(mesh, n, x_pl, w_pl, ops, out, out_pl):
    """The checker's inferred placement of the output: used only to steer generation."""
    from verifier.placement_check import propagate
    from verifier.wellformed import infer_shapes

    program = to_ir(mesh, n, x_pl, w_pl, ops, out, out_pl)
    shapes = infer_shapes(program)
    if shapes.diagnostics:
        return None
    placements = propagate(program, shapes.shapes).placements[out]
    found = []
    for p in placements:
        if isinstance(p, Shard):
            found.append(("S", p.dim))
        elif isinstance(p, Partial) and p.op == "sum":
            found.append(("P",))
        elif p == R:
            found.append(("R",))
        else:
            return None
    return tuple(found)


def to_ir(mesh, n, x_pl, w_pl, ops, out, out_pl) -> Program:
    ir_ops = []
    for line, (kind, result, args, attrs) in enumerate(ops, start=1):
        if kind == "div_world":
            ir_ops.append(Op((f"{result}_w",), "world_size", (), {"mesh_dim": attrs["mesh_dim"]}, Span(line)))
            ir_ops.append(Op((result,), "div", (args[0], f"{result}_w"), {}, Span(line)))
        elif kind == "transpose":
            ir_ops.append(Op((result,), "transpose", args, {"dim0": 0, "dim1": 1}, Span(line)))
        elif kind == "sum":
            ir_ops.append(Op((result,), "sum", args, {"dim": attrs["dim"], "keepdim": True}, Span(line)))
        else:
            ir_ops.append(Op((result,), kind, args, dict(attrs), Span(line)))
    inputs = (TensorSpec("x", (n, n), "f32", tuple(map(_ir_placement, x_pl))),
              TensorSpec("w", (n, n), "f32", tuple(map(_ir_placement, w_pl))))
    return Program(Mesh(mesh), inputs, tuple(ir_ops), (Output(out, tuple(map(_ir_placement, out_pl))),))


def numbers_differ(mesh, n, x_pl, w_pl, ops, out, out_pl, trials=4) -> bool | None:
    """True/False: the parallel numbers differ/agree with one rank; None: cannot run."""
    unit = [(name, 1) for name, _ in mesh]
    for seed in range(trials):
        rng = np.random.default_rng(seed)
        inputs = {"x": rng.standard_normal((n, n)), "w": rng.standard_normal((n, n))}
        placements = {"x": x_pl, "w": w_pl}
        try:
            parallel = independent.run(ops, inputs, placements, list(mesh))
            reference = independent.run(ops, inputs, {"x": (("R",),) * len(mesh), "w": (("R",),) * len(mesh)},
                                        unit)
            got = independent.reassemble(parallel, out, out_pl, list(mesh))
        except ValueError:
            return None
        want = next(iter(reference.values()))[out]
        if got is None or got.shape != want.shape or not np.allclose(got, want, rtol=1e-6, atol=1e-8):
            return True
    return False


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_checker_agrees_with_independent_execution(case):
    mesh, n, x_pl, w_pl, ops, out, out_pl = case
    truth = numbers_differ(*case)
    report = check_program(to_ir(*case))
    if report.verdict == "verified":
        assert truth is False, "verified, but the ranks' numbers differ from one rank"
    elif report.verdict == "violations" and truth is not None:
        structural = {d.check for d in report.diagnostics if d.severity == "error"} <= {"well-formed"}
        assert truth or structural, f"violation reported, but the numbers agree: {report.to_json()['diagnostics']}"


def test_unsupported_is_rare_on_generated_programs():
    """Inconclusive answers are honest but should stay the exception on this op set."""
    verdicts = []
    rng = np.random.default_rng(0)
    for _ in range(60):
        mesh = MESHES[rng.integers(len(MESHES))]
        x_pl = tuple(PLACEMENTS[rng.integers(4)] for _ in mesh)
        w_pl = tuple(PLACEMENTS[rng.integers(4)] for _ in mesh)
        ops = [("matmul", "v0", ("x", "w"), {}), ("gelu", "v1", ("v0",), {})]
        out_pl = tuple(PLACEMENTS[rng.integers(4)] for _ in mesh)
        verdicts.append(check_program(to_ir(mesh, 12, x_pl, w_pl, ops, "v1", out_pl)).verdict)
    assert verdicts.count("unsupported") <= 6, verdicts


GRADIENT_OPS = {"neg", "gelu", "relu", "add", "mul", "transpose", "sum", "softmax", "all_reduce", "all_gather",
                "reduce_scatter", "local_chunk", "div_world"}


def _differentiable(ops) -> bool:
    return all(kind == "matmul" or (kind in GRADIENT_OPS and attrs.get("op", "sum") in ("sum", "avg")
                                    and not (kind == "reduce_scatter" and attrs.get("op") == "avg"))
               for kind, _, _, attrs in ops)


def gradients_differ(mesh, n, x_pl, w_pl, ops, out, out_pl) -> bool | None:
    """Per-rank torch autograd (collectives with their duals) vs single-device autograd."""
    import independent_autograd

    rng = np.random.default_rng(11)
    inputs = {"x": rng.standard_normal((n, n)), "w": rng.standard_normal((n, n))}
    try:
        reference = independent.run(ops, inputs, {"x": (("R",),) * len(mesh), "w": (("R",),) * len(mesh)},
                                    [(name, 1) for name, _ in mesh])
        cotangent = rng.standard_normal(next(iter(reference.values()))[out].shape)
        got = independent_autograd.gradients(ops, inputs, {"x": x_pl, "w": w_pl}, list(mesh), out, out_pl, cotangent)
        want = independent_autograd.reference_gradients(ops, inputs, list(mesh), out, cotangent)
    except (ValueError, RuntimeError, NotImplementedError, IndexError):
        return None
    return any(got[k] is None or got[k].shape != want[k].shape or not np.allclose(got[k], want[k], rtol=1e-6, atol=1e-8)
               for k in want)


@pytest.mark.torch
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_gradient_verdicts_agree_with_per_rank_autograd(case):
    pytest.importorskip("torch")
    from dataclasses import replace

    from verifier.ir import Gradient

    mesh, n, x_pl, w_pl, ops, out, out_pl = case
    if not _differentiable(ops):
        return
    forward = numbers_differ(*case)
    backward = gradients_differ(*case)
    if forward is None or backward is None:
        return
    program = replace(to_ir(*case), gradients=(Gradient("x", "grad_x"), Gradient("w", "grad_w")))
    report = check_program(program)
    if report.verdict == "verified":
        assert not forward and not backward, "verified, but gradients (or values) differ from one rank"
    elif report.verdict == "violations":
        structural = {d.check for d in report.diagnostics if d.severity == "error"} <= {"well-formed"}
        assert forward or backward or structural, report.to_json()["diagnostics"]
