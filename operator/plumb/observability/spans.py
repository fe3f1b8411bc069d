"""OpenTelemetry spans for each scheduling attempt, made from its finished trace record.

Tracing is on when an OTLP endpoint is configured (``OTEL_EXPORTER_OTLP_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, or the flags of ``plumb run``) and
``OTEL_SDK_DISABLED`` is not ``true``; off, nothing here imports OpenTelemetry and ``OFF``
answers every call with nothing.

Spans are made when an attempt ends (the tracer's ``emit``), from the times the scheduler
recorded on its way (the record's ``stages``): one trace per attempt, its root the attempt,
its children the stages (queue wait, compile, kernel, PostFilter, Reserve, PreBind, binding).
The ids are derived from the attempt (the pod's uid, its attempt number, when it was popped),
so the binding request can carry the W3C ``traceparent`` of its span before that span exists,
and the API server's spans join the same trace.

Which attempts are kept: those whose trace id falls under the sampling ratio (the head
decision, the only one the API server hears of through the traceparent's sampled flag), and
every attempt that failed or took longer than ``slow_seconds`` (decided at its end, in this
process). Kept spans go on a bounded queue that a worker thread exports (OTLP over HTTP or
gRPC); a full queue drops the newest and counts it: the loop never waits for the exporter.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from plumb.observability import trace

logger = logging.getLogger("plumb.spans")

HTTP_PROTOBUF, GRPC = "http/protobuf", "grpc"
PROTOCOLS = (HTTP_PROTOBUF, GRPC)
DEFAULT_RATIO = 0.1
DEFAULT_SLOW_SECONDS = 5.0
SERVICE = "plumb"


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class SpanSettings:
    """Where spans go and which are kept: the OTEL_* environment, flags overriding it."""

    endpoint: str = ""  # OTEL_EXPORTER_OTLP_ENDPOINT (a base: /v1/traces is added for HTTP)
    traces_endpoint: str = ""  # OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (as is)
    protocol: str = HTTP_PROTOBUF  # OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL
    ratio: float = DEFAULT_RATIO  # OTEL_TRACES_SAMPLER(_ARG): the head ratio
    service: str = SERVICE  # OTEL_SERVICE_NAME
    disabled: bool = False  # OTEL_SDK_DISABLED
    slow_seconds: float = DEFAULT_SLOW_SECONDS  # kept whatever the ratio when slower
    ui_url: str = ""  # where a person reads a trace (--tracing-ui-url): Jaeger's query

    @property
    def enabled(self) -> bool:
        return not self.disabled and bool(self.endpoint or self.traces_endpoint)


NO_SPANS = SpanSettings()
"""Tracing off: no endpoint."""


class SettingsError(ValueError):
    """A tracing setting plumb cannot use (named in the message)."""


def settings_from(env: Mapping[str, str], **flags: Any) -> SpanSettings:
    """The settings of the environment's OTEL_* variables, each flag given (not None)
    replacing the variable it stands for; raises SettingsError naming a bad one."""
    protocol = (
        env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or HTTP_PROTOBUF
    )
    values: dict[str, Any] = {
        "endpoint": env.get("OTEL_EXPORTER_OTLP_ENDPOINT", ""),
        "traces_endpoint": env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", ""),
        "protocol": protocol,
        "ratio": _ratio(env.get("OTEL_TRACES_SAMPLER", ""), env.get("OTEL_TRACES_SAMPLER_ARG")),
        "service": env.get("OTEL_SERVICE_NAME") or SERVICE,
        "disabled": env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true",
    }
    values.update({key: value for key, value in flags.items() if value is not None})
    found = SpanSettings(**values)
    if found.protocol not in PROTOCOLS:
        raise SettingsError(
            f"OTLP protocol {found.protocol!r}: plumb exports with {' or '.join(PROTOCOLS)}"
        )
    if not 0.0 <= found.ratio <= 1.0:
        raise SettingsError(f"trace sampling ratio {found.ratio}: must be from 0 to 1")
    if found.slow_seconds < 0:
        raise SettingsError(f"slow attempt threshold {found.slow_seconds}: must be 0 or more")
    return found


def _ratio(sampler: str, argument: str | None) -> float:
    """The head ratio OTEL_TRACES_SAMPLER names (plumb's attempts are roots: parent-based
    samplers act as their root's)."""
    name = sampler.strip().lower()
    if name in ("always_on", "parentbased_always_on"):
        return 1.0
    if name in ("always_off", "parentbased_always_off"):
        return 0.0
    if name in ("traceidratio", "parentbased_traceidratio"):
        try:
            return float(argument) if argument is not None else 1.0
        except ValueError:
            raise SettingsError(f"OTEL_TRACES_SAMPLER_ARG {argument!r}: not a number") from None
    if name:
        raise SettingsError(
            f"OTEL_TRACES_SAMPLER {sampler!r}: plumb samples with always_on, always_off or "
            "(parentbased_)traceidratio"
        )
    return DEFAULT_RATIO


def preload(settings: SpanSettings) -> None:
    """Import what tracing on needs (the SDK, its OTLP exporter) now: called before plumb's
    start freezes the garbage collector's view of what the imports made, so that a full
    collection does not walk those modules' objects (8,000 of them, 3 ms a collection)."""
    if settings.enabled:
        from plumb.observability import spanexport

        spanexport.exporter_module(settings.protocol)


# Ids --------------------------------------------------------------------------------------------


def _digest(*parts: object, size: int) -> int:
    text = "\x00".join(str(part) for part in parts).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=size).digest(), "big") or 1


