"""Explicit ``torch.distributed``: ranks, collectives, point-to-point, async handles, autograd.Function.

Recognised idioms (each becomes IR with the line of the call):

* ``dist.get_rank()`` / ``get_world_size()`` -> the mesh coordinate / size (symbols);
* ``t.chunk(world, d)[rank]``, ``torch.split(t, n // world, d)[rank]``, ``t.narrow(d, rank * k, k)``,
  ``t[..., rank * k:(rank + 1) * k]`` -> ``local_chunk``;
* ``dist.all_reduce(t, op)`` (in place: later reads of ``t`` see the result), ``all_gather`` into
  a list + ``torch.cat(list, d)`` and ``all_gather_into_tensor`` (+ ``torch.cat(out.chunk(world), d)``)
  -> ``all_gather(dim=d)``, ``reduce_scatter(_tensor)``, ``all_to_all(_single)``, ``broadcast``,
  ``reduce``, ``scatter``, ``gather``;
* ``send/recv/isend/irecv/batch_isend_irecv`` with peers written over the rank;
* ``async_op=True`` -> ``handle=NAME`` and ``work.wait()`` -> ``wait(handle=NAME)``;
* ``torch.autograd.Function`` subclasses: ``forward`` inlined at ``.apply``; ``backward`` recorded.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import libcst as cst
import sympy as sp

from .sizes import to_sym
from .builtins import _dim_sets
from .library import CONSTANTS, Call, function, object_method
from .values import (MISSING, BufferList, ClassObj, FunctionObj, GroupObj, Handle, HandleList, MeshObj,
                     PendingGather, ReduceOp, Tensor, UnsupportedError, UserError, WorldPieces)

for _name, _op in {"SUM": "sum", "AVG": "avg", "MAX": "max", "MIN": "min", "PRODUCT": "product",
                   "BAND": "band", "BOR": "bor", "BXOR": "bxor"}.items():
    CONSTANTS[f"dist.ReduceOp.{_name}"] = ReduceOp(_op)
    CONSTANTS[f"dist.ReduceOp.RedOpType.{_name}"] = ReduceOp(_op)
WORLD = GroupObj(("*",))
CONSTANTS["dist.group.WORLD"] = WORLD
CONSTANTS["dist.GroupMember.WORLD"] = WORLD


@dataclass
class BackwardBody:
    """A custom autograd.Function's backward: kept for a gradient checker."""

    function: str
    line: int | None
    source: str
    node: cst.FunctionDef


@dataclass
class P2POpObj:
    kind: str  # isend | irecv
    tensor: Tensor
    peer: Any
    line: int | None
    tag: Any = 0


# --- groups and ranks ------------------------------------------------------------------------

def group_dims(cx: Call, group: Any) -> tuple[str, ...]:
    names = cx.it.dims.mesh.names
    if group is None or group is MISSING or group is WORLD:
        return tuple(names)
    if isinstance(group, (GroupObj, MeshObj)):
        return tuple(group.dims) if group.dims != ("*",) else tuple(names)
    raise UnsupportedError(cx.line, "group", f"process group {group!r} is not modelled")


def world_dims_of(cx: Call, count: Any) -> tuple[str, ...]:
    """The mesh dims whose ranks ``count`` counts (``count`` is a world size)."""
    it = cx.it
    for dims in _dim_sets(it.dims.mesh.names):
        if sp.cancel(to_sym(count) - it.dims.world(dims)) == 0:
            return dims
    raise UnsupportedError(cx.line, "world size", f"{it.describe(count)} pieces: only the world size of a process "
                                                  f"group is modelled")


def reduce_op(cx: Call, op: Any) -> str:
    if op is None or op is MISSING:
        return "sum"
    if isinstance(op, ReduceOp) and op.op in ("sum", "avg", "max", "min"):
        return op.op
    if isinstance(op, str) and op.lower() in ("sum", "avg", "max", "min"):
        return op.lower()
    raise UnsupportedError(cx.line, "reduce op", f"{op!r} is not modelled (sum, avg, max, min are)")


@function("dist.get_rank")
def get_rank(cx: Call, group=None):
    return cx.it.dims.global_rank(group_dims(cx, group))


@function("dist.get_world_size")
def get_world_size(cx: Call, group=None):
    return cx.it.dims.world(group_dims(cx, group))


@function("dist.is_initialized", "dist.is_available")
def _initialized(cx: Call):
    return True


