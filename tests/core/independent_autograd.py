"""Per-rank backward ground truth with real torch autograd (independent of ``verifier/``).

Every rank's local program is built with torch ops on leaf tensors (its input pieces);
collectives are autograd functions across the ranks' tensors whose backward is the dual the
IR specifies (all_reduce -> identity, all_gather -> reduce_scatter, reduce_scatter ->
all_gather).  Each rank backpropagates the global cotangent of the output (its piece, for a
sharded output); the gradients of the inputs are then compared with torch autograd of the
single-device program.
"""
from __future__ import annotations

import torch

from independent import group_of, local_piece, ranks, reassemble


def _members(coords, mesh, mesh_dim):
    return group_of(coords, mesh, mesh_dim)


class _Collective(torch.autograd.Function):
    """forward/backward over the tensors of one group, given as numpy-free callables."""

    @staticmethod
    def forward(ctx, forward, backward, *tensors):
        ctx.backward_fn = backward
        return tuple(forward(list(tensors)))

    @staticmethod
    def backward(ctx, *grads):
        return (None, None, *ctx.backward_fn(list(grads)))


def apply_collective(kind, attrs, tensors):
    n = len(tensors)
    if kind == "reduce_scatter" and tensors[0].shape[attrs["dim"]] % n:
        raise ValueError("uneven reduce_scatter")
    if kind == "all_reduce":
        if attrs["op"] not in ("sum", "avg"):
            raise NotImplementedError(attrs["op"])
        scale = 1.0 if attrs["op"] == "sum" else 1.0 / n

        def forward(ts):
            total = sum(ts) * scale
            return [total.clone() for _ in ts]

        def backward(gs):  # identity (Megatron's g); avg also scales
            return [g * scale for g in gs]
    elif kind == "all_gather":
        dim = attrs["dim"]

        def forward(ts):
            whole = torch.cat(ts, dim=dim)
            return [whole.clone() for _ in ts]

        def backward(gs):  # reduce_scatter(sum)
            total = sum(gs)
            return list(torch.chunk(total, n, dim=dim))
    elif kind == "reduce_scatter":
        dim = attrs["dim"]
        if attrs["op"] != "sum":
            raise NotImplementedError(attrs["op"])

        def forward(ts):
            return [piece.clone() for piece in torch.chunk(sum(ts), n, dim=dim)]

        def backward(gs):  # all_gather
            whole = torch.cat(gs, dim=dim)
            return [whole.clone() for _ in gs]
    else:
        raise NotImplementedError(kind)
    return _Collective.apply(forward, backward, *tensors)


def _gelu(x):
    return torch.nn.functional.gelu(x)


LOCAL = {
    "matmul": lambda a, v, k, c, m: a[0] @ a[1],
    "add": lambda a, v, k, c, m: a[0] + a[1],
    "mul": lambda a, v, k, c, m: a[0] * k["scalar"],
    "neg": lambda a, v, k, c, m: -a[0],
    "gelu": lambda a, v, k, c, m: _gelu(a[0]),
    "relu": lambda a, v, k, c, m: torch.relu(a[0]),
    "tanh": lambda a, v, k, c, m: torch.tanh(a[0]),
    "exp": lambda a, v, k, c, m: torch.exp(a[0]),
    "transpose": lambda a, v, k, c, m: a[0].T,
    "sum": lambda a, v, k, c, m: a[0].sum(dim=k["dim"], keepdim=True),
    "softmax": lambda a, v, k, c, m: torch.softmax(a[0], dim=-1),
    "div_world": lambda a, v, k, c, m: a[0] / dict(m)[k["mesh_dim"]],
}


def _local_chunk(a, attrs, coords, mesh):
    if a.shape[attrs["dim"]] % dict(mesh)[attrs["mesh_dim"]]:
        raise ValueError("uneven chunk")
    position = [name for name, _ in mesh].index(attrs["mesh_dim"])
    return torch.chunk(a, dict(mesh)[attrs["mesh_dim"]], dim=attrs["dim"])[coords[position]]


def gradients(ops, inputs, placements, mesh, out, out_placements, cotangent):
    """Per-rank input gradients reassembled by each input's placement (R: ranks must agree)."""
    partial_parts = {}
    leaves = {coords: {name: torch.tensor(local_piece(value, placements[name], mesh, coords, partial_parts),
                                          dtype=torch.float64, requires_grad=True)
                       for name, value in inputs.items()} for coords in ranks(mesh)}
    env = {coords: dict(values) for coords, values in leaves.items()}
    for kind, result, args, attrs in ops:
        if kind in ("all_reduce", "all_gather", "reduce_scatter"):
            done = set()
            for coords in env:
                if coords in done:
                    continue
                members = _members(coords, mesh, attrs["mesh_dim"])
                outs = apply_collective(kind, attrs, [env[m][args[0]] for m in members])
                for member, value in zip(members, outs):
                    env[member][result] = value
                    done.add(member)
            continue
        for coords, values in env.items():
            arguments = [values[a] for a in args]
            if kind == "local_chunk":
                values[result] = _local_chunk(arguments[0], attrs, coords, mesh)
            else:
                values[result] = LOCAL[kind](arguments, values, attrs, coords, mesh)
    for coords, values in env.items():
        piece = local_piece(cotangent, [p if p[0] == "S" else ("R",) for p in out_placements], mesh, coords, {})
        values[out].backward(torch.tensor(piece, dtype=torch.float64), retain_graph=True)
    result = {}
    for name in inputs:
        grads = {coords: {name: (leaves[coords][name].grad if leaves[coords][name].grad is not None
                                 else torch.zeros_like(leaves[coords][name])).numpy()} for coords in env}
        grad_placements = tuple(p if p[0] == "S" else ("R",) for p in placements[name])
        result[name] = reassemble(grads, name, grad_placements, mesh)
    return result


def reference_gradients(ops, inputs, mesh, out, cotangent):
    unit = [(name, 1) for name, _ in mesh]
    replicated = {name: (("R",),) * len(mesh) for name in inputs}
    return gradients(ops, inputs, replicated, unit, out, (("R",),) * len(mesh), cotangent)

