"""A client of Jaeger's HTTP query API for tests: a trace by its id, the traces of a service, and
waiting until a trace holds the spans a test expects; answers as plain records.

The API is the one `plumb cluster up --tracing`'s Jaeger serves (``ControlPlane.jaeger.query_url``)
at ``/api/traces/{id}``, ``/api/traces?service=...`` and ``/api/services``; its JSON has a trace's
spans with ``references`` (the parent is the CHILD_OF one; an OTLP span link is FOLLOWS_FROM),
times in microseconds, ``tags`` as key/type/value, span events as ``logs``, and the service names
under ``processes``. Requests never go through a proxy the environment names: Jaeger is on this
machine's loopback.
"""

from __future__ import annotations

import dataclasses
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
_REQUEST_SECONDS = 10.0
_POLL_SECONDS = 0.25
TagValue: TypeAlias = str | bool | int | float


class JaegerQueryError(RuntimeError):
    """Jaeger's query API refused a request or answered something that is not its JSON."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class JaegerSpan:
    """One span as Jaeger stored it."""

    trace_id: str
    span_id: str
    # The CHILD_OF reference's span id: the parent, which may be a span Jaeger never got (the
    # caller's, for the first span a server records); None for a root.
    parent_id: str | None
    name: str
    service: str
    start_us: int
    duration_us: int
    tags: Mapping[str, TagValue]
    # The FOLLOWS_FROM references' (trace id, span id): OTLP span links.
    links: tuple[tuple[str, str], ...] = ()
    # The span's events, by their ``event`` field (kube-apiserver's "Txn call completed"...).
    events: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True, kw_only=True)
class JaegerTrace:
    """A trace's spans, in the order Jaeger listed them."""

    trace_id: str
    spans: tuple[JaegerSpan, ...]

    def named(self, name: str) -> list[JaegerSpan]:
        return [span for span in self.spans if span.name == name]

    def children(self, span_id: str) -> list[JaegerSpan]:
        return [span for span in self.spans if span.parent_id == span_id]

    def services(self) -> set[str]:
        return {span.service for span in self.spans}


def parse_traces(answer: Mapping[str, Any]) -> list[JaegerTrace]:
    """The traces of an ``/api/traces`` or ``/api/traces/{id}`` answer (``{"data": [...]}``)."""
    data = answer.get("data")
    if not isinstance(data, list):
        raise JaegerQueryError(f"expected a 'data' list in Jaeger's answer, found {answer!r:.300}")
    return [_trace(item) for item in data]


def _trace(item: Mapping[str, Any]) -> JaegerTrace:
    processes = item.get("processes") or {}
    services = {key: str(process.get("serviceName", "")) for key, process in processes.items()}
    trace_id = str(item["traceID"])
    return JaegerTrace(
        trace_id=trace_id, spans=tuple(_span(raw, services) for raw in item.get("spans") or [])
    )


def _span(raw: Mapping[str, Any], services: Mapping[str, str]) -> JaegerSpan:
    references = raw.get("references") or []
    parents = [r["spanID"] for r in references if r.get("refType") == "CHILD_OF"]
    links = tuple(
        (str(r["traceID"]), str(r["spanID"]))
        for r in references
        if r.get("refType") == "FOLLOWS_FROM"
    )
    events = tuple(
        str(field["value"])
        for log in raw.get("logs") or []
        for field in log.get("fields") or []
        if field.get("key") == "event"
    )
    return JaegerSpan(
        trace_id=str(raw["traceID"]),
        span_id=str(raw["spanID"]),
        parent_id=str(parents[0]) if parents else None,
        name=str(raw["operationName"]),
        service=services.get(str(raw.get("processID", "")), ""),
        start_us=int(raw["startTime"]),
        duration_us=int(raw["duration"]),
        tags={str(tag["key"]): tag["value"] for tag in raw.get("tags") or []},
        links=links,
        events=events,
    )