@function("dist.init_process_group", "dist.destroy_process_group")
def _process_group(cx: Call, *args, **kwargs):
    return None


@function("dist.barrier")
def _barrier(cx: Call, group=None, async_op=False, device_ids=None):
    if cx.it.builder.when:
        raise UnsupportedError(cx.line, "dist.barrier", "a barrier on some ranks only is not modelled")
    return None


@function("dist.new_group")
def _new_group(cx: Call, ranks=None, **kwargs):
    if ranks is None:
        return WORLD
    raise UnsupportedError(cx.line, "dist.new_group", "process groups other than the mesh dims are not modelled")


@function("dist.get_backend")
def _backend(cx: Call, group=None):
    return "gloo"


# --- pieces of the world ---------------------------------------------------------------------

def pick_piece(cx: Call, pieces: WorldPieces, key: Any) -> Tensor:
    it = cx.it
    rank = it.dims.global_rank(pieces.dims)
    if isinstance(key, sp.Basic) and sp.cancel(key - rank) == 0:
        return it.local_chunk(pieces.source, pieces.dim, pieces.dims, cx.line)
    raise UnsupportedError(cx.line, "piece", f"piece {it.describe(key)} of the world's pieces: only this rank's own "
                                             f"piece ([rank]) is modelled")


def cat_pieces(cx: Call, obj: Any, dim: Any) -> Tensor:
    """``torch.cat`` of the ranks' pieces: a gather whose dim this fixes, or the source itself."""
    it = cx.it
    if isinstance(obj, BufferList):
        if obj.filled is None:
            raise UnsupportedError(cx.line, "torch.cat", "of receive buffers that no collective filled")
        return fix_pending(cx, obj.filled, dim)
    if isinstance(obj, WorldPieces):
        source = obj.source
        d = it.norm_dim(dim, source.ndim, cx.line)
        if source.pending is not None and source.name is None and obj.dim == 0:
            return fix_pending(cx, source.pending, d)
        if d == obj.dim:
            return source
        raise UnsupportedError(cx.line, "torch.cat", f"re-assembling pieces split along dim {obj.dim} along dim {d} "
                                                     f"is not modelled")
    raise UnsupportedError(cx.line, "torch.cat", f"of {type(obj).__name__}")


def fix_pending(cx: Call, pending: PendingGather, dim: Any) -> Tensor:
    it = cx.it
    d = it.norm_dim(dim, pending.source.ndim, cx.line)
    if pending.fixed_dim is not None and pending.fixed_dim != d:
        raise UnsupportedError(cx.line, "torch.cat", f"the gathered pieces are re-assembled along dim "
                                                     f"{pending.fixed_dim} and along dim {d}")
    if pending.fixed_dim is None:
        pending.fix(d)
    return pending.result


def buffer_list(cx: Call, node: cst.CSTNode, range_obj: Any, scope: Any) -> BufferList:
    """``[torch.empty_like(t) for _ in range(world)]``: receive buffers, one per rank."""
    from .interpreter import Scope
    it = cx.it
    inner = Scope(scope, scope.module)
    loop = node.for_in
    if not isinstance(loop.target, cst.Name):
        raise UnsupportedError(cx.line, "list comprehension", "over range(world) with a complex target")
    inner.vars[loop.target.value] = sp.Symbol("_unused_index")
    element = it.eval(node.elt, inner)
    if loop.ifs or not (isinstance(element, Tensor) and element.name is None):
        raise UnsupportedError(cx.line, "list comprehension", "a list with one entry per rank is modelled only as "
                                                              "receive buffers (torch.empty/zeros) of a collective")
    return BufferList(range_obj.world_dims, element, cx.line)


# --- collectives -----------------------------------------------------------------------------

def _single_dim(cx: Call, dims: tuple[str, ...], what: str) -> str:
    if len(dims) != 1:
        raise UnsupportedError(cx.line, what, f"over a group spanning mesh dims {', '.join(dims)} is not modelled "
                                              f"(use one mesh dim per process group)")
    return dims[0]


def _handle_attrs(cx: Call, async_op: bool) -> tuple[dict, Handle | None]:
    if not async_op:
        return {}, None
    name = cx.it.builder.fresh(cx.hint or "work")
    handle = Handle(name, cx.line)
    cx.it.handles[name] = handle
    return {"handle": name}, handle


