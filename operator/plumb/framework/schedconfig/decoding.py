"""Strict decoding of a KubeSchedulerConfiguration document as kube-scheduler's codec does it:
YAML or JSON, apiVersion and kind checked, a Go type for every field, unknown and duplicate
fields refused and named by path.

``k8s.documents.load`` turns the text into plain values (duplicate keys refused, within bounds),
``check`` here holds a value against a schema. Schemas are plain data: a scalar kind name,
``ListOf``, ``MapOf`` or a dict of field name to schema (a Go struct).
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from plumb.framework.schedconfig import names
from plumb.framework.schedconfig.errors import ConfigError, strict

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"

STRING = "string"
BOOL = "bool"
INT32 = "int32"
INT64 = "int64"
FLOAT32 = "float32"
DURATION = "duration"  # metav1.Duration: a Go duration string
RAW = "raw"  # runtime.RawExtension (plugin args), decoded later against its own schema
BYTES = "bytes"  # Go []byte: a base64 string (standard alphabet, padded; newlines skipped)

_INT_RANGES = {INT32: (-(2**31), 2**31 - 1), INT64: (-(2**63), 2**63 - 1)}


@dataclasses.dataclass(frozen=True, slots=True)
class ListOf:
    item: Schema


@dataclasses.dataclass(frozen=True, slots=True)
class MapOf:
    value: Schema


Schema = str | ListOf | MapOf | Mapping[str, "Schema"]

TYPE_META: dict[str, Schema] = {"apiVersion": STRING, "kind": STRING}

PLUGIN: dict[str, Schema] = {"name": STRING, "weight": INT32}
PLUGIN_SET: dict[str, Schema] = {"enabled": ListOf(PLUGIN), "disabled": ListOf(PLUGIN)}
EXTENSION_POINTS = (
    "preEnqueue",
    "queueSort",
    "preFilter",
    "filter",
    "postFilter",
    "preScore",
    "score",
    "reserve",
    "permit",
    "preBind",
    "bind",
    "postBind",
    "multiPoint",
)
"""v1.34.4's extension points, the fields of a profile's ``plugins``."""
PROFILE: dict[str, Schema] = {
    "schedulerName": STRING,
    "percentageOfNodesToScore": INT32,
    "plugins": {point: PLUGIN_SET for point in EXTENSION_POINTS},
    "pluginConfig": ListOf({"name": STRING, "args": RAW}),
}
EXTENDER: dict[str, Schema] = {
    "urlPrefix": STRING,
    "filterVerb": STRING,
    "preemptVerb": STRING,
    "prioritizeVerb": STRING,
    "weight": INT64,
    "bindVerb": STRING,
    "enableHTTPS": BOOL,
    "tlsConfig": {
        "insecure": BOOL,
        "serverName": STRING,
        "certFile": STRING,
        "keyFile": STRING,
        "caFile": STRING,
        "certData": BYTES,
        "keyData": BYTES,
        "caData": BYTES,
    },
    "httpTimeout": DURATION,
    "nodeCacheCapable": BOOL,
    "managedResources": ListOf({"name": STRING, "ignoredByScheduler": BOOL}),
    "ignorable": BOOL,
}
CONFIGURATION: dict[str, Schema] = {
    **TYPE_META,
    "parallelism": INT32,
    "leaderElection": {
        "leaderElect": BOOL,
        "leaseDuration": DURATION,
        "renewDeadline": DURATION,
        "retryPeriod": DURATION,
        "resourceLock": STRING,
        "resourceName": STRING,
        "resourceNamespace": STRING,
    },
    "clientConnection": {
        "kubeconfig": STRING,
        "acceptContentTypes": STRING,
        "contentType": STRING,
        "qps": FLOAT32,
        "burst": INT32,
    },
    "enableProfiling": BOOL,
    "enableContentionProfiling": BOOL,
    "percentageOfNodesToScore": INT32,
    "podInitialBackoffSeconds": INT64,
    "podMaxBackoffSeconds": INT64,
    "profiles": ListOf(PROFILE),
    "extenders": ListOf(EXTENDER),
    "delayCacheUntilActive": BOOL,
}
"""v1.34.4's KubeSchedulerConfiguration; ``configuration`` adds a later release's points."""


def configuration(points: Iterable[str] = ()) -> dict[str, Schema]:
    """The KubeSchedulerConfiguration's schema with extension points ``points`` besides
    v1.34.4's in each profile's ``plugins``."""
    if not points:
        return CONFIGURATION
    plugins = {point: PLUGIN_SET for point in (*EXTENSION_POINTS, *points)}
    return {**CONFIGURATION, "profiles": ListOf({**PROFILE, "plugins": plugins})}


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def type_meta(document: Any, text: str) -> None:
    """apiVersion and kind, checked first, as kube-scheduler's codec sniffs them."""
    if not isinstance(document, dict):
        raise ConfigError(
            "",
            "couldn't get version/kind; json parse error: json: cannot unmarshal "
            f"{_json_type(document)} into Go value of type struct",
        )
    version = document.get("apiVersion")
    kind = document.get("kind")
    if not isinstance(version, str) and version is not None:
        raise ConfigError("apiVersion", "couldn't get version/kind: apiVersion is not a string")
    if not isinstance(kind, str) and kind is not None:
        raise ConfigError("kind", "couldn't get version/kind: kind is not a string")
    if not kind:
        raise ConfigError("kind", f"Object 'Kind' is missing in '{text}'")
    if not version:
        raise ConfigError("apiVersion", f"Object 'apiVersion' is missing in '{text}'")
    if version != API_VERSION or kind != KIND:
        field = "apiVersion" if version != API_VERSION else "kind"
        raise ConfigError(
            field,
            f'no kind "{kind}" is registered for version "{version}" in scheme '
            '"pkg/runtime/scheme.go:110"',
        )


