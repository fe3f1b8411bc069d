"""The bench's OTLP/HTTP receiver: spans counted from the wire format, what OpenTelemetry's own
exporter sends accepted and counted, anything else refused and counted as unreadable."""

from __future__ import annotations

import gzip
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from plumb_dev.bench import otlpsink


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (sizes under 128 bytes: a one-byte varint)."""
    assert len(payload) < 128
    return bytes([number << 3 | 2, len(payload)]) + payload


def _request(*spans_per_scope: int) -> bytes:
    """An ExportTraceServiceRequest: one ResourceSpans, a ScopeSpans per count, each with that
    many spans (a name each), and a resource and a scope beside them."""
    scopes = b"".join(
        _field(2, _field(1, b"\x0a\x05plumb") + b"".join(_field(2, b"\x2a\x01s") for _ in range(n)))
        for n in spans_per_scope
    )
    resource = _field(1, _field(1, b"\x0a\x0cservice.name"))
    return _field(1, resource + scopes)


@pytest.fixture
def sink() -> Iterator[otlpsink.OtlpSink]:
    found = otlpsink.OtlpSink()
    try:
        yield found
    finally:
        found.stop()


def test_spans_are_counted_through_resource_and_scope() -> None:
    assert otlpsink.span_count(_request(3, 2)) == 5
    assert otlpsink.span_count(_request(3) + _request(1)) == 4
    assert otlpsink.span_count(b"") == 0
    # Varint, fixed 64 and fixed 32 fields are stepped over.
    assert otlpsink.span_count(b"\x10\x96\x01" + b"\x19" + bytes(8) + b"\x25" + bytes(4)) == 0


@pytest.mark.parametrize("body", [b"\x0a\x05ab", b"\x0b", b"\x80", b"\x19\x00"])
def test_bytes_that_are_not_a_message_are_malformed(body: bytes) -> None:
    with pytest.raises(otlpsink.MalformedMessage):
        otlpsink.span_count(body)


def _post(sink: otlpsink.OtlpSink, path: str, body: bytes, **headers: str) -> int:
    request = urllib.request.Request(
        f"{sink.endpoint}{path}",
        data=body,
        headers={"Content-Type": "application/x-protobuf", **headers},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return error.code


def test_the_receiver_counts_requests_bytes_and_spans(sink: otlpsink.OtlpSink) -> None:
    first, second = _request(2), _request(1, 1)
    assert _post(sink, "/v1/traces", first) == 200
    assert _post(sink, "/v1/traces", gzip.compress(second), **{"Content-Encoding": "gzip"}) == 200
    assert _post(sink, "/v1/metrics", first) == 400
    assert _post(sink, "/v1/traces", b"\x0b") == 400
    assert sink.counts() == otlpsink.SinkCounts(
        requests=2, bytes=len(first) + len(gzip.compress(second)), spans=4, unreadable=2
    )


def test_what_opentelemetrys_exporter_sends_is_accepted_and_counted(
    sink: otlpsink.OtlpSink,
) -> None:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    from opentelemetry.exporter.otlp.proto.http import trace_exporter
    from opentelemetry.sdk import trace as sdk_trace
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    memory = InMemorySpanExporter()
    provider = sdk_trace.TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("schedule shop/web-0"):
        for stage in ("queue", "kernel", "binding"):
            tracer.start_span(stage).end()
    exporter = trace_exporter.OTLPSpanExporter(endpoint=f"{sink.endpoint}/v1/traces")
    assert exporter.export(memory.get_finished_spans()) is SpanExportResult.SUCCESS
    provider.shutdown()
    found = sink.counts()
    assert (found.requests, found.spans, found.unreadable) == (1, 4, 0)
    assert found.bytes > 0


def test_the_endpoint_is_a_base_url_on_loopback(sink: otlpsink.OtlpSink) -> None:
    assert sink.endpoint == f"http://127.0.0.1:{sink.port}"
    assert sink.port > 0
