"""What tracing needs of the OpenTelemetry SDK: spans as its records, plumb's export queue,
the OTLP exporter; imported only when tracing is on (observability/spans.py).

plumb makes an attempt's spans after the attempt, from the times it recorded and with ids it
derived, so it builds the SDK's finished-span records (ReadableSpan) itself rather than starting
and ending live spans through a tracer: a live span costs a sampler call, locks and processor
calls to say what plumb already knows (three times the cost per kept attempt, measured), and its
ids would have to be forced through an id generator.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from opentelemetry import trace as api
from opentelemetry.sdk import resources
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

logger = logging.getLogger("plumb.spans")

QUEUE_SIZE = 4096
EXPORT_BATCH = 512
EXPORT_EVERY_SECONDS = 2.0
# Why a span was not exported (plumb_trace_spans_dropped_total's reason).
QUEUE_FULL, EXPORT_FAILED = "queue_full", "export_failed"
HTTP_PROTOBUF, GRPC = "http/protobuf", "grpc"
_SAMPLED = api.TraceFlags(api.TraceFlags.SAMPLED)
_UNSET = api.Status(api.StatusCode.UNSET)


class SpanRecords:
    """Finished spans of one service: its resource and scope, each span's ids and times given."""

    def __init__(self, service: str) -> None:
        self._resource = resources.Resource.create({"service.name": service})
        self._scope = InstrumentationScope("plumb")

    @staticmethod
    def context(trace_id: int, span_id: int) -> api.SpanContext:
        """A sampled span's identity (what a link or a child names)."""
        return api.SpanContext(trace_id, span_id, is_remote=False, trace_flags=_SAMPLED)

    def span(
        self,
        name: str,
        context: api.SpanContext,
        start_ns: int,
        end_ns: int,
        *,
        parent: api.SpanContext | None = None,
        attributes: Mapping[str, Any] | None = None,
        links: Sequence[api.Link] = (),
        error: str | None = None,
    ) -> ReadableSpan:
        """A finished span; ``error`` set: its status is ERROR with that description."""
        return ReadableSpan(
            name,
            context,
            parent=parent,
            resource=self._resource,
            attributes=attributes,
            links=links,
            status=_UNSET if error is None else api.Status(api.StatusCode.ERROR, error),
            start_time=start_ns,
            end_time=end_ns,
            instrumentation_scope=self._scope,
        )


def exporter_module(protocol: str) -> Any:
    """The OTLP exporter's module for ``protocol`` (imported on first use: gRPC brings grpcio)."""
    if protocol == GRPC:
        from opentelemetry.exporter.otlp.proto.grpc import trace_exporter as grpc

        return grpc
    from opentelemetry.exporter.otlp.proto.http import trace_exporter as http

    return http


def exporter(protocol: str, endpoint: str, traces_endpoint: str) -> SpanExporter:
    """The OTLP exporter of ``protocol``: ``traces_endpoint`` as is, else ``endpoint`` (a base
    URL for HTTP, /v1/traces added; a host:port or URL for gRPC, plain text for http://)."""
    module = exporter_module(protocol)
    if protocol == GRPC:
        target = traces_endpoint or endpoint
        grpc = module.OTLPSpanExporter(endpoint=target, insecure=target.startswith("http://"))
        return cast(SpanExporter, grpc)
    url = traces_endpoint or endpoint.rstrip("/") + "/v1/traces"
    return cast(SpanExporter, module.OTLPSpanExporter(endpoint=url))


class ExportQueue:
    """Finished spans on a bounded queue, exported in batches by one worker thread; a span that
    finds the queue full is dropped and counted (never the loop waiting)."""

    def __init__(self, exporter: SpanExporter, dropped: Callable[[str, int], None]) -> None:
        self._exporter = exporter
        self._dropped = dropped
        self._spans: collections.deque[ReadableSpan] = collections.deque()
        self._ready = threading.Condition()
        self._stopping = False
        self._worker = threading.Thread(target=self._run, name="plumb-spans", daemon=True)
        self._worker.start()

    def put(self, spans: Sequence[ReadableSpan]) -> None:
        """Queue an attempt's (or a batch's) spans; those beyond the bound are counted dropped."""
        with self._ready:
            room = QUEUE_SIZE - len(self._spans)
            self._spans.extend(spans[:room])
            if len(spans) > room:
                self._dropped(QUEUE_FULL, len(spans) - room)
            if len(self._spans) >= EXPORT_BATCH:
                self._ready.notify()

    def shutdown(self) -> None:
        with self._ready:
            self._stopping = True
            self._ready.notify()

    def drain(self, timeout: float) -> bool:
        """Wait (at most ``timeout``) until the queue is empty."""
        deadline = time.monotonic() + timeout
        with self._ready:
            self._ready.notify()
        while time.monotonic() < deadline:
            with self._ready:
                if not self._spans:
                    return True
            time.sleep(0.01)
        return False

    def _run(self) -> None:
        while True:
            with self._ready:
                if not self._spans and not self._stopping:
                    self._ready.wait(EXPORT_EVERY_SECONDS)
                batch = [self._spans.popleft() for _ in range(min(EXPORT_BATCH, len(self._spans)))]
                stopping = self._stopping
            if batch:
                self._export(batch)
            elif stopping:
                self._exporter.shutdown()
                return

    def _export(self, batch: list[ReadableSpan]) -> None:
        try:
            result = self._exporter.export(batch)
        except Exception:  # an exporter's bug must not end the worker
            logger.exception("exporting %d spans failed", len(batch))
            result = None
        if result is not SpanExportResult.SUCCESS:
            self._dropped(EXPORT_FAILED, len(batch))