@functools.lru_cache(maxsize=4096)  # an attempt asks for it at each stage
def trace_id_of(uid: str, attempt: int, started: float) -> int:
    """The attempt's trace id (128 bits): from the pod, its attempt and when it was popped."""
    return _digest(uid, attempt, repr(started), size=16)


@functools.lru_cache(maxsize=64)
def _salt(stage: str) -> int:
    return _digest(stage, size=8)


def span_id_of(trace_id: int, stage: str) -> int:
    """A stage's span id (64 bits) within the attempt's trace ("" is the attempt's own): the
    trace id's high half mixed with the stage's own salt, distinct for each stage."""
    return ((trace_id >> 64) ^ _salt(stage)) or 1


_LOW_HALF = (1 << 64) - 1


def sampling_bound(ratio: float) -> int:
    """OpenTelemetry's TraceIdRatioBased bound for ``ratio``: ratio * 2^64."""
    return int(ratio * (1 << 64))


def head_sampled(trace_id: int, bound: int) -> bool:
    """OpenTelemetry's TraceIdRatioBased: the trace id's low 64 bits under ``bound``
    (``sampling_bound`` of the ratio)."""
    return (trace_id & _LOW_HALF) < bound


def traceparent(trace_id: int, span_id: int, sampled: bool) -> str:
    """The W3C header for a request made within span ``span_id``."""
    return f"00-{trace_id:032x}-{span_id:016x}-{'01' if sampled else '00'}"


# Stage names, the spans under an attempt.
QUEUE, COMPILE, KERNEL, EXTENDERS, POST_FILTER, RESERVE, PRE_BIND, BINDING = (
    "queue",
    "compile",
    "kernel",
    "extenders",
    "PostFilter",
    "Reserve",
    "PreBind",
    "binding",
)


class Spans:
    """Spans off: every call answers with nothing (the default ``OFF``)."""

    enabled = False
    settings = SpanSettings()

    def binding_header(self, record: trace.Trace) -> str | None:
        """The traceparent of the attempt's binding request (None: tracing off)."""
        return self.stage_header(record, BINDING)

    def stage_header(self, record: trace.Trace, stage: str) -> str | None:
        """The traceparent of requests made in one of the attempt's stages (None: off)."""
        return None

    def stage_headers(self, record: trace.Trace, stage: str) -> Callable[[], str | None] | None:
        """What gives ``stage_header`` when a request asks (k8s client's TRACEPARENT): made
        only for a stage that makes requests (None: off)."""
        return None

    def kept(self, record: trace.Trace, *, result: str = "") -> str:
        """The trace id the attempt's spans will have if tracing keeps them, else "" (what
        ``finish`` decides, without making anything: an observation's exemplar); ``result``:
        the attempt's result, when the record does not say it yet."""
        return ""

    def finish(self, record: trace.Trace) -> str:
        """Make and queue the attempt's spans if it is kept; its trace id, "" if not."""
        return ""

    def batch(self, records: Sequence[trace.Trace], started: float, ended: float) -> None:
        """A span for one kernel run, linking the attempts it decided."""

    def close(self, timeout: float = 5.0) -> None:
        """Export what is queued (within ``timeout``) and stop."""


OFF = Spans()


