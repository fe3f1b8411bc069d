"""ConfigError and the field-error wordings of kube-scheduler v1.34.4's validation
(apimachinery's field.Error: Invalid value, Required value, Unsupported value, Duplicate
value, Forbidden), so plumb's refusals read as kube-scheduler's do."""

from __future__ import annotations

import json
from collections.abc import Iterable

from plumb.k8s import documents


class ConfigError(documents.DocumentError):
    """A KubeSchedulerConfiguration kube-scheduler (or plumb) refuses.

    ``field`` is the path of the offending field (``profiles[0].plugins.score.enabled[1]``),
    ``message`` what is wrong with it; ``str(error)`` is the whole line in kube-scheduler's
    wording (a refused document's fields, documents.DocumentError).
    """


def go_value(value: object) -> str:
    """A value as field.Error prints it: strings quoted, numbers and booleans bare."""
    if isinstance(value, str):
        # Go's %q keeps printable non-ASCII characters ("1.5µs") as they are.
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, separators=(",", ":"), default=str)


def invalid(field: str, value: object, detail: str) -> ConfigError:
    return ConfigError(field, f"Invalid value: {go_value(value)}: {detail}")


def required(field: str, detail: str = "") -> ConfigError:
    return ConfigError(field, "Required value" + (f": {detail}" if detail else ""))


def not_supported(field: str, value: object, supported: Iterable[str]) -> ConfigError:
    values = ", ".join(json.dumps(s) for s in supported)
    return ConfigError(field, f"Unsupported value: {go_value(value)}: supported values: {values}")


def duplicate(field: str, value: object, detail: str = "") -> ConfigError:
    return ConfigError(
        field, f"Duplicate value: {go_value(value)}" + (f" ({detail})" if detail else "")
    )


def forbidden(field: str, detail: str) -> ConfigError:
    return ConfigError(field, f"Forbidden: {detail}")


def strict(field: str, message: str) -> ConfigError:
    """A strict decoding error (unknown or duplicate field), worded as kube-scheduler's."""
    return ConfigError(field, message, f"strict decoding error: {message}")


def framework(field: str, scheduler_name: str, message: str) -> ConfigError:
    """A refusal from building a profile's framework, which kube-scheduler words without a
    path ("initializing profiles: creating profile for scheduler name X: ..."); plumb adds
    the field it comes from."""
    return ConfigError(
        field,
        message,
        f"initializing profiles: creating profile for scheduler name {scheduler_name}: "
        f"{message} (at {field})",
    )


def plumb(field: str, message: str) -> ConfigError:
    """A configuration kube-scheduler accepts and plumb does not: the message says why."""
    return ConfigError(field, message, f"{field}: plumb refuses: {message}")


def later(field: str, what: str, since: int, minor: int) -> ConfigError:
    """A field, extension point or plugin of a later kube-scheduler release than the one plumb
    decides as (kube-scheduler of that release refuses the file too, in its own words)."""
    return ConfigError(
        field,
        f"{what} is new in kube-scheduler v1.{since}: plumb decides as kube-scheduler "
        f"v1.{minor}, which refuses it",
    )
