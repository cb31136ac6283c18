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
    serial: int = 0         # the order of bindings: a later binding of the same memory holds its latest value


def _address(tensor: Any) -> tuple | None:
    try:
        return (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape),
                tuple(tensor.stride()), str(tensor.dtype))
    except (RuntimeError, NotImplementedError):
        return None


def _unchanged(tensor: Any, binding: Binding) -> bool:
    """``tensor`` still holds the value ``binding`` names (its counter as bound, or one pending bump on)."""
    return int(tensor._version) in (binding.version, binding.version + int(binding.pending))


class NameTable:
    def __init__(self) -> None:
        self._by_id: dict[int, Binding] = {}
        self._by_address: dict[tuple, tuple[Binding, Any]] = {}
        self._alive: list[Any] = []
        self._count = 0
        self._serial = 0
        self.shapes: dict[str, tuple[int, ...]] = {}   # name -> the shape torch gave its value

    def fresh(self, hint: str = "t") -> str:
        self._count += 1
        return f"{hint}{self._count}"

    def bind(self, tensor: Any, name: str, pending: bool = False, by_address: bool = True,
             version: int | None = None) -> None:
        """``pending``: an in-place aten op just wrote ``tensor``; torch bumps ``_version`` (once)
        in the ADInplaceOrView kernel, which runs after the dispatch mode returns.  ``by_address``
        False: an alias of a named tensor, which keeps the address (and its version counter) for twins.
        ``version``: the counter ``tensor`` will have (a view's is its base's, shared only after the
        dispatch mode returns)."""
        self._serial += 1
        binding = Binding(name, int(tensor._version) if version is None else version, pending, self._serial)
        if name not in self.shapes:
            try:
                self.shapes[name] = tuple(int(d) for d in tensor.shape)
            except (RuntimeError, TypeError):   # a tensor without sizes (sparse, nested)
                pass
        if id(tensor) not in self._by_id:
            self._alive.append(tensor)
        self._by_id[id(tensor)] = binding
        address = _address(tensor) if by_address else None
        if address is not None:
            self._by_address[address] = (binding, tensor)

    def mark_stale(self, keys: set[int]) -> None:
        """The tensors of these ids were written without torch counting it: their names are out of date."""
        self._serial += 1   # newer than every binding: no earlier twin may stand in for them
        for key in keys & self._by_id.keys():
            self._by_id[key] = Binding(self._by_id[key].name, -1, False, self._serial)
        for address, (twin_binding, twin) in list(self._by_address.items()):
            if id(twin) in keys:
                self._by_address[address] = (Binding(twin_binding.name, -1, False, self._serial), twin)

    def lookup(self, tensor: Any) -> Binding | None:
        """The binding of ``tensor`` by identity (stale or not); else adopt a same-address twin's.

        A twin (same storage, offset, shape, strides, dtype) made outside the dispatcher may have a
        version counter of its own: it takes the name only while the named tensor is unchanged.
        """
        binding = self._by_id.get(id(tensor))
        if binding is not None and int(tensor._version) >= binding.version:
            return self._written_through_twin(tensor, binding) or binding
        if binding is not None:
            # a version counter never goes down: torch gave this tensor a new one (``.data`` does, to
            # the alias it made through the dispatcher), so its binding says nothing now; the
            # same-address twin whose counter it was decides, as for any tensor made outside
            del self._by_id[id(tensor)]
        entry = self._twin(tensor)
        if entry is None:
            return None
        twin_binding, twin = entry
        if not _unchanged(twin, twin_binding):
            return Binding(twin_binding.name, -1)   # the named value changed since: stale
        self.bind(tensor, twin_binding.name)
        return self._by_id[id(tensor)]

    def _written_through_twin(self, tensor: Any, binding: Binding) -> Binding | None:
        """The same memory bound later through another tensor object (``weight.data.copy_(w)`` writes
        through an alias with a version counter of its own, so ``weight``'s counter does not move):
        the memory holds that later value, so ``tensor`` takes its name."""
        entry = self._twin(tensor)
        if entry is None or entry[1] is tensor or entry[0].serial <= binding.serial:
            return None
        twin_binding, twin = entry
        if not _unchanged(twin, twin_binding):
            return None
        self.bind(tensor, twin_binding.name, by_address=False)
        return self._by_id[id(tensor)]

    def _twin(self, tensor: Any) -> tuple[Binding, Any] | None:
        """The last binding of ``tensor``'s memory (same storage, offset, shape, strides, dtype) and its tensor."""
        address = _address(tensor)
        return self._by_address.get(address) if address is not None else None

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