def collective(cx: Call, kind: str, tensor: Tensor, attrs: dict, dims: tuple[str, ...], shape, *,
               async_op: bool = False) -> tuple[Tensor, Handle | None]:
    it = cx.it
    extra, handle = _handle_attrs(cx, async_op)
    if async_op and len(dims) > 1:
        raise UnsupportedError(cx.line, kind, "an async collective over several mesh dims is not modelled")
    out = tensor
    for mesh_dim in (dims if kind != "all_gather" else tuple(reversed(dims))):
        out = it.op(kind, [out], {"mesh_dim": mesh_dim, **attrs, **extra}, shape(out, mesh_dim), out.dtype, cx.line)
    return out, handle


def _tensor(cx: Call, value: Any, what: str) -> Tensor:
    if not isinstance(value, Tensor):
        raise UnsupportedError(cx.line, what, f"expected a tensor, got {type(value).__name__}")
    if value.dt is not None:
        raise UnsupportedError(cx.line, what, "a torch.distributed collective on a DTensor")
    return value


@function("dist.all_reduce")
def all_reduce(cx: Call, tensor, op=None, group=None, async_op=False):
    tensor = _tensor(cx, tensor, "all_reduce")
    dims = group_dims(cx, group)
    result, handle = collective(cx, "all_reduce", tensor, {"op": reduce_op(cx, op)}, dims, lambda t, d: t.shape,
                                async_op=bool(async_op))
    cx.it.mutate(tensor, result, cx.line, "dist.all_reduce")
    return handle


@function("dist.broadcast")
def broadcast(cx: Call, tensor, src=None, group=None, async_op=False, group_src=None):
    it = cx.it
    tensor = _tensor(cx, tensor, "broadcast")
    mesh_dim = _single_dim(cx, group_dims(cx, group), "broadcast")
    source = group_src if group_src is not None else src
    if len(it.dims.mesh.names) > 1 and group_src is None:
        raise UnsupportedError(cx.line, "broadcast", "src is a global rank; on a mesh with several dims use "
                                                     "group_src=")
    result, handle = collective(cx, "broadcast", tensor, {"src": it.as_int(source, cx.line, "src")}, (mesh_dim,),
                                lambda t, d: t.shape, async_op=bool(async_op))
    it.mutate(tensor, result, cx.line, "dist.broadcast")
    return handle


@function("dist.reduce")
def reduce(cx: Call, tensor, dst=None, op=None, group=None, async_op=False, group_dst=None):
    it = cx.it
    tensor = _tensor(cx, tensor, "reduce")
    mesh_dim = _single_dim(cx, group_dims(cx, group), "reduce")
    target = group_dst if group_dst is not None else dst
    if len(it.dims.mesh.names) > 1 and group_dst is None:
        raise UnsupportedError(cx.line, "reduce", "dst is a global rank; on a mesh with several dims use group_dst=")
    result, handle = collective(cx, "reduce", tensor, {"dst": it.as_int(target, cx.line, "dst"),
                                                       "op": reduce_op(cx, op)}, (mesh_dim,), lambda t, d: t.shape,
                                async_op=bool(async_op))
    it.mutate(tensor, result, cx.line, "dist.reduce")
    return handle


def _pending_gather(cx: Call, kind: str, source: Tensor, mesh_dim: str, attrs: dict, attr: str,
                    async_op: bool) -> tuple[PendingGather, Handle | None]:
    it = cx.it
    extra, handle = _handle_attrs(cx, async_op)
    (name,), record = it.builder.emit(kind, [it.use(source, cx.line)], {"mesh_dim": mesh_dim, **attrs, attr: 0,
                                                                         **extra}, cx.line)
    size = it.dims.size[mesh_dim]
    pending = PendingGather(record, attr, source, (mesh_dim,), fix=lambda d: None)

    def fix(d: int) -> Tensor:
        record.attrs[attr] = d
        shape = list(source.shape)
        if kind == "all_to_all":
            split = record.attrs["split_dim"]
            it.divisible(shape[split], size, "all_to_all", cx.line)
            shape[split] = sp.cancel(shape[split] / size)
        shape[d] = sp.expand(shape[d] * size)
        pending.result = Tensor(name, tuple(shape), source.dtype)
        pending.fixed_dim = d
        return pending.result

    pending.fix = fix
    return pending, handle


