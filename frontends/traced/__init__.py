"""The tracing frontend: run the user's code under real torch on CPU and record what it does.

Why run the code instead of reading it: Python semantics, library code (Megatron-core layers,
DTensor plans, custom ``autograd.Function`` backwards) and torch's own argument checks come
from torch itself, exactly (``dist.scatter`` with a list on a non-source rank raises
``ValueError`` here as it does under torchrun).

How (one child process, ``runner.py``; everything sequential inside it, ``child.py``):

1. world 1, the reference: a real gloo process group of one rank, so collectives compute real
   values and any ``if world_size == 1:`` path is the one taken;
2. ranks 0..W-1, one after the other, each on torch's fake process group (``FakeStore``):
   one rank runs alone without peers.  Threads or processes over a real backend would need W
   live peers per file; recording each rank alone is simpler, deterministic and cheap, and the
   verifier supplies what the collectives compute (values after a simulated collective are not
   real: reading them into Python is ``unsupported``, never trusted).

Before each run the file is imported afresh under a unique module name (no module-level state
survives), the entry is constructed unrecorded (parameters become leaves named by module path),
then the forward and a backward run under a ``TorchDispatchMode`` (``recorder.py``) that names
every tensor, records every aten op and collective with the user's file:line (``spans.py``),
and guards aliasing with torch's version counters.  ``to_ir.py`` relates each rank's leaves to
the reference's (``correspondence.py``) and builds a ``verifier.traced_ir.TracedProgram``.
"""
from __future__ import annotations

from .runner import TraceOptions, trace_file, trace_file_at_worlds
from .failure import TraceFailure

__all__ = ["TraceOptions", "TraceFailure", "trace_file", "trace_file_at_worlds"]
