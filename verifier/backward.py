"""Generate the backward program: VJPs of every op, with collective duals.

The result is one IR program — forward ops, generated backward ops, then the program's own
``backward`` section (gradient synchronisation: data-parallel all-reduce, the tensor-parallel
all-reduce of sequence-parallel norm weights, ZeRO reduce-scatter) — whose outputs are the
forward outputs plus the gradients to check.  The equivalence check then proves the
gradients equal to those of the mesh-size-1 program, with the same engine and solver.

Semantics: every rank differentiates its own local program, starting from the global
cotangent of each output (``R``, or ``S(d)`` for a sharded output) — the convention of DDP
and Megatron.  Collectives contribute their duals: all_reduce -> identity (Megatron's ``g``),
all_gather -> reduce_scatter, reduce_scatter -> all_gather, all_to_all -> all_to_all with
the dims swapped.  An op may name another dual with ``grad=`` (``identity(x, grad=all_reduce)``
is Megatron's ``f``; ``all_gather(grad=split)`` and ``local_chunk(grad=all_gather)`` are its
gather/scatter mappings).  A ``call`` of a ``def`` with ``backward=NAME`` uses the user's
backward body instead of derived VJPs (custom ``torch.autograd.Function``).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from typing import Callable

from .calls import rename_body
from .ir import Op, Output, Program, Span, TensorSpec
from .placements import R, Shard


class BackwardUnsupported(Exception):
    def __init__(self, op: Op, reason: str):
        self.op = op
        self.line = op.span.line
        super().__init__(f"cannot differentiate {op.kind}: {reason}")


@dataclass
class Builder:
    """Emits backward ops with fresh names, knowing the global shapes of forward values."""

    shapes: dict[str, tuple[int, ...]]
    ops: list[Op] = field(default_factory=list)
    counter: itertools.count = field(default_factory=itertools.count)
    span: Span = field(default_factory=Span)

    def emit(self, kind: str, args: tuple[str, ...] | list[str], shape: tuple[int, ...] | None = None,
             **attrs) -> str:
        name = f"_g{next(self.counter)}"
        self.ops.append(Op((name,), kind, tuple(args), dict(attrs), self.span))
        if shape is not None:
            self.shapes[name] = tuple(shape)
        return name

    def shape(self, name: str) -> tuple[int, ...]:
        return self.shapes[name]

    def unbroadcast(self, grad: str, target: str, grad_shape: tuple[int, ...]) -> str:
        """Sum a gradient over the dims broadcasting added, back to ``target``'s shape."""
        shape = self.shape(target)
        if tuple(grad_shape) == tuple(shape):
            return grad
        lead = len(grad_shape) - len(shape)
        dims = list(range(lead)) + [lead + i for i, size in enumerate(shape) if size == 1 and grad_shape[lead + i] != 1]
        summed = self.emit("sum", [grad], dim=dims, keepdim=True) if dims else grad
        return self.emit("reshape_as", [summed, target], shape)


Vjp = Callable[[Builder, Op, list], list]
VJPS: dict[str, Vjp] = {}


def vjp(*kinds: str):
    def register(function: Vjp) -> Vjp:
        for kind in kinds:
            VJPS[kind] = function
        return function
    return register


def _out(b: Builder, op: Op) -> tuple[int, ...]:
    return b.shape(op.results[0])


@vjp("matmul")
def _matmul(b, op, grads):
    (g,) = grads
    a, w = op.args
    da = b.emit("matmul", [g, b.emit("transpose", [w], dim0=-2, dim1=-1)])
    out = _out(b, op)
    db = b.emit("matmul", [b.emit("transpose", [a], dim0=-2, dim1=-1), g])
    return [b.unbroadcast(da, a, out[:-1] + (b.shape(a)[-1],)),
            b.unbroadcast(db, w, out[:-2] + (b.shape(w)[-2], out[-1]))]


@vjp("linear")
def _linear(b, op, grads):
    (g,) = grads
    x, w = op.args[:2]
    out = _out(b, op)
    dx = b.emit("matmul", [g, w])
    dwt = b.emit("matmul", [b.emit("transpose", [x], dim0=-2, dim1=-1), g])
    lead = list(range(len(out) - 2))
    if lead:
        dwt = b.emit("sum", [dwt], dim=lead)
    result = [dx, b.emit("transpose", [dwt], dim0=0, dim1=1)]
    if len(op.args) == 3:
        result.append(b.emit("sum", [g], dim=list(range(len(out) - 1))))
    return result