@function("dist.all_gather")
def all_gather(cx: Call, tensor_list, tensor, group=None, async_op=False):
    tensor = _tensor(cx, tensor, "all_gather")
    mesh_dim = _single_dim(cx, group_dims(cx, group), "all_gather")
    if not isinstance(tensor_list, BufferList):
        raise UnsupportedError(cx.line, "all_gather", "the output list must be one buffer per rank "
                                                      "([torch.empty_like(t) for _ in range(world)])")
    if tensor_list.template is not None:
        for a, b in zip(tensor_list.template.shape, tensor.shape):
            cx.it.unify(a, b, "all_gather buffers", cx.line)
    pending, handle = _pending_gather(cx, "all_gather", tensor, mesh_dim, {}, "dim", bool(async_op))
    tensor_list.filled = pending
    return handle


@function("dist.all_gather_into_tensor", "dist._all_gather_base")
def all_gather_into_tensor(cx: Call, output_tensor, input_tensor, group=None, async_op=False):
    it = cx.it
    output_tensor, input_tensor = _tensor(cx, output_tensor, "all_gather_into_tensor"), _tensor(
        cx, input_tensor, "all_gather_into_tensor")
    mesh_dim = _single_dim(cx, group_dims(cx, group), "all_gather_into_tensor")
    it.unify(output_tensor.shape[0], input_tensor.shape[0] * it.dims.size[mesh_dim], "all_gather_into_tensor output",
             cx.line)
    pending, handle = _pending_gather(cx, "all_gather", input_tensor, mesh_dim, {}, "dim", bool(async_op))
    for other in output_tensor.storage or ():
        if other is not output_tensor:
            other.stale = f"the buffer was overwritten by all_gather_into_tensor (line {cx.line})"
    output_tensor.name, output_tensor.lazy, output_tensor.pending = None, None, pending
    output_tensor.storage = [output_tensor]
    return handle


def _mutate_output(cx: Call, output: Tensor, result: Tensor, what: str) -> None:
    it = cx.it
    it.unify(it.numel(output.shape), it.numel(result.shape), f"{what} output", cx.line)
    if tuple(output.shape) != tuple(result.shape):
        result = it.reshape(result, output.shape, cx.line, what)
    it.mutate(output, result, cx.line, what)


@function("dist.reduce_scatter_tensor", "dist._reduce_scatter_base")
def reduce_scatter_tensor(cx: Call, output, input, op=None, group=None, async_op=False):
    it = cx.it
    output, input = _tensor(cx, output, "reduce_scatter_tensor"), _tensor(cx, input, "reduce_scatter_tensor")
    mesh_dim = _single_dim(cx, group_dims(cx, group), "reduce_scatter_tensor")
    size = it.dims.size[mesh_dim]
    it.divisible(input.shape[0], size, "reduce_scatter_tensor", cx.line)

    def shape(t, d):
        return (sp.cancel(t.shape[0] / size),) + tuple(t.shape[1:])

    result, handle = collective(cx, "reduce_scatter", input, {"dim": 0, "op": reduce_op(cx, op)}, (mesh_dim,), shape,
                                async_op=bool(async_op))
    _mutate_output(cx, output, result, "reduce_scatter_tensor")
    return handle


@function("dist.reduce_scatter")
def reduce_scatter(cx: Call, output, input_list, op=None, group=None, async_op=False):
    it = cx.it
    output = _tensor(cx, output, "reduce_scatter")
    mesh_dim = _single_dim(cx, group_dims(cx, group), "reduce_scatter")
    if not isinstance(input_list, WorldPieces) or input_list.dims != (mesh_dim,):
        raise UnsupportedError(cx.line, "reduce_scatter", "the input list must be the world's pieces of one tensor "
                                                          "(list(t.chunk(world, dim)))")
    source, d = input_list.source, input_list.dim
    size = it.dims.size[mesh_dim]

    def shape(t, _):
        s = list(t.shape)
        s[d] = sp.cancel(s[d] / size)
        return tuple(s)

    result, handle = collective(cx, "reduce_scatter", source, {"dim": d, "op": reduce_op(cx, op)}, (mesh_dim,), shape,
                                async_op=bool(async_op))
    _mutate_output(cx, output, result, "reduce_scatter")
    return handle


@function("dist.all_to_all_single")
def all_to_all_single(cx: Call, output, input, output_split_sizes=None, input_split_sizes=None, group=None,
                      async_op=False):
    it = cx.it
    if output_split_sizes is not None or input_split_sizes is not None:
        raise UnsupportedError(cx.line, "all_to_all_single", "uneven split sizes are not modelled")
    output, input = _tensor(cx, output, "all_to_all_single"), _tensor(cx, input, "all_to_all_single")
    mesh_dim = _single_dim(cx, group_dims(cx, group), "all_to_all_single")
    it.divisible(input.shape[0], it.dims.size[mesh_dim], "all_to_all_single", cx.line)
    result, handle = collective(cx, "all_to_all", input, {"split_dim": 0, "concat_dim": 0}, (mesh_dim,),
                                lambda t, d: t.shape, async_op=bool(async_op))
    _mutate_output(cx, output, result, "all_to_all_single")
    return handle


