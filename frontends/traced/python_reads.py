"""Reads of tensor values into Python that bypass torch's dispatcher.

``Tensor.tolist()`` copies the values in C++ without an op a dispatch mode sees, so a rank reading the
split sizes an all-to-all of counts delivered (``recv_counts.tolist()``, a mixture-of-experts
dispatch) would read a simulated collective's values unseen.  While a recorder runs, a call from code
that is not this tool's is reported to it as a data-dependent read, as ``.item()`` is.
"""
from __future__ import annotations

import contextlib
import os
import sys

_TOOL = tuple(os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), part, "")
              for part in ("frontends", "verifier"))


@contextlib.contextmanager
def reported_to(recorder):
    import torch

    original = torch.Tensor.tolist

    def tolist(tensor):
        caller = sys._getframe(1).f_code.co_filename
        if not recorder.paused and not os.path.abspath(caller).startswith(_TOOL):
            recorder.python_read("aten.tolist", tensor)
        return original(tensor)

    torch.Tensor.tolist = tolist
    try:
        yield
    finally:
        torch.Tensor.tolist = original
