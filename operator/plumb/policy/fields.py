"""Checks of single JSON fields for the policy compiler: types, limits, label keys and values,
durations. Each raises ``PolicyError`` naming the field (a dotted path) and quoting the value."""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping
from typing import Any

__all__ = [
    "PolicyError",
    "enum_set",
    "enum_value",
    "integer",
    "known",
    "label_key",
    "label_value",
    "listing",
    "mapping",
    "or_default",
    "parse_duration",
    "show",
]

MAX_DURATION_MS = 24 * 3600 * 1000

_LABEL_KEY = re.compile(
    r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
)
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_DURATION = re.compile(r"([0-9]{1,5}(ms|s|m|h)){1,4}")
_DURATION_PART = re.compile(r"([0-9]{1,5})(ms|s|m|h)")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}
_DURATION_HINT = (
    "must be a duration between 1ms and 24h such as 30s, 5m or 1h30m (units ms, s, m, h)"
)


class PolicyError(ValueError):
    """A SchedulingPolicy plumb cannot apply; the message names the field and the value."""


def parse_duration(value: Any, where: str) -> float:
    """Seconds in a duration such as ``250ms``, ``5m`` or ``1h30m`` (the CRD's grammar)."""
    if not isinstance(value, str) or len(value) > 24 or not _DURATION.fullmatch(value):
        raise PolicyError(f"{where}: {_DURATION_HINT}, got {show(value)}")
    millis = sum(int(number) * _UNIT_MS[unit] for number, unit in _DURATION_PART.findall(value))
    if not 0 < millis <= MAX_DURATION_MS:
        raise PolicyError(f"{where}: {_DURATION_HINT}, got {show(value)}")
    return millis / 1000


def show(value: Any) -> str:
    """A value as JSON, cut short: what error messages quote."""
    try:
        text = json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError, RecursionError):
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 80 else text[:77] + "..."


def or_default(value: Any, default: Any) -> Any:
    return default if value is None else value


def mapping(value: Any, where: str) -> Mapping[Any, Any]:
    if not isinstance(value, Mapping):
        raise PolicyError(f"{where}: must be an object, got {show(value)}")
    return value


def listing(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list | tuple):
        raise PolicyError(f"{where}: must be a list, got {show(value)}")
    return list(value)


def known(raw: Mapping[Any, Any], where: str, fields: Collection[str]) -> None:
    for field in raw:
        if field not in fields:
            raise PolicyError(
                f"{where}.{field}: unknown field; expected one of {', '.join(sorted(fields))}"
            )


def integer(value: Any, where: str, *, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise PolicyError(f"{where}: must be an integer, got {show(value)}")
    if value < low:
        raise PolicyError(f"{where}: must be at least {low}, got {value}")
    if value > high:
        raise PolicyError(f"{where}: must be at most {high}, got {value}")
    return value


def enum_value(value: Any, where: str, allowed: list[str]) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise PolicyError(f"{where}: must be one of {', '.join(allowed)}, got {show(value)}")
    return value


def enum_set(value: Any, where: str, allowed: list[str]) -> frozenset[str]:
    """A list of distinct values from ``allowed`` (an x-kubernetes-list-type set of an enum); a
    duplicate is refused naming both positions."""
    entries = listing(value, where)
    if len(entries) > len(allowed):
        raise PolicyError(f"{where}: at most {len(allowed)} entries, got {len(entries)}")
    seen: dict[str, int] = {}
    for i, entry in enumerate(entries):
        text = enum_value(entry, f"{where}[{i}]", allowed)
        if text in seen:
            raise PolicyError(
                f"{where}[{i}]: duplicate value {show(text)} ({where}[{seen[text]}] has it)"
            )
        seen[text] = i
    return frozenset(seen)


def label_key(value: Any, where: str) -> str:
    if not isinstance(value, str) or len(value) > 317 or not _LABEL_KEY.fullmatch(value):
        raise PolicyError(
            f"{where}: {show(value)} is not a label key: an optional DNS subdomain prefix and "
            "/, then a name of at most 63 characters (alphanumerics, -, _ and ., starting and "
            "ending with an alphanumeric)"
        )
    return value


def label_value(value: Any, where: str) -> str:
    if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.fullmatch(value):
        raise PolicyError(
            f"{where}: {show(value)} is not a label value: at most 63 characters "
            "(alphanumerics, -, _ and ., starting and ending with an alphanumeric)"
        )
    return value