def _scalar(op: Op):
    return op.attrs.get("scalar")


@vjp("add", "sub")
def _add(b, op, grads):
    (g,) = grads
    out = _out(b, op)
    if len(op.args) == 1:
        return [b.emit("neg", [g]) if op.kind == "sub" and op.attrs.get("reverse") else g]
    second = b.emit("neg", [g]) if op.kind == "sub" else g
    return [b.unbroadcast(g, op.args[0], out), b.unbroadcast(second, op.args[1], out)]


@vjp("mul")
def _mul(b, op, grads):
    (g,) = grads
    if len(op.args) == 1:
        return [b.emit("mul", [g], scalar=_scalar(op))]
    x, y = op.args
    out = _out(b, op)
    return [b.unbroadcast(b.emit("mul", [g, y]), x, out), b.unbroadcast(b.emit("mul", [g, x]), y, out)]


@vjp("div")
def _div(b, op, grads):
    (g,) = grads
    y = op.results[0]
    if len(op.args) == 1:
        if op.attrs.get("reverse"):  # c / a: -y / a
            return [b.emit("neg", [b.emit("div", [b.emit("mul", [g, y]), op.args[0]])])]
        return [b.emit("div", [g], scalar=_scalar(op))]
    num, den = op.args
    out = _out(b, op)
    return [b.unbroadcast(b.emit("div", [g, den]), num, out),
            b.unbroadcast(b.emit("neg", [b.emit("div", [b.emit("mul", [g, y]), den])]), den, out)]


@vjp("neg")
def _neg(b, op, grads):
    return [b.emit("neg", [grads[0]])]


@vjp("identity", "cast")
def _identity(b, op, grads):
    (g,) = grads
    if op.attrs.get("grad") == "all_reduce":  # Megatron's f: identity forward, all-reduce backward
        return [b.emit("all_reduce", [g], mesh_dim=op.attrs["mesh_dim"], op="sum")]
    return [g]


@vjp("pow")
def _pow(b, op, grads):
    exponent = op.attrs.get("scalar", 2)
    if not isinstance(exponent, int) or exponent < 1:
        raise BackwardUnsupported(op, "only positive integer powers")
    (x,) = op.args
    scaled = b.emit("mul", [grads[0]], scalar=float(exponent))
    return [b.emit("mul", [scaled, b.emit("pow", [x], scalar=exponent - 1)]) if exponent > 1 else scaled]


@vjp("exp")
def _exp(b, op, grads):
    return [b.emit("mul", [grads[0], op.results[0]])]


@vjp("log")
def _log(b, op, grads):
    return [b.emit("div", [grads[0], op.args[0]])]


@vjp("tanh")
def _tanh(b, op, grads):
    y = op.results[0]
    one_minus = b.emit("sub", [b.emit("mul", [y, y])], scalar=1.0, reverse=True)
    return [b.emit("mul", [grads[0], one_minus])]


@vjp("sigmoid")
def _sigmoid(b, op, grads):
    y = op.results[0]
    return [b.emit("mul", [grads[0], b.emit("mul", [y, b.emit("sub", [y], scalar=1.0, reverse=True)])])]


@vjp("relu")
def _relu(b, op, grads):
    (g,) = grads
    return [b.emit("where", [b.emit("gt", [op.args[0]], scalar=0.0), g, b.emit("zeros_like", [g])])]


@vjp("abs")
def _abs(b, op, grads):
    (g,) = grads
    return [b.emit("where", [b.emit("gt", [op.args[0]], scalar=0.0), g, b.emit("neg", [g])])]


@vjp("sqrt")
def _sqrt(b, op, grads):
    return [b.emit("div", [grads[0], b.emit("mul", [op.results[0]], scalar=2.0)])]


@vjp("rsqrt")
def _rsqrt(b, op, grads):
    cube = b.emit("pow", [op.results[0]], scalar=3)
    return [b.emit("mul", [b.emit("mul", [grads[0], cube])], scalar=-0.5)]


@vjp("gelu", "silu", "gelu_tanh")
def _activation(b, op, grads):
    derivative = b.emit("d" + op.kind, [op.args[0]])
    return [b.emit("mul", [grads[0], derivative])]


@vjp("softmax")
def _softmax(b, op, grads):
    (g,) = grads
    y = op.results[0]
    dim = op.attrs.get("dim", -1)
    total = b.emit("sum", [b.emit("mul", [g, y])], dim=dim, keepdim=True)
    return [b.emit("mul", [y, b.emit("sub", [g, total])])]