@dataclasses.dataclass(frozen=True)
class JaegerQuery:
    """Jaeger's query API at ``base_url`` (``http://127.0.0.1:<port>``)."""

    base_url: str

    def trace(self, trace_id: str, *, raw: bool = False) -> JaegerTrace | None:
        """The trace with that id (32 hex digits), None while Jaeger has none of its spans.

        ``raw``: as stored, without Jaeger's adjusters (clock skew and the like)."""
        answer = self._get(f"/api/traces/{trace_id.lower()}", {"raw": "true"} if raw else {})
        if answer is None:
            return None
        traces = parse_traces(answer)
        return traces[0] if traces else None

    def traces(
        self,
        service: str,
        *,
        operation: str | None = None,
        tags: Mapping[str, str] | None = None,
        limit: int | None = None,
        lookback_seconds: float | None = None,
    ) -> list[JaegerTrace]:
        """The traces with a span of ``service`` (and of ``operation``, carrying ``tags``),
        newest first as Jaeger finds them; Jaeger looks back 48 hours unless told."""
        params = {"service": service}
        if operation is not None:
            params["operation"] = operation
        if tags:
            params["tags"] = json.dumps(dict(tags))
        if limit is not None:
            params["limit"] = str(limit)
        if lookback_seconds is not None:
            now_us = int(time.time() * 1_000_000)
            params["start"] = str(now_us - int(lookback_seconds * 1_000_000))
            params["end"] = str(now_us)
        answer = self._get("/api/traces", params)
        return [] if answer is None else parse_traces(answer)

    def services(self) -> list[str]:
        """The services Jaeger has spans of."""
        answer = self._get("/api/services", {})
        data = [] if answer is None else answer.get("data") or []
        return sorted(str(name) for name in data)

    def wait_for_trace(
        self,
        trace_id: str,
        predicate: Callable[[JaegerTrace], bool],
        *,
        timeout: float = 30.0,
    ) -> JaegerTrace:
        """The trace once ``predicate`` holds for it (spans arrive in batches, seconds after the
        requests); AssertionError naming the spans seen if it does not within timeout."""
        deadline = time.monotonic() + timeout
        while True:
            trace = self.trace(trace_id)
            if trace is not None and predicate(trace):
                return trace
            if time.monotonic() >= deadline:
                seen = "no spans" if trace is None else describe(trace)
                raise AssertionError(
                    f"trace {trace_id} did not hold the expected spans within {timeout} s in "
                    f"Jaeger at {self.base_url}; it has {seen}"
                )
            time.sleep(_POLL_SECONDS)

    def _get(self, path: str, params: Mapping[str, str]) -> dict[str, Any] | None:
        """The JSON answer to GET path; None for a 404 (an unknown trace)."""
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        url = f"{self.base_url.rstrip('/')}{path}{query}"
        try:
            with _OPENER.open(url, timeout=_REQUEST_SECONDS) as response:
                body = response.read()
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return None
            detail = error.read().decode(errors="replace")[:500]
            raise JaegerQueryError(f"GET {url} answered {error.code}: {detail}") from error
        except urllib.error.URLError as error:
            raise JaegerQueryError(f"GET {url} failed: {error.reason}") from error
        try:
            answer = json.loads(body)
        except ValueError as error:
            raise JaegerQueryError(f"GET {url} answered no JSON: {body[:300]!r}") from error
        if not isinstance(answer, dict):
            raise JaegerQueryError(f"GET {url} answered {answer!r:.300}, not an object")
        return answer


def describe(trace: JaegerTrace) -> str:
    """The trace's spans as an indented tree (``service: name``), for failure messages."""
    ids = {span.span_id for span in trace.spans}
    lines: list[str] = []

    def add(span: JaegerSpan, depth: int) -> None:
        lines.append(f"{'  ' * depth}{span.service}: {span.name} ({span.span_id})")
        for child in trace.children(span.span_id):
            add(child, depth + 1)

    for span in trace.spans:
        if span.parent_id is None or span.parent_id not in ids:
            parent = "" if span.parent_id is None else f" [parent {span.parent_id}]"
            lines.append(f"root{parent}:")
            add(span, 1)
    return "\n".join(lines)
