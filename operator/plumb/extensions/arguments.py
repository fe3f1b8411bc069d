"""A plugin's pluginConfig args, decoded into its ``Args`` dataclass field by field.

The args object's keys are the dataclass's field names, or their lowerCamelCase spelling (as
kube-scheduler's args are written: ``windowAnnotation`` for ``window_annotation``). A field is
checked against its type hint: str, int, float, bool, a list or tuple of one of those, a
mapping from str to one of those, or an optional one. An unknown key, a missing field without a
default, a value of the wrong type, and the ValueError of the dataclass's own ``__post_init__``
are refused naming the field.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Mapping
from typing import Any


class ArgsError(ValueError):
    """Args that do not fit: ``field`` is the dotted path under ``args`` ("" for the whole)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.message = message


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def canonical(raw: Any) -> str:
    """The args as written, in one spelling (sorted keys, no spaces): what a decision
    records of them."""
    return json.dumps(raw if raw is not None else {}, sort_keys=True, separators=(",", ":"))


def decode(kind: type[Any] | None, raw: Any) -> Any:
    """``raw`` (the pluginConfig entry's ``args``, None when absent) as an instance of
    ``kind``; a plugin without ``Args`` takes no args (None), and refuses any."""
    if kind is None:
        if raw:
            raise ArgsError("", "the plugin takes no args")
        return None
    if not dataclasses.is_dataclass(kind):
        raise ArgsError("", f"the plugin's Args ({kind.__name__}) is not a dataclass")
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ArgsError("", f"must be an object, got {_json_type(raw)}")
    hints = typing.get_type_hints(kind)
    fields = {f.name: f for f in dataclasses.fields(kind) if f.init}
    spelled = {camel(name): name for name in fields} | {name: name for name in fields}
    values: dict[str, Any] = {}
    for key, value in raw.items():
        name = spelled.get(str(key))
        if name is None:
            raise ArgsError(str(key), "unknown field")
        values[name] = _value(hints[name], value, camel(name))
    for name, field in fields.items():
        if name in values:
            continue
        if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            raise ArgsError(camel(name), "required field missing")
    try:
        return kind(**values)
    except ValueError as error:
        raise ArgsError("", str(error)) from None
    except TypeError as error:
        raise ArgsError("", f"cannot build {kind.__name__}: {error}") from None


def _value(hint: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        if value is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        if len(options) == 1:
            return _value(options[0], value, where)
        for option in options:
            try:
                return _value(option, value, where)
            except ArgsError:
                continue
        raise ArgsError(where, f"must be one of {options}, got {_json_type(value)}")
    if origin in (list, tuple) or hint in (list, tuple):
        if not isinstance(value, list):
            raise ArgsError(where, f"must be a list, got {_json_type(value)}")
        item = args[0] if args else Any
        items = [_value(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple or hint is tuple else items
    if origin in (dict, Mapping, typing.Mapping) or hint is dict:
        if not isinstance(value, Mapping):
            raise ArgsError(where, f"must be an object, got {_json_type(value)}")
        item = args[1] if len(args) == 2 else Any
        return {str(k): _value(item, v, f"{where}.{k}") for k, v in value.items()}
    if hint is Any:
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise ArgsError(where, f"must be a boolean, got {_json_type(value)}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ArgsError(where, f"must be an integer, got {_json_type(value)}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ArgsError(where, f"must be a number, got {_json_type(value)}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise ArgsError(where, f"must be a string, got {_json_type(value)}")
        return value
    raise ArgsError(where, f"has a type plumb cannot decode: {hint}")


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {json.dumps(value)}"
    if isinstance(value, int | float):
        return f"number {value}"
    if isinstance(value, str):
        return f"string {json.dumps(value)}"
    if isinstance(value, list):
        return "a list"
    return "an object"