@vjp("log_softmax")
def _log_softmax(b, op, grads):
    (g,) = grads
    dim = op.attrs.get("dim", -1)
    total = b.emit("sum", [g], dim=dim, keepdim=True)
    return [b.emit("sub", [g, b.emit("mul", [b.emit("exp", [op.results[0]]), total])])]


@vjp("layer_norm", "rms_norm")
def _norm(b, op, grads):
    (g,) = grads
    x = op.args[0]
    out = _out(b, op)
    eps = {"eps": op.attrs["eps"]} if "eps" in op.attrs else {}
    result = []
    if len(op.args) >= 2:
        normalised = b.emit(op.kind, [x], **eps)
        dn = b.emit("mul", [g, op.args[1]])
        dx = b.emit(f"{op.kind}_backward", [x, dn], **eps)
        lead = list(range(len(out) - 1))
        dw = b.emit("mul", [g, normalised])
        result = [dx, b.emit("sum", [dw], dim=lead) if lead else dw]
        if len(op.args) == 3:
            result.append(b.emit("sum", [g], dim=lead) if lead else g)
        return result
    return [b.emit(f"{op.kind}_backward", [x, g], **eps)]


@vjp("embedding")
def _embedding(b, op, grads):
    ids, weight = op.args
    return [None, b.emit("embedding_grad", [ids, grads[0], weight])]


@vjp("cross_entropy")
def _cross_entropy(b, op, grads):
    logits, target = op.args
    reduction = op.attrs.get("reduction", "mean")
    return [b.emit("cross_entropy_grad", [logits, target, grads[0]], reduction=reduction), None]


@vjp("sdpa")
def _sdpa(b, op, grads):
    (g,) = grads
    q, k, v = op.args
    attrs = {key: op.attrs[key] for key in ("causal", "scale") if key in op.attrs}
    probs = b.emit("attention_probs", [q, k], **attrs)
    dv = b.emit("matmul", [b.emit("transpose", [probs], dim0=-2, dim1=-1), g])
    dp = b.emit("matmul", [g, b.emit("transpose", [v], dim0=-2, dim1=-1)])
    total = b.emit("sum", [b.emit("mul", [dp, probs])], dim=-1, keepdim=True)
    scale = op.attrs.get("scale")
    scale = 1.0 / (b.shape(q)[-1] ** 0.5) if scale is None else float(scale)
    ds = b.emit("mul", [b.emit("mul", [probs, b.emit("sub", [dp, total])])], scalar=scale)
    dq = b.emit("matmul", [ds, k])
    dk = b.emit("matmul", [b.emit("transpose", [ds], dim0=-2, dim1=-1), q])
    return [dq, dk, dv]


@vjp("reshape")
def _reshape(b, op, grads):
    return [b.emit("reshape_as", [grads[0], op.args[0]])]


@vjp("transpose")
def _transpose(b, op, grads):
    return [b.emit("transpose", [grads[0]], dim0=op.attrs.get("dim0", -2), dim1=op.attrs.get("dim1", -1))]


@vjp("permute")
def _permute(b, op, grads):
    ndim = len(b.shape(op.args[0]))
    perm = [int(d) % ndim for d in op.attrs["dims"]]
    return [b.emit("permute", [grads[0]], dims=[perm.index(i) for i in range(ndim)])]


@vjp("slice")
def _slice(b, op, grads):
    x = op.args[0]
    ndim = len(b.shape(x))
    dim = int(op.attrs.get("dim", 0)) % ndim
    start = int(op.attrs.get("start") or 0)
    start = start + b.shape(x)[dim] if start < 0 else start
    return [b.emit("slice_grad", [grads[0], x], dim=dim, start=start)]


@vjp("chunk", "split")
def _pieces(b, op, grads):
    pieces = [g if g is not None else b.emit("zeros_like", [result]) for g, result in zip(grads, op.results)]
    return [b.emit("cat", pieces, dim=op.attrs.get("dim", 0))]


@vjp("cat")
def _cat(b, op, grads):
    (g,) = grads
    ndim = len(b.shape(op.args[0]))
    dim = int(op.attrs.get("dim", 0)) % ndim
    result, start = [], 0
    for arg in op.args:
        size = b.shape(arg)[dim]
        result.append(b.emit("slice", [g], dim=dim, start=start, end=start + size))
        start += size
    return result