@function("dist.all_to_all")
def all_to_all(cx: Call, output_tensor_list, input_tensor_list, group=None, async_op=False):
    mesh_dim = _single_dim(cx, group_dims(cx, group), "all_to_all")
    if not isinstance(input_tensor_list, WorldPieces) or not isinstance(output_tensor_list, BufferList):
        raise UnsupportedError(cx.line, "all_to_all", "the input must be the world's pieces of one tensor and the "
                                                      "output one buffer per rank")
    source = input_tensor_list.source
    pending, handle = _pending_gather(cx, "all_to_all", source, mesh_dim, {"split_dim": input_tensor_list.dim},
                                      "concat_dim", bool(async_op))
    output_tensor_list.filled = pending
    return handle


def _root_only(cx: Call, kind: str, argument: str, value: Any, root: int, mesh_dim: str, role: str) -> Any:
    """torch's rule for rooted collectives (``distributed_c10d.scatter`` / ``gather``): the list
    must be given on the root rank and must NOT be given on any other rank, else those ranks
    raise ValueError.  ``value if rank == root else None`` follows it; a list on every rank
    only works with one rank."""
    from .interpreter import RankOnly

    it = cx.it
    size = it.dims.mesh.size(mesh_dim)
    rank = it.dims.rank[mesh_dim]
    if isinstance(value, RankOnly):
        condition = to_sym(value.condition)
        holds = [condition.subs(rank, r) for r in range(size)]
        if any(h not in (sp.true, sp.false) for h in holds):
            raise UnsupportedError(cx.line, kind, f"{argument} is given on ranks chosen by a condition that does not "
                                                  f"depend on the {mesh_dim} rank alone")
        wrong = [r for r, h in enumerate(holds) if bool(h) != (r == root)]
        if wrong:
            r = wrong[0]
            raise UserError(cx.line, f"dist.{kind}: {argument} is {'given' if holds[r] else 'missing'} on rank {r} "
                                     f"of {mesh_dim}; torch raises ValueError unless it is given on the {role} rank "
                                     f"({root}) and only there")
        return value.value
    if value is None or (isinstance(value, (list, tuple)) and not value):
        if size > 1:
            raise UserError(cx.line, f"dist.{kind}: no {argument} on the {role} rank {root}; torch raises ValueError "
                                     f"(\"Argument ``{argument}`` must be specified on {role} rank\")")
        return value
    if size > 1:
        raise UserError(cx.line, f"dist.{kind}: {argument} is passed on every rank, but torch raises ValueError on "
                                 f"the non-{role} ranks (\"Argument ``{argument}`` must NOT be specified on "
                                 f"non-{role} ranks\"); pass it on rank {root} only, e.g. "
                                 f"`... if rank == {root} else None`")
    return value


@function("dist.scatter")
def scatter(cx: Call, tensor, scatter_list=None, src=0, group=None, async_op=False, group_src=None):
    it = cx.it
    tensor = _tensor(cx, tensor, "scatter")
    mesh_dim = _single_dim(cx, group_dims(cx, group), "scatter")
    origin = group_src if group_src is not None else src
    scatter_list = _root_only(cx, "scatter", "scatter_list", scatter_list, it.as_int(origin, cx.line, "src"),
                              mesh_dim, "source")
    if not isinstance(scatter_list, WorldPieces):
        raise UnsupportedError(cx.line, "scatter", "the scatter list must be the world's pieces of one tensor")
    source, d = scatter_list.source, scatter_list.dim
    size = it.dims.size[mesh_dim]

    def shape(t, _):
        s = list(t.shape)
        s[d] = sp.cancel(s[d] / size)
        return tuple(s)

    result, handle = collective(cx, "scatter", source, {"src": it.as_int(origin, cx.line, "src"), "dim": d},
                                (mesh_dim,), shape, async_op=bool(async_op))
    _mutate_output(cx, tensor, result, "scatter")
    return handle


