"""What tracing needs of the OpenTelemetry SDK: preset span ids, plumb's export queue, the
exporter; imported only when tracing is on (observability/spans.py)."""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.id_generator import IdGenerator

logger = logging.getLogger("plumb.spans")

QUEUE_SIZE = 4096
EXPORT_BATCH = 512
EXPORT_EVERY_SECONDS = 2.0
# Why a span was not exported (plumb_trace_spans_dropped_total's reason).
QUEUE_FULL, EXPORT_FAILED = "queue_full", "export_failed"
HTTP_PROTOBUF, GRPC = "http/protobuf", "grpc"


class PresetIds(IdGenerator):
    """An IdGenerator that hands out the ids set just before a span is started (the spans are
    made on one thread, the loop's); random ones when none is set."""

    def __init__(self) -> None:
        self._trace: int | None = None
        self._span: int | None = None

    def next(self, trace_id: int, span_id: int) -> None:
        self._trace, self._span = trace_id, span_id

    def generate_trace_id(self) -> int:
        found, self._trace = self._trace, None
        return found if found is not None else int.from_bytes(os.urandom(16), "big")

    def generate_span_id(self) -> int:
        found, self._span = self._span, None
        return found if found is not None else int.from_bytes(os.urandom(8), "big")


def exporter(protocol: str, endpoint: str, traces_endpoint: str) -> SpanExporter:
    """The OTLP exporter of ``protocol``: ``traces_endpoint`` as is, else ``endpoint`` (a base
    URL for HTTP, /v1/traces added; a host:port or URL for gRPC, plain text for http://)."""
    if protocol == GRPC:
        from opentelemetry.exporter.otlp.proto.grpc import trace_exporter as grpc

        target = traces_endpoint or endpoint
        return grpc.OTLPSpanExporter(endpoint=target, insecure=target.startswith("http://"))
    from opentelemetry.exporter.otlp.proto.http import trace_exporter as http

    return http.OTLPSpanExporter(endpoint=traces_endpoint or endpoint.rstrip("/") + "/v1/traces")


class ExportQueue(SpanProcessor):
    """A span processor: ended spans on a bounded queue, exported in batches by one worker
    thread; a span that finds the queue full is dropped and counted (never the loop waiting)."""

    def __init__(self, exporter: SpanExporter, dropped: Callable[[str, int], None]) -> None:
        self._exporter = exporter
        self._dropped = dropped
        self._spans: collections.deque[ReadableSpan] = collections.deque()
        self._ready = threading.Condition()
        self._stopping = False
        self._worker = threading.Thread(target=self._run, name="plumb-spans", daemon=True)
        self._worker.start()

    # The SpanProcessor interface (duck-typed: the SDK calls these).
    def on_start(self, span: Span, parent_context: Any = None) -> None:
        pass

    def _on_ending(self, span: Span) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        with self._ready:
            if len(self._spans) >= QUEUE_SIZE:
                self._dropped(QUEUE_FULL, 1)
                return
            self._spans.append(span)
            if len(self._spans) >= EXPORT_BATCH:
                self._ready.notify()

    def shutdown(self) -> None:
        with self._ready:
            self._stopping = True
            self._ready.notify()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.drain(timeout_millis / 1000)

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