def _undo_reduction(op: Op) -> dict:
    """broadcast_like attributes that put back what a sum/mean/amax reduced away."""
    dims = op.attrs.get("dim")
    return {"dims": dims if isinstance(dims, list) or dims is None else [dims], "keepdim": bool(op.attrs.get("keepdim"))}


@vjp("sum", "mean")
def _reduce(b, op, grads):
    attrs = _undo_reduction(op)
    if op.kind == "mean":
        attrs["mean"] = True
    return [b.emit("broadcast_like", [grads[0], op.args[0]], **attrs)]


@vjp("amax")
def _amax(b, op, grads):
    attrs = _undo_reduction(op)
    x = op.args[0]
    spread_max = b.emit("broadcast_like", [op.results[0], x], **attrs)
    spread_grad = b.emit("broadcast_like", [grads[0], x], **attrs)
    return [b.emit("where", [b.emit("eq", [x, spread_max]), spread_grad, b.emit("zeros_like", [spread_grad])])]


@vjp("where")
def _where(b, op, grads):
    (g,) = grads
    cond, x, y = op.args
    out = _out(b, op)
    zeros = b.emit("zeros_like", [g])
    return [None, b.unbroadcast(b.emit("where", [cond, g, zeros]), x, out),
            b.unbroadcast(b.emit("where", [cond, zeros, g]), y, out)]


@vjp("masked_fill")
def _masked_fill(b, op, grads):
    return [b.emit("masked_fill", [grads[0], op.args[1]], value=0.0), None]


@vjp("local_chunk")
def _local_chunk(b, op, grads):
    attrs = {"mesh_dim": op.attrs["mesh_dim"], "dim": op.attrs["dim"]}
    if op.attrs.get("grad") == "all_gather":  # Megatron's scatter_to_*_region: gather backward
        return [b.emit("all_gather", [grads[0]], **attrs)]
    return [b.emit("local_chunk_grad", [grads[0], op.args[0]], **attrs)]


@vjp("all_reduce")
def _all_reduce(b, op, grads):
    (g,) = grads
    mesh_dim = op.attrs["mesh_dim"]
    reduce_op = op.attrs.get("op", "sum")
    if op.attrs.get("grad") == "all_reduce":  # torch.distributed.nn.functional.all_reduce
        g = b.emit("all_reduce", [g], mesh_dim=mesh_dim, op="sum")
    if reduce_op == "sum":
        return [g]
    if reduce_op == "avg":
        return [b.emit("div", [g, b.emit("world_size", [], mesh_dim=mesh_dim)])]
    raise BackwardUnsupported(op, f"the gradient of an all_reduce with op={reduce_op} is not modelled")


@vjp("all_gather")
def _all_gather(b, op, grads):
    attrs = {"mesh_dim": op.attrs["mesh_dim"], "dim": op.attrs.get("dim", 0)}
    if op.attrs.get("grad") == "split":  # Megatron's gather_from_tensor_model_parallel_region
        return [b.emit("local_chunk", [grads[0]], **attrs)]
    return [b.emit("reduce_scatter", [grads[0]], op="sum", **attrs)]


@vjp("reduce_scatter")
def _reduce_scatter(b, op, grads):
    reduce_op = op.attrs.get("op", "sum")
    gathered = b.emit("all_gather", [grads[0]], mesh_dim=op.attrs["mesh_dim"], dim=op.attrs.get("dim", 0))
    if reduce_op == "sum":
        return [gathered]
    if reduce_op == "avg":
        return [b.emit("div", [gathered, b.emit("world_size", [], mesh_dim=op.attrs["mesh_dim"])])]
    raise BackwardUnsupported(op, f"the gradient of a reduce_scatter with op={reduce_op} is not modelled")


@vjp("all_to_all")
def _all_to_all(b, op, grads):
    return [b.emit("all_to_all", [grads[0]], mesh_dim=op.attrs["mesh_dim"],
                   split_dim=op.attrs.get("concat_dim", 0), concat_dim=op.attrs.get("split_dim", 0))]


@vjp("vocab_parallel_embedding")
def _vocab_embedding(b, op, grads):
    ids, weight = op.args
    return [None, b.emit("vocab_parallel_embedding_grad", [ids, grads[0], weight], mesh_dim=op.attrs["mesh_dim"])]


@vjp("vocab_parallel_cross_entropy")
def _vocab_ce(b, op, grads):
    logits, target = op.args
    return [b.emit("vocab_parallel_cross_entropy_grad", [logits, target, grads[0]], mesh_dim=op.attrs["mesh_dim"],
                   reduction=op.attrs.get("reduction", "none")), None]