@function("dist.gather")
def gather(cx: Call, tensor, gather_list=None, dst=0, group=None, async_op=False, group_dst=None):
    it = cx.it
    tensor = _tensor(cx, tensor, "gather")
    mesh_dim = _single_dim(cx, group_dims(cx, group), "gather")
    target = group_dst if group_dst is not None else dst
    gather_list = _root_only(cx, "gather", "gather_list", gather_list, it.as_int(target, cx.line, "dst"), mesh_dim,
                             "destination")
    if not isinstance(gather_list, BufferList):
        raise UnsupportedError(cx.line, "gather", "the gather list must be one buffer per rank")
    pending, handle = _pending_gather(cx, "gather", tensor, mesh_dim, {"dst": it.as_int(target, cx.line, "dst")},
                                      "dim", bool(async_op))
    gather_list.filled = pending
    return handle


# --- point to point --------------------------------------------------------------------------

def _peer(cx: Call, peer: Any, group: Any) -> tuple[str, str]:
    it = cx.it
    dims = group_dims(cx, group)
    mesh_dim = _single_dim(cx, dims, "point-to-point")
    if len(it.dims.mesh.names) > 1 and group is None:
        raise UnsupportedError(cx.line, "point-to-point", "a global peer rank on a mesh with several dims is not "
                                                          "modelled")
    if peer is None:
        raise UnsupportedError(cx.line, "recv", "receiving from any source is not modelled")
    return mesh_dim, it.dims.mesh_expr(to_sym(peer))


@function("dist.send", "dist.isend")
def send(cx: Call, tensor, dst=None, group=None, tag=0, group_dst=None):
    tensor = _tensor(cx, tensor, "send")
    mesh_dim, peer = _peer(cx, group_dst if group_dst is not None else dst, group)
    kind = "isend" if cx.name == "dist.isend" else "send"
    return _send(cx, kind, tensor, mesh_dim, peer, tag)


def _tag_attrs(cx: Call, tag: Any) -> dict[str, Any]:
    """``tag=`` is part of message matching (a receive only takes a message with its tag)."""
    if tag is None:
        return {}
    value = cx.it.as_int(tag, cx.line, "tag")
    return {"tag": value} if value else {}


def _send(cx: Call, kind: str, tensor: Tensor, mesh_dim: str, peer: str, tag: Any = 0) -> Handle | None:
    it = cx.it
    extra, handle = _handle_attrs(cx, kind == "isend")
    it.builder.emit(kind, [it.use(tensor, cx.line)], {"peer": peer, "mesh_dim": mesh_dim, **_tag_attrs(cx, tag),
                                                      **extra}, cx.line, results=0)
    return handle


@function("dist.recv", "dist.irecv")
def recv(cx: Call, tensor, src=None, group=None, tag=0, group_src=None):
    tensor = _tensor(cx, tensor, "recv")
    mesh_dim, peer = _peer(cx, group_src if group_src is not None else src, group)
    kind = "irecv" if cx.name == "dist.irecv" else "recv"
    return _recv(cx, kind, tensor, mesh_dim, peer, tag)


def _recv(cx: Call, kind: str, tensor: Tensor, mesh_dim: str, peer: str, tag: Any = 0) -> Handle | None:
    it = cx.it
    extra, handle = _handle_attrs(cx, kind == "irecv")
    shape = [it.mesh_size_dim(s, cx.line, kind) if it.dims.depends_on_mesh(s) else it.attr_dim(s, cx.line, kind)
             for s in tensor.shape]
    result = it.op(kind, [], {"peer": peer, "mesh_dim": mesh_dim, "shape": shape, "dtype": tensor.dtype,
                              **_tag_attrs(cx, tag), **extra}, tensor.shape, tensor.dtype, cx.line)
    it.mutate(tensor, result, cx.line, f"dist.{kind}")
    return handle


@function("dist.P2POp")
def p2p_op(cx: Call, op, tensor, peer=None, group=None, tag=0, group_peer=None):
    if not hasattr(op, "name") or canonical_p2p(op) is None:
        raise UnsupportedError(cx.line, "P2POp", "op must be dist.isend or dist.irecv")
    return P2POpObj(canonical_p2p(op), _tensor(cx, tensor, "P2POp"), (group_peer if group_peer is not None else peer,
                                                                      group), cx.line, tag)


def canonical_p2p(op: Any) -> str | None:
    from .source import canonical
    name = canonical(op.name)
    return {"dist.isend": "isend", "dist.irecv": "irecv"}.get(name)


