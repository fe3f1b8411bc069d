"""Logging setup for ``plumb run``: one line per record on stderr, kopf kept quiet.

Two formats, chosen with ``--log-format``:

- ``json`` (the default): every line is one JSON object, ``{"time", "level", "logger", "msg"}``
  plus the record's structured fields (a trace's, see ``trace.py``) and, with an exception,
  ``exc_info`` holding the traceback text. ``kubectl logs deploy/plumb | jq`` reads it.
- ``plain``: ``<time> LEVEL logger: message``, and a record's fields after the message as
  ``key=value`` pairs, each value in JSON (strings quoted, as klog writes them), so the pairs
  read back exactly (``parse_pairs``).

A record carries fields in ``extra={FIELDS: {...}}``.
"""

from __future__ import annotations

import datetime
import json
import logging
import re
from collections.abc import Mapping
from typing import Any

import orjson

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
JSON = "json"
PLAIN = "plain"
FORMATS = (JSON, PLAIN)
FIELDS = "plumb_fields"
"""The LogRecord attribute holding a record's structured fields."""

_RESERVED = frozenset({"time", "level", "logger", "msg", "exc_info", "stack_info"})
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*=")
_DECODER = json.JSONDecoder()


def configure(level: str, log_format: str = JSON) -> None:
    """Log at ``level`` in ``log_format``; kopf's own chatter only at warning unless debugging."""
    if log_format not in FORMATS:
        raise ValueError(f"log format {log_format!r} is not one of {', '.join(FORMATS)}")
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if log_format == JSON else PlainFormatter())
    # Neither format shows the thread or the process: a record (one per decision) need not
    # look them up (logging's documented optimisation).
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    logging.basicConfig(level=level.upper(), handlers=[handler])
    if level.lower() != "debug":
        logging.getLogger("kopf").setLevel(logging.WARNING)


def _fields(record: logging.LogRecord) -> Mapping[str, Any]:
    fields = getattr(record, FIELDS, None)
    return fields if isinstance(fields, Mapping) else {}


class JsonFormatter(logging.Formatter):
    """One JSON object per record (a traceback is a field, never extra lines)."""

    def format(self, record: logging.LogRecord) -> str:
        moment = datetime.datetime.fromtimestamp(record.created, datetime.UTC)
        entry: dict[str, Any] = {
            "time": moment.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in _fields(record).items():
            if key not in _RESERVED:
                entry[key] = value
        if record.exc_info:
            record.exc_text = record.exc_text or self.formatException(record.exc_info)
        if record.exc_text:
            entry["exc_info"] = record.exc_text
        if record.stack_info:
            entry["stack_info"] = self.formatStack(record.stack_info)
        return _json_line(entry)


def _json_line(entry: Mapping[str, Any]) -> str:
    """One compact JSON object (orjson: a trace line is written per decision); json for what
    orjson refuses (a key that is not a string, an integer beyond 64 bits). A value neither
    can encode is written as its ``str``."""
    try:
        return orjson.dumps(entry, default=str).decode()
    except TypeError:  # orjson.JSONEncodeError
        return json.dumps(entry, ensure_ascii=False, separators=(",", ":"), default=str)


class PlainFormatter(logging.Formatter):
    """``<time> LEVEL logger: message key=value ...`` (a traceback follows on its own lines)."""

    def __init__(self) -> None:
        super().__init__(FORMAT)

    def formatMessage(self, record: logging.LogRecord) -> str:
        line = super().formatMessage(record)
        fields = _fields(record)
        return f"{line} {render_pairs(fields)}" if fields else line


def render_pairs(fields: Mapping[str, Any]) -> str:
    """``key=value`` pairs, each value as compact JSON."""
    return " ".join(
        f"{key}={json.dumps(value, ensure_ascii=False, separators=(',', ':'), default=str)}"
        for key, value in fields.items()
    )


def parse_pairs(text: str) -> dict[str, Any]:
    """The pairs ``render_pairs`` wrote, from the first ``key=`` on (words before it, a
    message, are skipped). Raises ValueError on a value that is not JSON."""
    pairs: dict[str, Any] = {}
    position = 0
    while True:
        found = _KEY.search(text, position)
        if found is None:
            return pairs
        if found.start() > 0 and not text[found.start() - 1].isspace():
            position = found.end()  # "=" inside a word, not a key
            continue
        key = found.group()[:-1]
        try:
            pairs[key], position = _DECODER.raw_decode(text, found.end())
        except json.JSONDecodeError as error:
            raise ValueError(f"the value of {key} is not JSON: {error}") from error
