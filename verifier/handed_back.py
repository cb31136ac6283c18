"""The custom backward that passed a gradient on as it was handed it, where the gradient goes wrong.

The recording (``TracedProgram.handed_back``) says which gradient values a custom autograd Function's
backward returned as the very tensor it was given (no reduction, no scaling), and the line of that
``return`` in the checked file or the user's own package.  Two findings name that ``return``:

- every rank's compared gradient is a partial sum of one device's (the ranks' values sum to it) and it
  is, up to ops that only pass it on, a value such a backward handed back: the backward passed a partial
  sum on where the reduction over the ranks belongs (a copy to the parallel region whose backward does
  not all-reduce);
- the first op whose values go wrong reads, through ops that only pass it on, a value such a backward
  handed back, and every value it makes is the world size times one device's: the backward passed its
  gradient on where the division by the world size belongs (an average over the ranks whose backward
  does not divide).

The forward's counterpart (``TracedProgram.forward_handed_back``): a custom Function's forward, or a
function it calls, that returned the very tensor it was given with the value it was given.  When every
rank's compared output is a partial sum of one device's and is, up to ops that only pass it on, such a
returned value, or the first op that goes wrong reads such returned values holding partial sums (a bias
added after the reduce), the finding is named where the reduction over the ranks belongs: after the
statement before the innermost such ``return`` (a reduce from the parallel region whose ``_reduce`` does
not all-reduce; the line after which a restored ``dist.all_reduce`` goes).

A backward or forward in installed code is never recorded (its line is not the user's to change).
"""
from __future__ import annotations

from .ir import Op, Span

# ops that hand their one tensor operand on as it is, or reshaped (a gradient's view, expand or copy)
_PASSING = ("aten.view.", "aten._unsafe_view.", "aten.alias.", "aten.reshape.", "aten.detach.", "aten.clone.",
            "aten.contiguous.", "aten.expand.", "aten.squeeze.", "aten.unsqueeze.")


def _handed(name: str | None, handed_back: dict[str, Span], producer: dict[str, Op]) -> Span | None:
    """The ``return`` that handed ``name`` back, or the value ``name`` passes on (through ops that only
    pass their operand on: a view, an expand, the copy torch makes of an input's gradient)."""
    for _ in range(8):
        if name is None:
            return None
        if name in handed_back:
            return handed_back[name]
        made = producer.get(name)
        if made is None or not made.args:
            return None
        if made.kind.startswith("aten.copy_."):
            name = made.args[-1]
        elif made.kind.startswith(_PASSING) and len(made.args) == 1:
            name = made.args[0]
        else:
            return None
    return None


def unchanged_backward(handed_back: dict[str, Span], ops: tuple[Op, ...], label: str, compared: str | None,
                       culprit: Op | None, terms: bool, scaled: bool) -> Op | None:
    """The finding's culprit at the ``return`` of the custom backward that handed the gradient back
    unchanged (module docstring), or None.  ``compared``: the rank's value of the compared gradient
    ``label``; ``culprit``: the first op whose values go wrong; ``terms``: every rank's compared value is
    a term of one device's; ``scaled``: the rank's compared value is the world size times one device's."""
    if not handed_back:
        return None
    producer = {name: op for op in ops for name in op.results}
    if terms:
        span = _handed(compared, handed_back, producer)
        if span is not None:
            kind = (f"the return of a custom backward that hands its gradient back as it was handed it: every rank's "
                    f"{label} is a partial sum of one device's, passed on there unreduced; the reduction over the "
                    f"ranks belongs in that backward")
            return Op((compared,), kind, (), {}, span)
    if scaled and culprit is not None and any(o is culprit for o in ops):
        spans = {_handed(name, handed_back, producer) for name in culprit.args}
        spans.discard(None)
        if len(spans) == 1:
            kind = (f"the return of a custom backward that hands its gradient back as it was handed it, read by "
                    f"{culprit.kind} ({culprit.span.where()}): every rank's {label} is the world size times one "
                    f"device's; the division by the world size belongs in that backward")
            return Op(culprit.results, kind, (), {}, spans.pop())
    return None


def unreduced_forward(handed_back: dict[str, tuple[Span, int]], ops: tuple[Op, ...], label: str,
                      compared: str | None, terms: bool, culprit: Op | None = None,
                      read: list[str] | tuple[str, ...] = ()) -> Op | None:
    """The finding's culprit where the reduction a custom Function's forward (or a function it calls) left
    out belongs: after the statement before the ``return`` that handed its input back as it was given it
    (module docstring; ``handed_back``: value -> (that line's span, the return's line)), or None.  When every
    rank's compared ``label`` (its value ``compared``) is a partial sum of one device's (``terms``) and passes
    that returned value on; or when the first op that goes wrong (``culprit``) reads partial sums of one
    device's values (``read``) and they all pass on values one such ``return`` handed back."""
    if not handed_back:
        return None
    producer = {name: op for op in ops for name in op.results}
    found, results, reader = None, (compared,), ""
    if terms:
        found = _handed(compared, handed_back, producer)
    if found is None and culprit is not None and read:
        held = {_handed(name, handed_back, producer) for name in read}
        if len(held) == 1 and None not in held:
            found, results = held.pop(), culprit.results or tuple(read)
            if any(o is culprit for o in ops):   # an op of the recording (not a finding made of one)
                reader = f", read by {culprit.kind} ({culprit.span.where()})"
    if found is None:
        return None
    span, returned = found
    at = span.within[1] if span.within is not None else span.line
    where = f"after line {at}, before that return" if at != returned else "before that return"
    kind = (f"the return at line {returned} of a custom Function's forward (or a function it calls) that hands its "
            f"input back as it was given it{reader}: every rank's value there is a partial sum of one device's, "
            f"passed on unreduced toward the {label}; the reduction over the ranks belongs {where}")
    return Op(results, kind, (), {}, span)