class Exporting(Spans):
    """Spans on: each kept attempt's spans made from its record (spanexport's SDK records) and
    queued for plumb's exporter thread."""

    enabled = True

    def __init__(
        self,
        settings: SpanSettings,
        dropped: Callable[[str, int], None] = lambda reason, count: None,
        exporter: Any = None,
    ) -> None:
        from plumb.observability import spanexport

        self.settings = settings
        self._records = spanexport.SpanRecords(settings.service)
        found = exporter or spanexport.exporter(
            settings.protocol, settings.endpoint, settings.traces_endpoint
        )
        self._queue = spanexport.ExportQueue(found, dropped)
        self._bound = sampling_bound(settings.ratio)
        # Monotonic times (the scheduler's clock) to epoch nanoseconds.
        self._offset = time.time() - time.monotonic()

    def _ns(self, monotonic: float) -> int:
        return int((monotonic + self._offset) * 1e9)

    def stage_header(self, record: trace.Trace, stage: str) -> str | None:
        trace_id = trace_id_of(record.uid, record.attempts, record.started)
        sampled = head_sampled(trace_id, self._bound)
        return traceparent(trace_id, span_id_of(trace_id, stage), sampled)

    def stage_headers(self, record: trace.Trace, stage: str) -> Callable[[], str | None] | None:
        return functools.partial(self.stage_header, record, stage)

    def kept(self, record: trace.Trace, *, result: str = "") -> str:
        if not record.started:
            return ""
        trace_id = trace_id_of(record.uid, record.attempts, record.started)
        kept = (
            head_sampled(trace_id, self._bound)
            or (result or record.result) != trace.SCHEDULED
            or _ended(record) - (record.activated or record.started) > self.settings.slow_seconds
        )
        return f"{trace_id:032x}" if kept else ""

    def finish(self, record: trace.Trace) -> str:
        kept = self.kept(record)
        if not kept:
            return ""
        trace_id = trace_id_of(record.uid, record.attempts, record.started)
        made = self._records
        root = made.context(trace_id, span_id_of(trace_id, ""))
        stages = [(QUEUE, record.activated, record.started)] if record.activated else []
        found = [
            made.span(
                name,
                made.context(trace_id, span_id_of(trace_id, name)),
                self._ns(start),
                self._ns(end),
                parent=root,
            )
            for name, start, end in (*stages, *record.stages)
        ]
        found.append(
            made.span(
                f"schedule {record.pod}",
                root,
                self._ns(record.activated or record.started),
                self._ns(_ended(record)),
                attributes=_attributes(record),
                error=record.message[:512] if record.result != trace.SCHEDULED else None,
            )
        )
        self._queue.put(found)
        return kept

    def batch(self, records: Sequence[trace.Trace], started: float, ended: float) -> None:
        from opentelemetry import trace as api

        if not records:
            return
        first = records[0]
        trace_id = _digest("batch", first.snapshot, repr(started), size=16)
        if not head_sampled(trace_id, self._bound):
            return
        made = self._records
        links = []
        for record in records:
            pod_trace = trace_id_of(record.uid, record.attempts, record.started)
            context = made.context(pod_trace, span_id_of(pod_trace, ""))
            links.append(api.Link(context, {"pod": record.pod}))
        span = made.span(
            "schedule batch",
            made.context(trace_id, span_id_of(trace_id, "")),
            self._ns(started),
            self._ns(ended),
            links=links,
            attributes={"plumb.batch.pods": len(records), "plumb.snapshot": first.snapshot},
        )
        self._queue.put([span])

    def close(self, timeout: float = 5.0) -> None:
        self._queue.drain(timeout)
        self._queue.shutdown()


def _ended(record: trace.Trace) -> float:
    """When the attempt's last recorded stage ended (its pop, if it recorded none)."""
    return max([record.started, *(end for _, _, end in record.stages)])


def _attributes(record: trace.Trace) -> dict[str, Any]:
    """What the attempt's root span says: the pod, its result and node, the filters'
    verdicts in short, the plan hash (the trace line has the rest)."""
    attributes: dict[str, Any] = {
        "k8s.pod.name": record.pod.partition("/")[2],
        "k8s.namespace.name": record.pod.partition("/")[0],
        "k8s.pod.uid": record.uid,
        "plumb.result": record.result,
        "plumb.attempt": record.attempts,
        "plumb.nodes.feasible": record.feasible,
        "plumb.nodes.total": record.total,
        "plumb.plan_hash": record.plan_hash,
        "plumb.input_hash": record.input_hash,
        "plumb.profile": record.profile,
    }
    if record.node:
        attributes["k8s.node.name"] = record.node
    if record.rejected:
        attributes["plumb.rejected"] = [
            f"{plugin}: {r.nodes}" for plugin, r in record.rejected.items()
        ]
    if record.message:
        attributes["plumb.message"] = record.message[:1024]
    return attributes