def check(value: Any, schema: Schema, path: str = "") -> list[str]:
    """Holds value against schema: raises ConfigError for the first value of the wrong Go type
    (as encoding/json reports the earliest one), returns the paths of unknown fields."""
    unknown: list[str] = []
    error = _check(value, schema, path, unknown)
    if error is not None:
        raise error
    return unknown


def unknown_fields(unknown: list[str]) -> ConfigError:
    """The strict decoding error for unknown fields, all named as kube-scheduler does."""
    message = ", ".join(f'unknown field "{path}"' for path in unknown)
    return strict(unknown[0], message)


def _check(value: Any, schema: Schema, path: str, unknown: list[str]) -> ConfigError | None:
    if value is None:
        return None  # JSON null leaves the Go zero value
    first: ConfigError | None = None
    if isinstance(schema, ListOf):
        if not isinstance(value, list):
            return _type_error(value, path, "[]" + _go_type(schema.item))
        for i, item in enumerate(value):
            error = _check(item, schema.item, f"{path}[{i}]", unknown)
            first = first or error
        return first
    if isinstance(schema, MapOf):
        if not isinstance(value, dict):
            return _type_error(value, path, "map[string]" + _go_type(schema.value))
        for key, item in value.items():
            error = _check(item, schema.value, _child(path, key), unknown)
            first = first or error
        return first
    if isinstance(schema, Mapping):
        if not isinstance(value, dict):
            return _type_error(value, path, "struct")
        for key, item in value.items():
            where = _child(path, key)
            if key not in schema:
                unknown.append(where)
                continue
            error = _check(item, schema[key], where, unknown)
            first = first or error
        return first
    return _scalar(value, schema, path)


def _scalar(value: Any, kind: str, path: str) -> ConfigError | None:
    if kind == RAW:
        return None
    if kind in (STRING, DURATION):
        if not isinstance(value, str):
            return _type_error(value, path, "string")
        if kind == DURATION and names.parse_duration(value) is None:
            return ConfigError(path, f'time: invalid duration "{value}"')
        return None
    if kind == BYTES:
        if not isinstance(value, str):
            return _type_error(value, path, "[]uint8")
        at = base64_error(value.encode("utf-8"))
        if at is None:
            return None
        return ConfigError(
            path,
            f"illegal base64 data at input byte {at}",
            f"illegal base64 data at input byte {at} (at {path})",
        )
    if kind == BOOL:
        return None if isinstance(value, bool) else _type_error(value, path, "bool")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return _type_error(value, path, kind)
    if kind == FLOAT32:
        return None
    low, high = _INT_RANGES[kind]
    if isinstance(value, float) and not value.is_integer():
        return _type_error(value, path, kind)
    if not low <= int(value) <= high:
        return _type_error(value, path, kind)
    return None


_BASE64 = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
_NEWLINES = frozenset(b"\r\n")


def base64_error(src: bytes) -> int | None:
    """Where Go's base64.StdEncoding refuses src (the byte of its CorruptInputError), None if
    it decodes; a port of decodeQuantum: newlines are skipped, padding is required."""
    si = 0
    while True:
        j = 0
        while j < 4:
            if si == len(src):
                return None if j == 0 else si - j
            c = src[si]
            si += 1
            if c in _BASE64:
                j += 1
                continue
            if c in _NEWLINES:
                continue
            if c != ord("=") or j < 2:
                return si - 1
            if j == 2:  # "==" expected; the first is consumed
                while si < len(src) and src[si] in _NEWLINES:
                    si += 1
                if si == len(src):
                    return len(src)
                if src[si] != ord("="):
                    return si - 1
                si += 1
            while si < len(src) and src[si] in _NEWLINES:
                si += 1
            return si if si < len(src) else None


def base64_bytes(text: str) -> bytes:
    """The bytes of a []byte field ``check`` accepted (Go skips newlines; so does binascii)."""
    return base64.b64decode("".join(text.split("\n")).replace("\r", ""))


def _type_error(value: Any, path: str, go_type: str) -> ConfigError:
    kind = _json_type(value)
    shown = f"{kind} {value}" if kind == "number" else kind
    dotted = ".".join(part.split("[")[0] for part in path.split("."))
    return ConfigError(
        path,
        f"json: cannot unmarshal {shown} into Go struct field {dotted} of type {go_type}",
        f"json: cannot unmarshal {shown} into Go struct field {dotted} of type {go_type} "
        f"(at {path})",
    )


def _go_type(schema: Schema) -> str:
    if isinstance(schema, str):
        return "string" if schema in (STRING, DURATION) else schema
    return "struct"


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"