@function("dist.batch_isend_irecv")
def batch_isend_irecv(cx: Call, p2p_op_list):
    handles = []
    for item in p2p_op_list:
        if not isinstance(item, P2POpObj):
            raise UnsupportedError(cx.line, "batch_isend_irecv", "expects a list of dist.P2POp")
        peer, group = item.peer
        mesh_dim, expr = _peer(cx, peer, group)
        sub = Call(cx.it, item.line, cx.node, cx.hint or "reqs")
        if item.kind == "isend":
            handles.append(_send(sub, "isend", item.tensor, mesh_dim, expr, item.tag))
        else:
            handles.append(_recv(sub, "irecv", item.tensor, mesh_dim, expr, item.tag))
    return HandleList(handles)


@object_method(Handle, "wait")
def wait(cx: Call, handle: Handle, timeout=None):
    if handle.waited:
        raise UnsupportedError(cx.line, "wait", f"handle {handle.name} is waited twice")
    handle.waited = True
    cx.it.builder.emit("wait", [], {"handle": handle.name}, cx.line, results=0)
    return None


@object_method(Handle, "is_completed")
def _is_completed(cx: Call, handle: Handle):
    raise UnsupportedError(cx.line, "is_completed", "polling a handle is not modelled")


# --- functional collectives (autograd-aware, not in place) -----------------------------------

@function("dist.nn.all_reduce", "funcol.all_reduce")
def functional_all_reduce(cx: Call, tensor, op=None, group=None, reduceOp=None):
    tensor = _tensor(cx, tensor, "all_reduce")
    attrs = {"op": reduce_op(cx, reduceOp if reduceOp is not None else op)}
    if cx.name == "dist.nn.all_reduce":  # torch.distributed.nn's all-reduce also all-reduces the gradient
        attrs["grad"] = "all_reduce"
        cx.it.megatron_autograd = True
    result, _ = collective(cx, "all_reduce", tensor, attrs, group_dims(cx, group), lambda t, d: t.shape)
    return result


@function("funcol.all_gather_tensor")
def functional_all_gather(cx: Call, self, gather_dim, group):
    it = cx.it
    tensor = _tensor(cx, self, "all_gather_tensor")
    mesh_dim = _single_dim(cx, group_dims(cx, group), "all_gather_tensor")
    d = it.norm_dim(gather_dim, tensor.ndim, cx.line)
    shape = list(tensor.shape)
    shape[d] = shape[d] * it.dims.size[mesh_dim]
    return it.op("all_gather", [tensor], {"mesh_dim": mesh_dim, "dim": d}, shape, tensor.dtype, cx.line)


@function("funcol.reduce_scatter_tensor")
def functional_reduce_scatter(cx: Call, self, reduceOp, scatter_dim, group):
    it = cx.it
    tensor = _tensor(cx, self, "reduce_scatter_tensor")
    mesh_dim = _single_dim(cx, group_dims(cx, group), "reduce_scatter_tensor")
    d = it.norm_dim(scatter_dim, tensor.ndim, cx.line)
    it.divisible(tensor.shape[d], it.dims.size[mesh_dim], "reduce_scatter_tensor", cx.line)
    shape = list(tensor.shape)
    shape[d] = sp.cancel(shape[d] / it.dims.size[mesh_dim])
    return it.op("reduce_scatter", [tensor], {"mesh_dim": mesh_dim, "dim": d, "op": reduce_op(cx, reduceOp)}, shape,
                 tensor.dtype, cx.line)


# --- custom autograd functions ---------------------------------------------------------------

