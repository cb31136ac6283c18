"""Hold a harness to building arguments: the entry it returns is the user's own, and none of its code runs
while the entry is recorded.

A harness (``--harness FILE.py``, or one an LLM wrote) builds the entry and its inputs; the verdict must
rest on the user's code.  Checked in the child, around the harness call and the recorded run:

1. **identity**: the entry is the very object the user's module held under its name *before* the harness
   ran (a class of the same name defined elsewhere is another object, whatever its ``__name__``,
   ``__module__`` or ``__qualname__`` say); a module entry is an instance of exactly that class, and no
   attribute of the instance (or of its submodules) shadows one of its class's methods;
2. **nothing replaced**: the functions and classes of the user's module and of its package's modules, the
   methods of the user's classes, and the callables of torch's namespaces (``torch``,
   ``torch.nn.functional``, ``torch.distributed``, ``torch.Tensor``, ``torch.nn.Module``) are the same
   objects after the harness ran as before;
3. **no harness code in the run**: a profile hook sees every Python call of the recorded forward and
   backward; a call into the harness's file refuses the run (a subclass, a wrapped forward, a callable
   handed to the entry as an argument, a submodule of its own making);
4. **no code made at run time**: while the harness builds, an audit hook refuses ``exec``, ``compile``
   and code objects made by the harness's own lines (such code would not carry the harness's file name).

Not checked: a harness that builds the entry and then swaps one of its submodules for another
*library* module (no harness code runs, no namespace changes).  A refusal is final for that harness.
"""
from __future__ import annotations

import contextlib
import inspect
import os
import sys
import warnings
from typing import Any, Iterator

_TORCH_NAMESPACES = ("torch", "torch.nn.functional", "torch.distributed", "torch.distributed.distributed_c10d",
                     "torch.distributed.nn.functional", "torch.autograd")


# instance attributes that shadow a method without changing what the module computes (transformers'
# tensor-parallel hooks set ``module.__repr__`` to print the plan)
_PRESENTATION = frozenset({"__repr__", "__str__", "extra_repr"})


class HarnessRefused(Exception):
    """The harness did more than build arguments; the message says what (one sentence)."""


# Code the harness makes at run time (exec, compile, a code object built by hand) would not carry the
# harness's file name, so the watch of the recorded run could not see it run: refused while it builds.
_MAKES_CODE = frozenset({"compile", "exec", "code.__new__"})
_BUILDING: list[str] = []          # the harness file whose code is building the entry right now
_MADE_CODE: list[str] = []         # what it did, said in the refusal
_HOOKED: list[bool] = []


def _audit(event: str, args: tuple) -> None:
    if not _BUILDING or event not in _MAKES_CODE or _MADE_CODE:
        return
    caller = sys._getframe(1)
    if os.path.realpath(caller.f_code.co_filename) != _BUILDING[-1]:
        return   # an import, a dataclass or a namedtuple the harness uses: their own code
    what = "a code object built" if event == "code.__new__" else "exec or compile"
    _MADE_CODE.append(f"{what} at its line {caller.f_lineno}")


def _callables(namespace: dict) -> dict[str, int]:
    return {name: id(value) for name, value in list(namespace.items())
            if inspect.isfunction(value) or inspect.isclass(value) or inspect.isbuiltin(value)
            or inspect.ismethod(value) or isinstance(value, (staticmethod, classmethod))}


def _holds_live(value: Any) -> bool:
    return inspect.isfunction(value) or inspect.isclass(value) or inspect.isbuiltin(value) \
        or inspect.ismethod(value) or isinstance(value, (staticmethod, classmethod))


