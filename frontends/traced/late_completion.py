"""Every async result lands at its ``wait()``: the latest completion torch.distributed allows.

Between ``work = dist.all_reduce(t, async_op=True)`` and ``work.wait()`` the buffers an op writes belong
to the communication library, and what a read sees there depends on timing: gloo often has the result
in place already, so a real run rarely shows a read before ``wait()``.  To confirm such a race the
confirmation child (``confirm_child.py``, ``late_async``) runs the ranks with each async op (collectives
called with ``async_op=True``, ``irecv``) issued for real at once, in the same order, but into copies of
the tensors it writes: the copies go into the user's tensors when the handle is waited on, never when
nothing waits on it.  A read before the wait sees the tensor as it was, which torch allows; matching and
order are the program's own, so no deadlock is added.  Sends and ``batch_isend_irecv`` run as written.
"""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

# each async op -> the argument it writes (a tensor, or a list of tensors)
WRITES = {"all_reduce": "tensor", "broadcast": "tensor", "reduce": "tensor", "scatter": "tensor",
          "all_gather_into_tensor": "output_tensor", "_all_gather_base": "output_tensor",
          "reduce_scatter_tensor": "output", "_reduce_scatter_base": "output", "reduce_scatter": "output",
          "all_to_all_single": "output", "all_gather": "tensor_list", "all_to_all": "output_tensor_list",
          "gather": "gather_list", "irecv": "tensor"}


class LateWork:
    """The handle of an async op here: waiting on it waits on the real op, then writes its result."""

    def __init__(self, work: Any, copies: list[tuple[Any, Any]]) -> None:
        self._work, self._copies, self._done = work, copies, False

    def _complete(self) -> None:
        if self._done:
            return
        import torch

        self._done = True
        self._work.wait()
        with torch.no_grad():
            for target, copy in self._copies:
                target.copy_(copy)

    def wait(self, timeout: Any = None) -> bool:
        self._complete()
        return True

    def synchronize(self) -> None:
        self._complete()

    def is_completed(self) -> bool:
        return self._done

    def is_success(self) -> bool:
        return self._done

    def exception(self) -> None:
        return None

    def get_future(self):
        import torch

        self._complete()
        future = torch.futures.Future()
        future.set_result([target for target, _ in self._copies])
        return future

    def __getattr__(self, name: str) -> Any:   # what else the real handle offers (``_source_rank``)
        return getattr(self._work, name)


def complete_at_wait() -> None:
    """From now on in this process, ``torch.distributed``'s async ops write their results at ``wait()``.
    Install before the user's code is imported, so that names it binds at import
    (``all_gather_func = torch.distributed.all_gather_into_tensor``) are these."""
    import torch.distributed as dist

    c10d = dist.distributed_c10d
    for name, written in WRITES.items():
        real = getattr(c10d, name, None)
        if real is None:
            continue
        late = _written_at_wait(real, written)
        setattr(c10d, name, late)
        if getattr(dist, name, None) is real:
            setattr(dist, name, late)


def _written_at_wait(real: Callable, argument: str) -> Callable:
    import torch

    signature = inspect.signature(real)
    always_async = "async_op" not in signature.parameters   # irecv

    @functools.wraps(real)
    def late(*args, **kwargs):
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return real(*args, **kwargs)
        written = bound.arguments.get(argument)
        targets = list(written) if isinstance(written, (list, tuple)) else [written]
        if not (always_async or bound.arguments.get("async_op")) or \
                not targets or not all(isinstance(t, torch.Tensor) for t in targets):
            return real(*args, **kwargs)
        copies = [t.detach().clone() for t in targets]
        bound.arguments[argument] = copies if isinstance(written, (list, tuple)) else copies[0]
        work = real(*bound.args, **bound.kwargs)
        return None if work is None else LateWork(work, list(zip(targets, copies)))

    return late
