"""A data-only format for what a child that ran user code hands back: JSON plus raw array bytes.

Nothing a child writes is ever unpickled: a child runs the user's code, so its answer is as
hostile as the code.  A message is

    b"VAW1" | u64 length of the JSON header | JSON header | u64 length of the blob | blob

The JSON header is the value with a few tagged forms: ``{"$t": [...]}`` a tuple,
``{"$d": [[k, v], ...]}`` a dict whose keys are not all strings, ``{"$f": "nan"}`` a float JSON
cannot spell, ``{"$a": [offset, dtype, shape]}`` a NumPy array whose bytes are in the blob, and
``{"$c": "Name", "v": {...}}`` an instance of one of the dataclasses the reader allows by name.
The reader checks everything against caps (bytes, nesting, array sizes, dtypes, field names)
and raises ``WireError`` with a sentence on the first thing that is not what it allows.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import math
import struct
import types
import typing
from typing import Any, BinaryIO, Iterable, Mapping

import numpy as np

MAGIC = b"VAW1"
MAX_HEADER_BYTES = 256 * 2**20
MAX_BLOB_BYTES = 1024 * 2**20
MAX_DEPTH = 200
_DTYPES = frozenset({"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                     "float16", "float32", "float64", "complex64", "complex128"})
_LENGTH = struct.Struct("<Q")


class WireError(ValueError):
    """The bytes are not a message this reader accepts."""


def encode(value: Any) -> bytes:
    """``value`` (None, bool, int, float, str, tuples, lists, dicts, NumPy arrays and scalars,
    dataclass instances) as one message."""
    blob = bytearray()
    header = json.dumps(_to_json(value, blob, 0), allow_nan=False, separators=(",", ":")).encode()
    return MAGIC + _LENGTH.pack(len(header)) + header + _LENGTH.pack(len(blob)) + bytes(blob)


def _to_json(value: Any, blob: bytearray, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise WireError("nested too deeply")
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else {"$f": repr(value)}
    if isinstance(value, np.ndarray):
        array = value if value.flags.c_contiguous else value.copy(order="C")  # 0-d stays 0-d
        if array.dtype.name not in _DTYPES:
            raise WireError(f"arrays of {array.dtype} are not carried")
        offset = len(blob)
        blob.extend(array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes())
        return {"$a": [offset, array.dtype.name, list(array.shape)]}
    if isinstance(value, np.generic):
        return _to_json(value.item(), blob, depth)
    if isinstance(value, tuple):
        return {"$t": [_to_json(item, blob, depth + 1) for item in value]}
    if isinstance(value, list):
        return [_to_json(item, blob, depth + 1) for item in value]
    if isinstance(value, dict):
        if all(isinstance(key, str) and not key.startswith("$") for key in value):
            return {key: _to_json(item, blob, depth + 1) for key, item in value.items()}
        return {"$d": [[_to_json(k, blob, depth + 1), _to_json(v, blob, depth + 1)] for k, v in value.items()]}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: _to_json(getattr(value, f.name), blob, depth + 1) for f in dataclasses.fields(value)}
        return {"$c": type(value).__name__, "v": fields}
    raise WireError(f"a {type(value).__name__} is not carried")


def decode(data: bytes, classes: Iterable[type] = ()) -> Any:
    """The value of one message; dataclasses only of ``classes`` (matched by name)."""
    value, end = _decode_at(memoryview(data), 0, {cls.__name__: cls for cls in classes})
    if end != len(data):
        raise WireError(f"{len(data) - end} bytes after the message")
    return value


def decode_stream(data: bytes, classes: Iterable[type] = (), check=None) -> tuple[list[Any], WireError | None]:
    """The messages of a stream written by ``write`` calls, up to the first one that is not
    readable (or that ``check`` refuses), and the reason reading stopped there (None: it did not)."""
    allowed = {cls.__name__: cls for cls in classes}
    view, offset, values = memoryview(data), 0, []
    while offset < len(data):
        try:
            value, offset = _decode_at(view, offset, allowed)
            if check is not None:
                check(value)
        except WireError as error:
            return values, error
        values.append(value)
    return values, None


def write(stream: BinaryIO, value: Any) -> None:
    stream.write(encode(value))
    stream.flush()


def _decode_at(view: memoryview, offset: int, allowed: Mapping[str, type]) -> tuple[Any, int]:
    if bytes(view[offset:offset + 4]) != MAGIC:
        raise WireError("not a result message (bad magic)")
    header_length, offset = _length(view, offset + 4, MAX_HEADER_BYTES, "header")
    header = bytes(view[offset:offset + header_length])
    offset += header_length
    blob_length, offset = _length(view, offset, MAX_BLOB_BYTES, "array data")
    blob = view[offset:offset + blob_length]
    try:
        tree = json.loads(header)
    except (ValueError, RecursionError) as error:
        raise WireError(f"the header is not JSON ({error.__class__.__name__})") from None
    try:
        return _from_json(tree, blob, allowed, 0), offset + blob_length
    except RecursionError:
        raise WireError("nested too deeply") from None


def _length(view: memoryview, offset: int, cap: int, what: str) -> tuple[int, int]:
    if offset + 8 > len(view):
        raise WireError(f"cut off before the {what} length")
    (length,) = _LENGTH.unpack(view[offset:offset + 8])
    if length > cap:
        raise WireError(f"{what} of {length} bytes is over the cap of {cap}")
    if offset + 8 + length > len(view):
        raise WireError(f"cut off inside the {what}")
    return length, offset + 8


def _from_json(node: Any, blob: memoryview, allowed: Mapping[str, type], depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise WireError("nested too deeply")
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    if isinstance(node, list):
        return [_from_json(item, blob, allowed, depth + 1) for item in node]
    if not isinstance(node, dict):
        raise WireError(f"unexpected {type(node).__name__}")
    tags = [key for key in node if key.startswith("$")]
    if not tags:
        return {key: _from_json(item, blob, allowed, depth + 1) for key, item in node.items()}
    tag = tags[0]
    if tag == "$t" and len(node) == 1 and isinstance(node[tag], list):
        return tuple(_from_json(item, blob, allowed, depth + 1) for item in node[tag])
    if tag == "$d" and len(node) == 1 and isinstance(node[tag], list):
        pairs = node[tag]
        if not all(isinstance(pair, list) and len(pair) == 2 for pair in pairs):
            raise WireError("a dict entry is not a key-value pair")
        items = [(_from_json(k, blob, allowed, depth + 1), _from_json(v, blob, allowed, depth + 1)) for k, v in pairs]
        try:
            return dict(items)
        except TypeError:
            raise WireError("a dict key is not hashable") from None
    if tag == "$f" and len(node) == 1 and node[tag] in ("nan", "inf", "-inf"):
        return float(node[tag])
    if tag == "$a" and len(node) == 1:
        return _array(node[tag], blob)
    if tag == "$c" and set(node) == {"$c", "v"} and isinstance(node["v"], dict):
        return _instance(node["$c"], node["v"], blob, allowed, depth)
    raise WireError(f"unknown form {tag}")


def _array(spec: Any, blob: memoryview) -> np.ndarray:
    if not (isinstance(spec, list) and len(spec) == 3 and isinstance(spec[0], int) and spec[1] in _DTYPES
            and isinstance(spec[2], list) and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                                  for d in spec[2])):
        raise WireError("an array description is malformed")
    offset, name, shape = spec
    dtype = np.dtype(name).newbyteorder("<")
    count = math.prod(shape)
    nbytes = count * dtype.itemsize
    if offset < 0 or nbytes > len(blob) or offset > len(blob) - nbytes:
        raise WireError("an array lies outside the array data")
    return np.frombuffer(blob[offset:offset + nbytes], dtype=dtype).astype(np.dtype(name)).reshape(shape)


def _instance(name: Any, fields: dict, blob: memoryview, allowed: Mapping[str, type], depth: int) -> Any:
    cls = allowed.get(name) if isinstance(name, str) else None
    if cls is None:
        raise WireError(f"a {name!r} is not a type this reader accepts")
    known = {f.name for f in dataclasses.fields(cls) if f.init}
    if not set(fields) <= known:
        raise WireError(f"{name} has no field {sorted(set(fields) - known)[0]!r}")
    values = {key: _from_json(item, blob, allowed, depth + 1) for key, item in fields.items()}
    try:
        return cls(**values)
    except (TypeError, ValueError) as error:
        raise WireError(f"{name} cannot be built from the message ({error})") from None


def check_types(value: Any) -> None:
    """Raise ``WireError`` unless every field of every dataclass in ``value`` holds what its type
    hints say (``Any`` accepts anything): a message can be well-formed and still not a program."""
    _check(value, type(value), "the result")


@functools.lru_cache(maxsize=None)
def _field_hints(cls: type) -> tuple[tuple[str, Any], ...]:
    """A dataclass's resolved field types (resolving them is the slow part of a check)."""
    return tuple(typing.get_type_hints(cls).items())


