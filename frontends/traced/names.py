"""Which SSA name each live tensor holds, guarded by torch's version counters.

A tensor keeps its name while its ``_version`` is the one recorded with that name.  Tensors
the recorder has seen are kept alive for the whole run, so a storage address can never be
reused by another tensor: the address key then finds tensors torch re-wraps on the way
(autograd's saved variables unpack as new tensor objects over the same storage).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Binding:
    name: str
    version: int
    pending: bool = False   # written by an op whose version bump torch applies after the mode returns


def _address(tensor: Any) -> tuple | None:
    try:
        return (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape),
                tuple(tensor.stride()), str(tensor.dtype))
    except (RuntimeError, NotImplementedError):
        return None


class NameTable:
    def __init__(self) -> None:
        self._by_id: dict[int, Binding] = {}
        self._by_address: dict[tuple, tuple[Binding, Any]] = {}
        self._alive: list[Any] = []
        self._count = 0
        self.shapes: dict[str, tuple[int, ...]] = {}   # name -> the shape torch gave its value

    def fresh(self, hint: str = "t") -> str:
        self._count += 1
        return f"{hint}{self._count}"

    def bind(self, tensor: Any, name: str, pending: bool = False) -> None:
        """``pending``: an in-place aten op just wrote ``tensor``; torch bumps ``_version`` (once)
        in the ADInplaceOrView kernel, which runs after the dispatch mode returns."""
        binding = Binding(name, int(tensor._version), pending)
        if name not in self.shapes:
            try:
                self.shapes[name] = tuple(int(d) for d in tensor.shape)
            except (RuntimeError, TypeError):   # a tensor without sizes (sparse, nested)
                pass
        if id(tensor) not in self._by_id:
            self._alive.append(tensor)
        self._by_id[id(tensor)] = binding
        address = _address(tensor)
        if address is not None:
            self._by_address[address] = (binding, tensor)

    def lookup(self, tensor: Any) -> Binding | None:
        """The binding of ``tensor`` by identity (stale or not); else adopt a same-address twin's.

        A twin (same storage, offset, shape, strides, dtype) made outside the dispatcher may have a
        version counter of its own: it takes the name only while the named tensor is unchanged.
        """
        binding = self._by_id.get(id(tensor))
        if binding is not None:
            return binding
        address = _address(tensor)
        entry = self._by_address.get(address) if address is not None else None
        if entry is None:
            return None
        twin_binding, twin = entry
        if int(twin._version) not in (twin_binding.version, twin_binding.version + int(twin_binding.pending)):
            return Binding(twin_binding.name, -1)   # the named value changed since: stale
        self.bind(tensor, twin_binding.name)
        return self._by_id[id(tensor)]

    def current(self, tensor: Any) -> str | None:
        """The tensor's name if its value is still the one recorded under that name."""
        binding = self.lookup(tensor)
        if binding is None:
            return None
        version = int(tensor._version)
        if binding.pending and version == binding.version + 1:
            self.bind(tensor, binding.name)
            return binding.name
        return binding.name if binding.version == version else None

    def is_stale(self, tensor: Any) -> bool:
        return self.lookup(tensor) is not None and self.current(tensor) is None
