"""Importing this package registers every op rule (one module per family of ops)."""
from . import collectives, elementwise, gradients, matmul, nn, p2p, reductions, shape_ops, spmd  # noqa: F401
from . import aten, casts  # noqa: F401,E402  (after the rules they reuse)