def autograd_apply(cx: Call, cls: ClassObj, args: list, kwargs: dict) -> Any:
    """``F.apply(...)``: the forward body becomes a ``def``, the backward body another, joined by ``call``."""
    from .values import AutogradCtx
    it = cx.it
    forward = it.class_lookup(cls, "forward")
    backward = it.class_lookup(cls, "backward")
    if not isinstance(forward, FunctionObj):
        raise UnsupportedError(cx.line, f"{cls.name}.apply", "the Function has no forward")
    if kwargs:
        raise UnsupportedError(cx.line, f"{cls.name}.apply", "keyword arguments to apply() are not modelled")
    if it.builder.when:
        raise UnsupportedError(cx.line, f"{cls.name}.apply", "a custom autograd function on some ranks only")
    tensor_args = [a for a in args if isinstance(a, Tensor)]
    params = [it.use(a, cx.line) for a in tensor_args]
    saved_cache = dict(it.__dict__.get("_scalar_cache", {}))
    ctx = AutogradCtx()
    start = len(it.builder.ops)
    result = it.call_function(FunctionObj(forward.node, forward.scope, cls), [ctx, *args], {}, cx.node)
    outputs = list(result) if isinstance(result, tuple) else [result]
    if not outputs or not all(isinstance(t, Tensor) for t in outputs):
        raise UnsupportedError(cx.line, f"{cls.name}.forward", "must return tensors")
    returns = [it.use(t, cx.line) for t in outputs]
    body = it.builder.take_ops(start)
    it.__dict__["_scalar_cache"] = dict(saved_cache)
    forward_name = it.builder.fresh(f"{cls.name}_forward")
    it.builder.functions[forward_name] = (params, body, returns, it.line(forward.node))
    attrs = {"forward": forward_name}
    if isinstance(backward, FunctionObj):
        line = it.line(backward.node)
        if not any(b.function == cls.name for b in it.backward_bodies):
            it.backward_bodies.append(BackwardBody(cls.name, line, it.source.code(backward.node), backward.node))
        backward_name = _backward_def(cx, cls, backward, ctx, args, params, outputs,
                                      {r for record in body for r in record.results})
        if backward_name is not None:
            attrs["backward"] = backward_name
            it.uses_custom_backward = True
    results, _ = it.builder.emit("call", params, attrs, cx.line, results=len(outputs))
    for arg, param in zip(tensor_args, params):
        if arg.name != param:  # the forward changed its input in place (e.g. dist.all_reduce(x); return x)
            if arg.name not in returns:
                raise UnsupportedError(cx.line, f"{cls.name}.forward", "changes an input in place without "
                                                                     "returning it")
            arg.name = results[returns.index(arg.name)]
    made = [Tensor(name, t.shape, t.dtype) for name, t in zip(results, outputs)]
    return made[0] if len(made) == 1 and not isinstance(result, tuple) else tuple(made)


def _backward_def(cx: Call, cls: ClassObj, backward: FunctionObj, ctx: Any, args: list, params: list[str],
                  outputs: list[Tensor], forward_locals: set[str]) -> str | None:
    """The user's backward as a ``def`` taking (forward inputs, output gradients)."""
    it = cx.it
    saved_cache = dict(it.__dict__.get("_scalar_cache", {}))
    start = len(it.builder.ops)
    try:
        grads = [Tensor(it.builder.fresh(f"grad_{cls.name}_{i}"), t.shape, t.dtype) for i, t in enumerate(outputs)]
        result = it.call_function(FunctionObj(backward.node, backward.scope, cls), [ctx, *grads], {}, backward.node)
        values = list(result) if isinstance(result, tuple) else [result]
        if len(values) != len(args):
            raise UnsupportedError(it.line(backward.node), f"{cls.name}.backward",
                                   f"returns {len(values)} gradients for {len(args)} inputs")
        returns = []
        for arg, value in zip(args, values):
            if not isinstance(arg, Tensor):
                continue
            if value is None:
                returns.append("none")
            elif isinstance(value, Tensor):
                returns.append(it.use(value, cx.line))
            else:
                raise UnsupportedError(it.line(backward.node), f"{cls.name}.backward", "returns a non-tensor gradient")
        body = it.builder.take_ops(start)
        leaked = sorted(({a for record in body for a in record.args} | set(returns)) & forward_locals)
        if leaked:
            raise UnsupportedError(it.line(backward.node), f"{cls.name}.backward",
                                   f"reads {leaked[0]!r}, a value the forward computed and saved (only the "
                                   f"forward's inputs can be passed to the backward)")
    except UnsupportedError as problem:
        it.builder.take_ops(start)
        it.note(f"line {problem.line}: the backward of {cls.name} is not translated ({problem.construct}: "
                f"{problem.reason}); its gradients are derived from the forward instead")
        it.untranslated_backwards.append(
            (problem.line, f"line {problem.line}: the backward of {cls.name} was not translated ({problem.reason}); "
                           f"gradients were derived from the forward, so this backward was not checked"))
        return None
    finally:
        it.__dict__["_scalar_cache"] = saved_cache
    name = it.builder.fresh(f"{cls.name}_backward")
    it.builder.functions[name] = (params + [g.name for g in grads], body, returns, it.line(backward.node))
    return name


__all__ = ["BackwardBody", "group_dims", "world_dims_of", "pick_piece", "cat_pieces", "buffer_list", "autograd_apply",
           "collective", "reduce_op", "MeshObj"]
