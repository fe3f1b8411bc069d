"""Records to JSON and back, by their type hints: how a snapshot dump writes the cache's records.

``encode`` turns a frozen dataclass (and what it holds: str, int, float, bool, None, enums,
tuples, frozensets, string-keyed mappings, other dataclasses) into JSON values; ``decode``
rebuilds it from the class and those values, reading the annotations of each field, so the
records need no hand-written (de)serialisers and a field added to one is dumped with it.
Every field is written, those left out of equality (a pod's resourceVersion) too.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

_T = TypeVar("_T")


class CodecError(ValueError):
    """A value that does not fit the type it is read as (a dump from another plumb version)."""


def encode(value: Any) -> Any:
    """``value`` as JSON values (see the module doc for what it may hold)."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, enum.Enum):
        return encode(value.value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(key): encode(item) for key, item in value.items()}
    if isinstance(value, frozenset | set):
        return sorted((encode(item) for item in value), key=repr)
    if isinstance(value, tuple | list):
        return [encode(item) for item in value]
    raise CodecError(f"cannot encode a {type(value).__name__}")


def decode(kind: type[_T], data: Any) -> _T:
    """The ``kind`` that ``encode`` wrote as ``data``."""
    return typing.cast(_T, _decode(kind, data, kind.__name__))


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _decode(hint: Any, data: Any, where: str) -> Any:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is Any:
        return data
    if origin in (types.UnionType, typing.Union):
        if data is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        if len(options) != 1:
            raise CodecError(f"{where}: cannot decode a union of {options}")
        return _decode(options[0], data, where)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        if not isinstance(data, Mapping):
            raise CodecError(f"{where}: expected an object for {hint.__name__}")
        hints = _hints(hint)
        values = {
            f.name: _decode(hints[f.name], data[f.name], f"{where}.{f.name}")
            for f in dataclasses.fields(hint)
            if f.init and f.name in data
        }
        return hint(**values)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return hint(data)
    if hint in (str, int, float, bool):
        if not isinstance(data, hint) and not (hint is float and isinstance(data, int)):
            raise CodecError(f"{where}: expected {hint.__name__}, got {data!r}")
        return data
    if origin is tuple:
        if not isinstance(data, list):
            raise CodecError(f"{where}: expected an array")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_decode(args[0], item, f"{where}[]") for item in data)
        return tuple(_decode(a, item, f"{where}[]") for a, item in zip(args, data, strict=True))
    if origin is frozenset:
        return frozenset(_decode(args[0], item, f"{where}[]") for item in data)
    if origin in (Mapping, dict):
        if not isinstance(data, Mapping):
            raise CodecError(f"{where}: expected an object")
        decoded = {str(k): _decode(args[1], v, f"{where}.{k}") for k, v in data.items()}
        return types.MappingProxyType(decoded) if origin is not dict else decoded
    raise CodecError(f"{where}: cannot decode {hint!r}")
