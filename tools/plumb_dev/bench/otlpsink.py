"""The bench's OTLP/HTTP trace receiver: accepts ``POST /v1/traces`` with 200 and counts the
requests, bytes and spans it got, for the run of plumb with tracing on.

It runs on a thread of the bench process, so what it costs is the harness's CPU, never plumb's.
The spans are counted from the protobuf's wire format (an ExportTraceServiceRequest holds
ResourceSpans, field 1, which hold ScopeSpans, field 2, which hold Spans, field 2) without
decoding anything else and without OpenTelemetry: the bench needs none of it.
"""

from __future__ import annotations

import dataclasses
import gzip
import http.server
import threading
from collections.abc import Iterator

TRACES_PATH = "/v1/traces"
_VARINT, _FIXED64, _LENGTH, _FIXED32 = 0, 1, 2, 5


@dataclasses.dataclass(frozen=True, kw_only=True)
class SinkCounts:
    """What the receiver got: export requests, their bytes (as sent), the spans in them, and
    the requests it could not read (another path, a body that is not OTLP protobuf)."""

    requests: int = 0
    bytes: int = 0
    spans: int = 0
    unreadable: int = 0


class MalformedMessage(ValueError):
    """Bytes that are not a protobuf message."""


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if at >= len(data) or shift > 63:
            raise MalformedMessage(f"a varint runs past byte {at}")
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at += 1
        if not byte & 0x80:
            return value, at
        shift += 7


def _fields(data: bytes) -> Iterator[tuple[int, bytes | None]]:
    """Each field of a message: its number, and its bytes when length-delimited (else None)."""
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, kind = key >> 3, key & 7
        if kind == _VARINT:
            _, at = _varint(data, at)
            yield number, None
        elif kind in (_FIXED64, _FIXED32):
            at += 8 if kind == _FIXED64 else 4
            yield number, None
        elif kind == _LENGTH:
            size, at = _varint(data, at)
            if at + size > len(data):
                raise MalformedMessage(f"a field of {size} bytes runs past the end at {at}")
            yield number, data[at : at + size]
            at += size
        else:
            raise MalformedMessage(f"wire type {kind} at byte {at}")
    if at != len(data):
        raise MalformedMessage("a fixed-size field runs past the end")


def _children(data: bytes, number: int) -> Iterator[bytes]:
    for found, value in _fields(data):
        if found == number and value is not None:
            yield value


def span_count(body: bytes) -> int:
    """The spans in an OTLP ExportTraceServiceRequest; raises MalformedMessage."""
    return sum(
        1
        for resource_spans in _children(body, 1)
        for scope_spans in _children(resource_spans, 2)
        for _ in _children(scope_spans, 2)
    )


class OtlpSink:
    """An OTLP/HTTP receiver on 127.0.0.1 (a port of its own), serving on a daemon thread until
    ``stop``; ``counts`` says what it got so far."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = SinkCounts()
        sink = self

        class _Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(size)
                gzipped = self.headers.get("Content-Encoding", "") == "gzip"
                readable = sink.take(body, path=self.path, gzipped=gzipped)
                # An empty ExportTraceServiceResponse: everything accepted.
                self.send_response(200 if readable else 400)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                """Quiet: the bench's output is its progress."""

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="bench-otlp-sink", daemon=True
        )
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def endpoint(self) -> str:
        """The base URL for ``--otlp-endpoint`` (the exporter adds /v1/traces)."""
        return f"http://127.0.0.1:{self.port}"

    def take(self, body: bytes, *, path: str = TRACES_PATH, gzipped: bool = False) -> bool:
        """Counts one export request's body; False (counted as unreadable) if it is not OTLP
        traces."""
        try:
            if path != TRACES_PATH:
                raise MalformedMessage(f"POST {path}: only {TRACES_PATH} is served")
            spans = span_count(gzip.decompress(body) if gzipped else body)
        except (MalformedMessage, OSError, EOFError):
            with self._lock:
                self._counts = dataclasses.replace(
                    self._counts, unreadable=self._counts.unreadable + 1
                )
            return False
        with self._lock:
            c = self._counts
            self._counts = SinkCounts(
                requests=c.requests + 1,
                bytes=c.bytes + len(body),
                spans=c.spans + spans,
                unreadable=c.unreadable,
            )
        return True

    def counts(self) -> SinkCounts:
        with self._lock:
            return self._counts

    def stop(self) -> SinkCounts:
        """Stops serving; what it got."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
        return self.counts()
