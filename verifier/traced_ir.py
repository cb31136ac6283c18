"""The IR of a traced run: what the user's code really did, once on one device and once per rank.

The tracing frontend (``frontends/traced``) runs the user's code under real torch and records
every op.  It hands the verifier a ``TracedProgram``:

* ``inputs``: the leaves of the *reference* run (world size 1): entry arguments, parameters,
  tensors the code drew at random.  They are the free variables of the proof.
* ``reference``: the straight-line ops of the world-1 run, over the input names.
* ``ranks[r]``: the straight-line ops of rank ``r`` of the parallel run.  A rank reads the same
  input names; where the rank holds only a piece of a leaf (a sharded parameter), its op list
  starts with the ``slice`` ops the parameter correspondence derived (their ``span`` is the
  line that created the parameter, their ``attrs["layout_source"]`` says where the layout came
  from: "dtensor", "megatron", "shape" or "user").
  Collectives carry ``attrs["group"]``: the tuple of global ranks that take part, in group
  order; the k-th collective a rank issues on a group meets the k-th of every other member.
  Point-to-point ops carry ``attrs["peer"]`` (a global rank) and ``attrs["tag"]``.
* ``comparisons``: what must agree.  Each says: the reference value ``reference`` restricted to
  ``regions[r]`` equals rank r's value ``per_rank[r]`` (a rank with ``None`` holds no piece).
  A replicated output has the whole tensor as every rank's region; a sharded one the rank's
  chunk.  Gradients are compared the same way, after whatever synchronisation the code did.
* ``assumptions``: sentences the verdict must repeat (layouts assumed, data-dependent branches
  followed for the recorded inputs, sizes the code was run at).

Op kinds and their semantics are the registry's (``verifier/registry.py``); nothing here
re-states what an op computes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# ops whose result is memory nothing wrote (its values are whatever was there)
UNINITIALISED = ("aten.empty.memory_format", "aten.empty_like.default", "aten.new_empty.default",
                 "aten.empty_strided.default", "aten.new_empty_strided.default")

from .ir import Op, Span, TensorSpec

Region = tuple[tuple[int, int], ...]  # (start, stop) per dim of the reference value


@dataclass(frozen=True)
class Comparison:
    label: str                      # "output 0", "gradient of fc1.weight", "loss"
    kind: str                       # "output" | "gradient"
    reference: str                  # value name in the reference op list
    per_rank: tuple[str | None, ...]
    regions: tuple[Region | None, ...]
    span: Span = field(default_factory=Span)


@dataclass(frozen=True)
class TracedProgram:
    world: int
    mesh: dict[str, int]            # named mesh dims for the report (e.g. {"dp": 2, "tp": 2})
    inputs: tuple[TensorSpec, ...]
    reference: tuple[Op, ...]
    ranks: tuple[tuple[Op, ...], ...]
    comparisons: tuple[Comparison, ...]
    assumptions: tuple[str, ...] = ()
    passes: tuple[str, ...] = ("forward",)   # "forward", "backward": what the recording covers
    source: str | None = None
    # inputs the code drew at random with numbers of its own on some rank (a seed that depends on
    # the rank): concrete checks use the numbers each run drew; the proof still covers all values
    pinned: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    # pinned inputs the proof takes with their numbers too: a selection whose result steers the path
    # (steering.py), per run; what is proven holds for the inputs that select the same way
    fixed: tuple[str, ...] = ()
    # module-level sizes the frontend set before running the code (sizes.py); a re-run of the code
    # with a counterexample (confirmation.py) must use them too
    sizes: dict[str, int] = field(default_factory=dict, hash=False, compare=False)
    # parameters whose recorded values show no piece of the single-device parameter (each rank drew
    # numbers of its own): their layout was taken on a proposal, so it may show a difference but is
    # never the basis of ``verified``; one sentence each, naming the parameter
    unconfirmed: tuple[str, ...] = ()
    # pass -> why it was not run although the code has one (the backward the tool added raised
    # outside the code's own context): the verdict's passes line says so, not "not recorded"
    not_run: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    # per rank: value name -> the checked file's line that built the installed module (a layer built with
    # layout flags, a module given a parallel style) in whose forward the rank made it
    built: tuple[dict[str, int], ...] = field(default=(), hash=False, compare=False)
    # per rank: a gradient a custom autograd Function's backward returned as it was handed it (the same
    # tensor: no reduction, no scaling) -> the span of that ``return`` (the checked file's or the user's package's)
    handed_back: tuple[dict[str, Span], ...] = field(default=(), hash=False, compare=False)
    # per rank: a tensor a custom Function's forward (or a function it calls) returned as it was given it (the
    # same tensor, the same value) -> (the span of the line after which the reduction goes, the statement
    # before the innermost such ``return``; that ``return``'s line in the same file)
    forward_handed_back: tuple[dict[str, tuple[Span, int]], ...] = field(default=(), hash=False, compare=False)
    # the inputs example_inputs() made trainable were handed over as those leaves (the code accepts only
    # leaves); a re-run of the code with a counterexample hands them over the same way
    inputs_as_made: bool = field(default=False, hash=False, compare=False)
