"""An independent NumPy implementation of a small SPMD op set: the numeric ground truth.

Deliberately shares no code with ``verifier/``: rank layout, sharding, collectives and ops
are re-implemented here in the plainest way, so the differential test cannot pass because
the checker agrees with itself.
"""
from __future__ import annotations

import itertools
import math

import numpy as np


def _gelu(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


UNARY = {"neg": lambda x: -x, "gelu": _gelu, "relu": lambda x: np.maximum(x, 0.0), "exp": np.exp,
         "tanh": np.tanh}


def ranks(mesh):
    return list(itertools.product(*[range(size) for _, size in mesh]))


def local_piece(global_value, placements, mesh, coords, partial_parts):
    """This rank's piece: walk mesh dims in order (the DTensor convention)."""
    piece = global_value
    for position, ((name, size), placement) in enumerate(zip(mesh, placements)):
        c = coords[position]
        if placement[0] == "S":
            piece = np.split(piece, size, axis=placement[1])[c]
        elif placement[0] == "P":
            key = (name, coords[:position])
            parts = partial_parts.setdefault(key, [np.random.default_rng(len(partial_parts) + 7)
                                                   .standard_normal(piece.shape) for _ in range(size - 1)])
            piece = piece - sum(parts) if c == 0 else parts[c - 1]
    return piece


def group_of(coords, mesh, mesh_dim):
    position = [name for name, _ in mesh].index(mesh_dim)
    members = []
    for c in range(mesh[position][1]):
        other = list(coords)
        other[position] = c
        members.append(tuple(other))
    return members


def run(program_ops, inputs, placements, mesh):
    """Evaluate ops on every rank; returns {coords: {name: value}}."""
    partial_parts = {}
    env = {coords: {name: local_piece(value, placements[name], mesh, coords, partial_parts)
                    for name, value in inputs.items()} for coords in ranks(mesh)}
    sizes = dict(mesh)
    for kind, result, args, attrs in program_ops:
        if kind in ("all_reduce", "all_gather", "reduce_scatter"):
            new = {}
            for coords in env:
                group = [env[g][args[0]] for g in group_of(coords, mesh, attrs["mesh_dim"])]
                me = group_of(coords, mesh, attrs["mesh_dim"]).index(coords)
                if kind == "all_gather":
                    new[coords] = np.concatenate(group, axis=attrs["dim"])
                    continue
                op = attrs["op"]
                total = (np.sum(group, axis=0) if op == "sum" else np.max(group, axis=0) if op == "max"
                         else np.mean(group, axis=0))
                new[coords] = total if kind == "all_reduce" else np.split(total, len(group), axis=attrs["dim"])[me]
            for coords in env:
                env[coords][result] = new[coords]
            continue
        for coords, values in env.items():
            a = values[args[0]] if args else None
            if kind == "matmul":
                out = a @ values[args[1]]
            elif kind == "add":
                out = a + values[args[1]]
            elif kind == "mul":
                out = a * attrs["scalar"]
            elif kind in UNARY:
                out = UNARY[kind](a)
            elif kind == "transpose":
                out = a.T
            elif kind == "sum":
                out = a.sum(axis=attrs["dim"], keepdims=True)
            elif kind == "softmax":
                e = np.exp(a - a.max(axis=-1, keepdims=True))
                out = e / e.sum(axis=-1, keepdims=True)
            elif kind == "local_chunk":
                position = [name for name, _ in mesh].index(attrs["mesh_dim"])
                out = np.split(a, sizes[attrs["mesh_dim"]], axis=attrs["dim"])[coords[position]]
            elif kind == "div_world":
                out = a / sizes[attrs["mesh_dim"]]
            else:
                raise ValueError(kind)
            values[result] = out
    return env


def reassemble(env, name, placements, mesh):
    """Global value from the ranks' values, or None if replicated ranks disagree."""
    pieces = {coords: values[name] for coords, values in env.items()}
    for position in reversed(range(len(mesh))):
        size = mesh[position][1]
        placement = placements[position]
        merged = {}
        for prefix in {c[:position] for c in pieces}:
            group = [pieces[prefix + (c,)] for c in range(size)]
            if placement[0] == "S":
                merged[prefix] = np.concatenate(group, axis=placement[1])
            elif placement[0] == "P":
                merged[prefix] = np.sum(group, axis=0)
            else:
                if any(g.shape != group[0].shape or not np.allclose(g, group[0], rtol=1e-6, atol=1e-8) for g in group):
                    return None
                merged[prefix] = group[0]
        pieces = merged
    return pieces[()]
