"""Generated Llama-shaped tensor-parallel programs, for benchmarks and scale tests.

One layer: RMSNorm -> head-parallel attention (column-parallel q/k/v, row-parallel output
projection + all-reduce) -> residual -> RMSNorm -> SwiGLU MLP (column-parallel gate/up,
row-parallel down + all-reduce) -> residual.  Sizes are symbolic dims bound to the real
values, so the checker runs on reduced shapes.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StackShape:
    layers: int = 2
    tp: int = 8
    seq: int = 2048
    hidden: int = 4096
    head_dim: int = 128
    ffn: int = 14336


def llama_stack_vir(shape: StackShape, drop_allreduce_in_layer: int | None = None, backward: bool = False) -> str:
    """The program as .vir text; optionally without the MLP all-reduce of one layer (a seeded
    bug), and with ``backward`` the gradients of the input and every weight are checked too
    (Megatron's ``f`` before each column-parallel block makes the input gradient whole)."""
    lines = [f"# Llama-shaped stack: {shape.layers} layers, tp={shape.tp}, hidden {shape.hidden}",
             f"mesh tp={shape.tp}",
             f"dim S={shape.seq}, H={shape.hidden}, D={shape.head_dim}, F={shape.ffn}",
             "input x0: f32[S, H] {tp: R}"]
    line = 1
    for layer in range(shape.layers):
        p = f"l{layer}_"
        lines += [
            f"input {p}g1: f32[H] {{tp: R}}",
            f"input {p}wq: f32[H, H] {{tp: S(1)}}",
            f"input {p}wk: f32[H, H] {{tp: S(1)}}",
            f"input {p}wv: f32[H, H] {{tp: S(1)}}",
            f"input {p}wo: f32[H, H] {{tp: S(0)}}",
            f"input {p}g2: f32[H] {{tp: R}}",
            f"input {p}wg: f32[H, F] {{tp: S(1)}}",
            f"input {p}wu: f32[H, F] {{tp: S(1)}}",
            f"input {p}wd: f32[F, H] {{tp: S(0)}}",
        ]
    ops = []
    x = "x0"
    for layer in range(shape.layers):
        p = f"l{layer}_"
        body = [
            f"{p}n1 = rms_norm({x}, {p}g1)",
            f"{p}f1 = identity({p}n1, grad=all_reduce, mesh_dim=tp)",
            f"{p}q0 = matmul({p}f1, {p}wq)", f"{p}k0 = matmul({p}f1, {p}wk)", f"{p}v0 = matmul({p}f1, {p}wv)",
            f"{p}q1 = reshape({p}q0, shape=[S, H/tp_size/D, D])", f"{p}k1 = reshape({p}k0, shape=[S, H/tp_size/D, D])",
            f"{p}v1 = reshape({p}v0, shape=[S, H/tp_size/D, D])",
            f"{p}q = transpose({p}q1, dim0=0, dim1=1)", f"{p}k = transpose({p}k1, dim0=0, dim1=1)",
            f"{p}v = transpose({p}v1, dim0=0, dim1=1)",
            f"{p}c = sdpa({p}q, {p}k, {p}v, causal=true)",
            f"{p}c1 = transpose({p}c, dim0=0, dim1=1)", f"{p}c2 = reshape({p}c1, shape=[S, H/tp_size])",
            f"{p}o = matmul({p}c2, {p}wo)",
            f"{p}o_r = all_reduce({p}o, mesh_dim=tp, op=sum)",
            f"{p}h = add({x}, {p}o_r)",
            f"{p}n2 = rms_norm({p}h, {p}g2)",
            f"{p}f2 = identity({p}n2, grad=all_reduce, mesh_dim=tp)",
            f"{p}gate = matmul({p}f2, {p}wg)", f"{p}up = matmul({p}f2, {p}wu)",
            f"{p}act = silu({p}gate)", f"{p}m = mul({p}act, {p}up)",
            f"{p}d = matmul({p}m, {p}wd)",
        ]
        if layer == drop_allreduce_in_layer:
            body += [f"{p}out = add({p}h, {p}d)"]
        else:
            body += [f"{p}d_r = all_reduce({p}d, mesh_dim=tp, op=sum)", f"{p}out = add({p}h, {p}d_r)"]
        for statement in body:
            line += 1
            ops.append(f"{statement} at {line}")
        x = f"{p}out"
    gradients = []
    if backward:
        gradients = ["grad x0"] + [f"grad l{layer}_{w}" for layer in range(shape.layers)
                                   for w in ("g1", "wq", "wk", "wv", "wo", "g2", "wg", "wu", "wd")]
    return "\n".join(lines + ops + [f"output {x} {{tp: R}}"] + gradients) + "\n"
