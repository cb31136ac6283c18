"""Time ``check_traced`` on generated recordings of tensor-parallel MLP stacks, forward and backward.

Each program is what the tracing frontend records for ``layers`` blocks of
``LayerNorm -> column-parallel Linear -> GELU -> row-parallel Linear -> all-reduce`` with a
residual, followed by the backward pass of ``sum(out * cotangent)``: the single-device run and
one op list per rank, parameters sliced at the top of each rank's list.

    python benchmarks/bench_traced_check.py            # the default table
    python benchmarks/bench_traced_check.py --hidden 64 --layers 2 --world 4
"""
from __future__ import annotations

import argparse
import time

from verifier.ir import Op, Span, TensorSpec
from verifier.traced_check import check_traced
from verifier.traced_ir import Comparison, TracedProgram


class _Ops:
    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.count = 0

    def __call__(self, kind: str, args: list[str], line: int, outputs: int = 1, **attrs) -> list[str]:
        names = [f"v{self.count + i}" for i in range(outputs)]
        self.count += outputs
        self.ops.append(Op(tuple(names), kind, tuple(args), attrs, Span(line, "model.py")))
        return names


def _record(world: int, rank: int | None, layers: int, batch: int, hidden: int, ffn: int) -> tuple[list[Op], dict]:
    """One run: ``rank=None`` is the single-device run.  Returns ops and the names to compare."""
    emit = _Ops()
    group = (0,) if rank is None else tuple(range(world))
    step = ffn if rank is None else ffn // world
    start = 0 if rank is None else rank * step
    params = {}
    for layer in range(layers):
        w1, w2 = f"l{layer}.fc1.weight", f"l{layer}.fc2.weight"
        if rank is None:
            params[w1], params[w2] = w1, w2
        else:
            params[w1] = emit("aten.slice.Tensor", [w1], 3, dim=0, start=start, end=start + step,
                              layout_source="shape")[0]
            params[w2] = emit("aten.slice.Tensor", [w2], 4, dim=1, start=start, end=start + step,
                              layout_source="shape")[0]
    x, saved = "x", []
    for layer in range(layers):
        base = 10 * (layer + 1)
        norm, mean, rstd = emit("aten.native_layer_norm.default", [x, f"l{layer}.ln.weight", f"l{layer}.ln.bias"],
                                base, 3, normalized_shape=[hidden], eps=1e-5)
        (w1t,) = emit("aten.t.default", [params[f"l{layer}.fc1.weight"]], base + 1)
        (h,) = emit("aten.mm.default", [norm, w1t], base + 1)
        (a,) = emit("aten.gelu.default", [h], base + 2)
        (w2t,) = emit("aten.t.default", [params[f"l{layer}.fc2.weight"]], base + 3)
        (y,) = emit("aten.mm.default", [a, w2t], base + 3)
        (y,) = emit("all_reduce", [y], base + 4, group=group, op="sum")
        (out,) = emit("aten.add.Tensor", [x, y], base + 5)
        saved.append((x, norm, mean, rstd, h, a))
        x = out
    grads = {}
    (grad,) = emit("aten.clone.default", ["cotangent"], 100)
    for layer in reversed(range(layers)):
        x_in, norm, mean, rstd, h, a = saved[layer]
        w1, w2 = params[f"l{layer}.fc1.weight"], params[f"l{layer}.fc2.weight"]
        (gt,) = emit("aten.t.default", [grad], 100)
        grads[f"l{layer}.fc2.weight"] = emit("aten.mm.default", [gt, a], 100)[0]
        (da,) = emit("aten.mm.default", [grad, w2], 100)
        (dh,) = emit("aten.gelu_backward.default", [da, h], 100)
        (dht,) = emit("aten.t.default", [dh], 100)
        grads[f"l{layer}.fc1.weight"] = emit("aten.mm.default", [dht, norm], 100)[0]
        (dnorm,) = emit("aten.mm.default", [dh, w1], 100)
        (dnorm,) = emit("all_reduce", [dnorm], 101, group=group, op="sum")
        dx, dw, db = emit("aten.native_layer_norm_backward.default",
                          [dnorm, x_in, mean, rstd, f"l{layer}.ln.weight", f"l{layer}.ln.bias"], 100, 3,
                          normalized_shape=[hidden], output_mask=[True, True, True])
        grads[f"l{layer}.ln.weight"], grads[f"l{layer}.ln.bias"] = dw, db
        (grad,) = emit("aten.add.Tensor", [grad, dx], 100)
    grads["x"] = grad
    return emit.ops, {"out": x, **grads}


def mlp_stack(world: int, layers: int, batch: int, hidden: int, ffn: int) -> TracedProgram:
    inputs = [TensorSpec("x", (batch, hidden), "f32"), TensorSpec("cotangent", (batch, hidden), "f32")]
    for layer in range(layers):
        inputs += [TensorSpec(f"l{layer}.ln.weight", (hidden,), "f32"), TensorSpec(f"l{layer}.ln.bias", (hidden,), "f32"),
                   TensorSpec(f"l{layer}.fc1.weight", (ffn, hidden), "f32"),
                   TensorSpec(f"l{layer}.fc2.weight", (hidden, ffn), "f32")]
    reference, ref_names = _record(world, None, layers, batch, hidden, ffn)
    ranks, rank_names = [], []
    for rank in range(world):
        ops, names = _record(world, rank, layers, batch, hidden, ffn)
        ranks.append(tuple(ops))
        rank_names.append(names)
    step = ffn // world
    comparisons = [Comparison("output 0", "output", ref_names["out"], tuple(n["out"] for n in rank_names),
                              (((0, batch), (0, hidden)),) * world)]
    for key in ref_names:
        if key == "out":
            continue
        if key.endswith("fc1.weight"):
            regions = tuple((((r * step, (r + 1) * step), (0, hidden))) for r in range(world))
        elif key.endswith("fc2.weight"):
            regions = tuple((((0, hidden), (r * step, (r + 1) * step))) for r in range(world))
        else:
            shape = (batch, hidden) if key == "x" else (hidden,)
            regions = (tuple((0, n) for n in shape),) * world
        comparisons.append(Comparison(f"gradient of {key}", "gradient", ref_names[key],
                                      tuple(n[key] for n in rank_names), regions))
    return TracedProgram(world, {"tp": world}, tuple(inputs), tuple(reference), tuple(ranks), tuple(comparisons),
                         ("fc1/fc2 weights sharded by shape",), ("forward", "backward"), "generated")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, nargs="*", default=[16, 64])
    parser.add_argument("--layers", type=int, nargs="*", default=[1, 2])
    parser.add_argument("--world", type=int, nargs="*", default=[2, 4])
    parser.add_argument("--batch", type=int, default=4)
    args = parser.parse_args()
    print(f"{'layers':>6} {'hidden':>6} {'ffn':>5} {'world':>5} {'ops':>6} {'seconds':>8}  verdict")
    for layers in args.layers:
        for hidden in args.hidden:
            for world in args.world:
                ffn = 2 * hidden
                traced = mlp_stack(world, layers, args.batch, hidden, ffn)
                started = time.perf_counter()
                report = check_traced(traced)
                seconds = time.perf_counter() - started
                print(f"{layers:>6} {hidden:>6} {ffn:>5} {world:>5} {report.ops:>6} {seconds:>8.2f}  {report.verdict}"
                      + ("" if report.verdict == "verified" else
                         "  " + "; ".join(d.message[:120] for d in report.diagnostics if d.severity == "error")))


if __name__ == "__main__":
    main()
