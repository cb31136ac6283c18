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


def _address(tensor: Any) -> tuple | None:
    try:
        return (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape),
                tuple(tensor.stride()), str(tensor.dtype))
    except (RuntimeError, NotImplementedError):
        return None


class NameTable:
    def __init__(self) -> None:
        self._by_id: dict[int, Binding] = {}
        self._by_address: dict[tuple, Binding] = {}
        self._alive: list[Any] = []
        self._count = 0

    def fresh(self, hint: str = "t") -> str:
        self._count += 1
        return f"{hint}{self._count}"

    def bind(self, tensor: Any, name: str) -> None:
        binding = Binding(name, int(tensor._version))
        if id(tensor) not in self._by_id:
            self._alive.append(tensor)
        self._by_id[id(tensor)] = binding
        address = _address(tensor)
        if address is not None:
            self._by_address[address] = binding

    def lookup(self, tensor: Any) -> Binding | None:
        """The binding of ``tensor`` (by identity, else by storage address), stale or not."""
        binding = self._by_id.get(id(tensor))
        if binding is None:
            address = _address(tensor)
            binding = self._by_address.get(address) if address is not None else None
        return binding

    def current(self, tensor: Any) -> str | None:
        """The tensor's name if its value is still the one recorded under that name."""
        binding = self.lookup(tensor)
        if binding is None or binding.version != int(tensor._version):
            return None
        return binding.name

    def is_stale(self, tensor: Any) -> bool:
        binding = self.lookup(tensor)
        return binding is not None and binding.version != int(tensor._version)