NO_GRADIENT = {"lt", "le", "gt", "ge", "eq", "ne", "logical_and", "logical_or", "logical_not", "rank",
               "world_size", "const", "zeros", "ones", "wait"}


def _custom_backward(builder: Builder, program: Program, marker: Op, grads: dict[str, str], depends: set[str]
                     ) -> None:
    """Run the user's backward body (a custom autograd.Function) for a whole call region."""
    function = program.functions.get(marker.attrs["backward"])
    args, results = marker.attrs["call_args"], marker.attrs["call_results"]
    if function is None:
        raise BackwardUnsupported(marker, f"backward={marker.attrs['backward']!r} is not defined")
    if len(function.params) != len(args) + len(results) or len(function.returns) != len(args):
        raise BackwardUnsupported(marker, f"backward {function.name} must take {len(args) + len(results)} "
                                          f"values (inputs, then output gradients) and return {len(args)}")
    incoming = [grads.get(r) or builder.emit("zeros_like", [r]) for r in results]
    body, names = rename_body(function, f"b{next(builder.counter)}.", dict(zip(function.params, args + incoming)))
    builder.ops.extend(body)
    for arg, returned in zip(args, function.returns):
        if returned == "none" or arg not in depends:
            continue
        grad = names.get(returned, returned)
        grads[arg] = builder.emit("add", [grads[arg], grad]) if arg in grads else grad


def _cotangent_placements(placements):
    return tuple(p if isinstance(p, Shard) else R for p in placements)


def _gradient_placements(spec: TensorSpec):
    return tuple(p if isinstance(p, Shard) else R for p in spec.placements)


def gradient_program(program: Program, shapes: dict[str, tuple[int, ...]]) -> Program:
    """Forward + backward + synchronisation, with the gradients as extra outputs.

    ``shapes`` are the global shapes of the (instantiated) forward program.
    """
    builder = Builder(dict(shapes))
    wanted = {g.input for g in program.gradients}
    inputs = {spec.name: spec for spec in program.inputs}
    unknown = wanted - set(inputs)
    if unknown:
        raise ValueError(f"grad names {sorted(unknown)[0]!r}, which is not an input")
    depends = set(wanted)
    for op in program.ops:
        if any(a in depends for a in op.args):
            depends.update(op.results)
    grads: dict[str, str] = {}
    cotangents = []
    for out in program.outputs:
        name = f"dout_{out.name}"
        cotangents.append(TensorSpec(name, shapes[out.name], "f32", _cotangent_placements(out.placements), out.span))
        builder.shapes[name] = shapes[out.name]
        grads[out.name] = name
    handled_regions: set[int] = set()
    for op in reversed(program.ops):
        region = op.attrs.get("call_region")
        if region is not None and op.attrs.get("backward", "none") != "none":
            if "call_args" in op.attrs and region not in handled_regions:
                handled_regions.add(region)
                builder.span = op.span
                _custom_backward(builder, program, op, grads, depends)
            continue
        outgoing = [grads.get(r) for r in op.results]
        if all(g is None for g in outgoing) or not any(a in depends for a in op.args):
            continue
        if op.kind in NO_GRADIENT:
            continue
        rule = VJPS.get(op.kind)
        if rule is None:
            raise BackwardUnsupported(op, "no VJP rule for this op")
        for index, g in enumerate(outgoing):
            if g is None:
                outgoing[index] = builder.emit("zeros_like", [op.results[index]])
        builder.span = op.span
        for arg, grad in zip(op.args, rule(builder, op, outgoing)):
            if grad is None or arg not in depends:
                continue
            grads[arg] = builder.emit("add", [grads[arg], grad]) if arg in grads else grad
    outputs = list(program.outputs)
    for gradient in program.gradients:
        builder.span = gradient.span
        source = grads.get(gradient.input) or builder.emit("zeros_like", [gradient.input])
        builder.ops.append(Op((f"grad_{gradient.input}",), "identity", (source,), {}, gradient.span))
        placements = gradient.placements or _gradient_placements(inputs[gradient.input])
        outputs.append(Output(gradient.value, placements, gradient.span))
    return replace(program, inputs=program.inputs + tuple(cotangents),
                   ops=program.ops + tuple(builder.ops) + program.backward_ops,
                   outputs=tuple(outputs), gradients=(), backward_ops=())

