"""Records to JSON and back, by their type hints: how a snapshot dump writes the cache's records.

``encode`` turns a frozen dataclass (and what it holds: str, int, float, bool, None, enums,
fractions, tuples, frozensets, mappings, other dataclasses) into JSON values; ``decode``
rebuilds it from the class and those values, reading the annotations of each field, so the
records need no hand-written (de)serialisers and a field added to one is dumped with it.
Every field is written, those left out of equality (a pod's resourceVersion) too.

A mapping whose keys are not all strings (a device id, a tuple) is written as a list of
[key, value] pairs; a Fraction as its text ("3/2"). A union of several types (a device
attribute's value) is read as the first of them the value fits, in the order the annotation
names them: an empty list is read as the first tuple type named.
"""

from __future__ import annotations

import dataclasses
import enum
import fractions
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
    if isinstance(value, fractions.Fraction):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        if all(isinstance(key, str) for key in value):
            return {key: encode(item) for key, item in value.items()}
        return [[encode(key), encode(item)] for key, item in value.items()]
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
        if len(options) == 1:
            return _decode(options[0], data, where)
        for option in options:
            try:
                return _decode(option, data, where)
            except (CodecError, TypeError):
                continue
        raise CodecError(f"{where}: {data!r} is none of {options}")
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
    if hint is fractions.Fraction:
        if not isinstance(data, str):
            raise CodecError(f"{where}: expected a fraction's text, got {data!r}")
        try:
            return fractions.Fraction(data)
        except ValueError as error:
            raise CodecError(f"{where}: {error}") from error
    if hint in (str, int, float, bool):
        fits = isinstance(data, hint) and not (hint is int and isinstance(data, bool))
        if not fits and not (hint is float and isinstance(data, int)):
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
        decoded: dict[Any, Any]
        if args and args[0] is not str and isinstance(data, list):
            decoded = {}
            for pair in data:
                if not isinstance(pair, list) or len(pair) != 2:
                    raise CodecError(f"{where}: expected [key, value] pairs")
                key = _decode(args[0], pair[0], f"{where}[key]")
                decoded[key] = _decode(args[1], pair[1], f"{where}[{key!r}]")
        elif isinstance(data, Mapping):
            decoded = {str(k): _decode(args[1], v, f"{where}.{k}") for k, v in data.items()}
        else:
            raise CodecError(f"{where}: expected an object")
        return types.MappingProxyType(decoded) if origin is not dict else decoded
    raise CodecError(f"{where}: cannot decode {hint!r}")
