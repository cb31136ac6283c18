"""Point-to-point ops and waits: their values are carried by the engine's mailboxes.

They are registered so that well-formedness and placement checks know them; the engine
(`verifier/engine.py`) runs them, and `verifier/temporal` checks their order.
"""
from __future__ import annotations

from ..ir import eval_dim, mesh_sizes
from ..placements import V
from ..registry import OpRule, register

def _recv_shape(shapes, attrs, mesh):
    """The received buffer's shape; dims may use ``tp_size`` like reshape targets."""
    return [tuple(int(eval_dim(d, mesh_sizes(mesh))) for d in attrs.get("shape", ()))]


register(OpRule("send", lambda s, a, m: [], lambda p, ctx: [], arity=(1, 1), required_attrs=("peer", "mesh_dim")))
register(OpRule("isend", lambda s, a, m: [], lambda p, ctx: [], arity=(1, 1),
                required_attrs=("peer", "mesh_dim", "handle")))
register(OpRule("recv", _recv_shape, lambda p, ctx: [V], arity=(0, 0), required_attrs=("peer", "mesh_dim", "shape")))
register(OpRule("irecv", _recv_shape, lambda p, ctx: [V], arity=(0, 0),
                required_attrs=("peer", "mesh_dim", "shape", "handle")))
register(OpRule("wait", lambda s, a, m: [], lambda p, ctx: [], arity=(0, 0), required_attrs=("handle",)))