def _check(value: Any, hint: Any, where: str) -> None:
    if hint is Any or hint is object:
        return
    origin, arguments = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        for option in arguments:
            try:
                _check(value, option, where)
                return
            except WireError:
                continue
        raise WireError(f"{where} is a {type(value).__name__}, not a {hint}")
    if hint is type(None):
        if value is not None:
            raise WireError(f"{where} is not None")
        return
    if origin is tuple:
        if not isinstance(value, tuple):
            raise WireError(f"{where} is not a tuple")
        items = arguments[:1] * len(value) if len(arguments) == 2 and arguments[1] is Ellipsis else arguments
        if len(items) != len(value):
            raise WireError(f"{where} has {len(value)} items, not {len(items)}")
        for index, (item, item_hint) in enumerate(zip(value, items)):
            _check(item, item_hint, f"{where}[{index}]")
        return
    if origin in (list, dict):
        if not isinstance(value, origin):
            raise WireError(f"{where} is not a {origin.__name__}")
        if origin is list:
            for index, item in enumerate(value):
                _check(item, arguments[0] if arguments else Any, f"{where}[{index}]")
        else:
            for key, item in value.items():
                _check(key, arguments[0] if arguments else Any, f"a key of {where}")
                _check(item, arguments[1] if arguments else Any, f"{where}[{key!r}]")
        return
    if dataclasses.is_dataclass(hint):
        if type(value) is not hint:
            raise WireError(f"{where} is a {type(value).__name__}, not a {hint.__name__}")
        for name, field_hint in _field_hints(hint):
            _check(getattr(value, name), field_hint, f"{where}.{name}")
        return
    if isinstance(hint, type):
        if hint is float and isinstance(value, int) and not isinstance(value, bool):
            return
        if not isinstance(value, hint) or (hint is int and isinstance(value, bool)):
            raise WireError(f"{where} is a {type(value).__name__}, not a {hint.__name__}")
        return
    raise WireError(f"{where}: cannot check against {hint}")