class HarnessGuard:
    """Snapshot before the harness runs (``HarnessGuard(module, harness_file)``), then ``check_entry``,
    ``check_unchanged`` and ``watch`` around the recorded run."""

    def __init__(self, user_module, harness_file: str) -> None:
        self.harness_file = os.path.realpath(harness_file)
        self.user_module = user_module
        self.defined = dict(vars(user_module))      # the objects themselves: identity, not names
        self.snapshot = self._take()
        # the values are kept alive by ``self.defined`` and the live namespaces: ids stay unique
        self._kept = [value for value in self.defined.values() if _holds_live(value)]

    def _watched(self) -> Iterator[tuple[str, dict]]:
        module = self.user_module
        yield module.__name__, vars(module)
        package = (getattr(module, "__package__", None) or "").split(".")[0]
        for name, loaded in sorted(sys.modules.items()):
            if package and loaded is not None and loaded is not module \
                    and (name == package or name.startswith(package + ".")):
                with contextlib.suppress(TypeError):
                    yield name, vars(loaded)
        import torch

        classes = [value for value in list(vars(module).values()) if inspect.isclass(value)]
        classes += [value for value in vars(torch.nn).values() if inspect.isclass(value)]
        for value in classes:
            yield f"{getattr(value, '__module__', '?')}.{value.__qualname__}", dict(vars(value))
        for name in _TORCH_NAMESPACES:
            loaded = sys.modules.get(name)
            if loaded is not None:
                yield name, vars(loaded)

        yield "torch.Tensor", dict(vars(torch.Tensor))
        yield "torch.nn.Module", dict(vars(torch.nn.Module))

    def _take(self) -> dict[str, dict[str, int]]:
        with warnings.catch_warnings():   # torch.distributed's deprecated names warn when looked at
            warnings.simplefilter("ignore")
            return {name: _callables(namespace) for name, namespace in self._watched()}

    def check_unchanged(self) -> None:
        """Refuse when a function or class the harness could swap is another object now."""
        now = self._take()
        for where, before in self.snapshot.items():
            after = now.get(where, {})
            for name, identity in before.items():
                if after.get(name) != identity:
                    raise HarnessRefused(f"the harness replaced {where}.{name}: a harness only builds the entry "
                                         f"and its inputs, it may not change the code that is verified")

    def check_entry(self, entry: Any, name: str | None) -> str:
        """The entry's name in the user's module; refuse an entry that is not the user's own object."""
        import torch

        own = {id(value): key for key, value in self.defined.items() if _holds_live(value)}
        if isinstance(entry, torch.nn.Module):
            kind, identity = type(entry), id(type(entry))
        elif callable(entry):
            kind, identity = entry, id(entry)
        else:
            raise HarnessRefused(f"the harness returned a {type(entry).__name__} as the entry: expected an "
                                 f"nn.Module built from the file's class, or the file's function")
        found = own.get(identity)
        label = getattr(kind, "__qualname__", type(kind).__name__)
        if found is None:
            where = self._origin(kind)
            raise HarnessRefused(f"the entry the harness returned ({label}{where}) is not an object of "
                                 f"{self._shown()}: a harness must build the file's own class or call its "
                                 f"own function")
        if name is not None and found != name.split("(")[0].strip():
            raise HarnessRefused(f"the harness returned {found}, but the entry asked for is {name}")
        if isinstance(entry, torch.nn.Module):
            self._no_shadowed_methods(entry)
        return found

    def _no_shadowed_methods(self, entry) -> None:
        for path, module in entry.named_modules():
            cls = type(module)
            for attribute, value in vars(module).items():
                if attribute in _PRESENTATION:   # how the module prints: never part of what it computes
                    continue
                declared = inspect.getattr_static(cls, attribute, None)
                if inspect.isfunction(declared) and value is not declared:
                    where = f"{path}." if path else ""
                    raise HarnessRefused(f"the harness set {where}{attribute} on the instance, hiding the "
                                         f"method of {cls.__qualname__}: the code verified must be the class's own")

    def _origin(self, obj: Any) -> str:
        code = getattr(getattr(obj, "__init__", None), "__code__", None) or getattr(obj, "__code__", None)
        if code is None and inspect.isclass(obj):
            for value in vars(obj).values():
                code = getattr(value, "__code__", None)
                if code is not None:
                    break
        if code is not None and os.path.realpath(code.co_filename) == self.harness_file:
            return ", defined in the harness"
        return ""

    def _shown(self) -> str:
        file = getattr(self.user_module, "__file__", None)
        return f"the file {os.path.basename(file)}" if file else "the file"

    @contextlib.contextmanager
    def building(self) -> Iterator[None]:
        """Around the harness's import and call: refuse code it makes at run time (an audit hook, which
        Python never removes: installed once, active only inside this block)."""
        if not _HOOKED:
            sys.addaudithook(_audit)
            _HOOKED.append(True)
        _BUILDING.append(self.harness_file)
        _MADE_CODE.clear()
        try:
            yield
        finally:
            _BUILDING.pop()
        if _MADE_CODE:
            made = _MADE_CODE[0]
            _MADE_CODE.clear()
            raise HarnessRefused(f"the harness makes code at run time ({made}), which could hide what runs in "
                                 f"the entry: a harness builds arguments with the code it shows")

    @contextlib.contextmanager
    def watch(self) -> Iterator[None]:
        """Refuse, after the block, when any code of the harness's file ran inside it."""
        target, seen = self.harness_file, []
        names: dict[str, bool] = {}

        def profile(frame, event, arg):
            if event != "call" or seen:
                return
            filename = frame.f_code.co_filename
            known = names.get(filename)
            if known is None:
                known = names[filename] = os.path.realpath(filename) == target
            if known:
                seen.append((frame.f_code.co_name, frame.f_lineno))

        previous = sys.getprofile()
        sys.setprofile(profile)
        try:
            yield
        finally:
            sys.setprofile(previous)
        if seen:
            name, line = seen[0]
            raise HarnessRefused(f"the harness's own code ran inside the recorded entry ({name} at line {line} of "
                                 f"the harness): the verdict would be about the harness, not your code")
