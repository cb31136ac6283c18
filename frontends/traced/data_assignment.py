"""``tensor.data = other`` during a recording: the tensor now holds ``other``'s value.

The assignment swaps the tensor's storage in C++ without an aten op, so the dispatch-level
recorder would go on naming the tensor by what it held before (megatron-core's
``make_viewless_tensor`` makes ``torch.empty((1,))`` and then assigns the input's ``.data``: every
``TransformerLayer`` input passes through it).  A function mode sees the assignment (torch routes
the ``data`` setter through ``__torch_function__``) and gives the tensor the name of the value it
now holds.
"""
from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode

_DATA_SETTER = torch.Tensor.data.__set__


class FollowDataAssignment(TorchFunctionMode):
    def __init__(self, recorder) -> None:
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func == _DATA_SETTER and len(args) == 2 and isinstance(args[1], torch.Tensor):
            name = self.recorder.names.current(args[1])
            if name is not None:
                self.recorder.names.bind(args[0], name)
        return out
