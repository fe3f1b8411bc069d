"""The Jaeger query client's parsing (spans, parents, services, tags, links, events) and its
requests, against a small HTTP server on loopback standing in for Jaeger's query API; and
Prometheus's exemplar query, the same way."""

from __future__ import annotations

import http.server
import json
import threading
import urllib.parse
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from plumb_dev.testing import jaeger, prometheus

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER = "00f067aa0ba902b7"

# The shape of Jaeger's /api/traces/{id} answer: kube-apiserver's server span under the caller's
# span (which Jaeger never got), its Create handler span with events, and etcd's span.
ANSWER: dict[str, Any] = {
    "data": [
        {
            "traceID": TRACE_ID,
            "spans": [
                {
                    "traceID": TRACE_ID,
                    "spanID": "a1",
                    "operationName": "POST /api/v1/namespaces/{:namespace}/pods/{:name}/binding",
                    "references": [{"refType": "CHILD_OF", "traceID": TRACE_ID, "spanID": CALLER}],
                    "startTime": 1733380000000000,
                    "duration": 5400,
                    "tags": [
                        {"key": "http.method", "type": "string", "value": "POST"},
                        {"key": "http.status_code", "type": "int64", "value": 201},
                        {"key": "span.kind", "type": "string", "value": "server"},
                    ],
                    "logs": [],
                    "processID": "p1",
                    "warnings": None,
                },
                {
                    "traceID": TRACE_ID,
                    "spanID": "a2",
                    "operationName": "Create",
                    "references": [{"refType": "CHILD_OF", "traceID": TRACE_ID, "spanID": "a1"}],
                    "startTime": 1733380000000100,
                    "duration": 5000,
                    "tags": [{"key": "subresource", "type": "string", "value": "binding"}],
                    "logs": [
                        {
                            "timestamp": 1733380000000200,
                            "fields": [
                                {"key": "event", "type": "string", "value": "Conversion done"}
                            ],
                        }
                    ],
                    "processID": "p1",
                },
                {
                    "traceID": TRACE_ID,
                    "spanID": "e1",
                    "operationName": "etcdserverpb.KV/Txn",
                    "references": [
                        {"refType": "CHILD_OF", "traceID": TRACE_ID, "spanID": "a2"},
                        {"refType": "FOLLOWS_FROM", "traceID": "ff" * 16, "spanID": "b" * 16},
                    ],
                    "startTime": 1733380000001000,
                    "duration": 900,
                    "tags": [{"key": "rpc.system", "type": "string", "value": "grpc"}],
                    "processID": "p2",
                },
            ],
            "processes": {
                "p1": {"serviceName": "apiserver", "tags": []},
                "p2": {"serviceName": "etcd", "tags": []},
            },
            "warnings": None,
        }
    ],
    "total": 0,
    "limit": 0,
    "offset": 0,
    "errors": None,
}


def test_a_traces_spans_are_read_with_their_parents_services_and_tags() -> None:
    (trace,) = jaeger.parse_traces(ANSWER)
    assert trace.trace_id == TRACE_ID
    server, create, txn = trace.spans
    assert server == jaeger.JaegerSpan(
        trace_id=TRACE_ID,
        span_id="a1",
        parent_id=CALLER,
        name="POST /api/v1/namespaces/{:namespace}/pods/{:name}/binding",
        service="apiserver",
        start_us=1733380000000000,
        duration_us=5400,
        tags={"http.method": "POST", "http.status_code": 201, "span.kind": "server"},
    )
    assert create.parent_id == "a1"
    assert create.events == ("Conversion done",)
    assert txn.service == "etcd"
    assert txn.parent_id == "a2"
    assert txn.links == (("ff" * 16, "b" * 16),)
    assert trace.named("Create") == [create]
    assert trace.children("a1") == [create]
    assert trace.services() == {"apiserver", "etcd"}


def test_a_trace_is_described_as_a_tree_under_its_missing_parent() -> None:
    (trace,) = jaeger.parse_traces(ANSWER)
    assert jaeger.describe(trace).splitlines() == [
        f"root [parent {CALLER}]:",
        "  apiserver: POST /api/v1/namespaces/{:namespace}/pods/{:name}/binding (a1)",
        "    apiserver: Create (a2)",
        "      etcd: etcdserverpb.KV/Txn (e1)",
    ]


def test_an_answer_without_data_is_refused() -> None:
    with pytest.raises(jaeger.JaegerQueryError, match="expected a 'data' list"):
        jaeger.parse_traces({"errors": [{"code": 400, "msg": "bad"}]})


class _Fake(http.server.BaseHTTPRequestHandler):
    """Answers as Jaeger's query API (or Prometheus's) would; records the requests."""

    requests: ClassVar[list[tuple[str, dict[str, list[str]]]]] = []
    answers: ClassVar[dict[str, tuple[int, object]]] = {}

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        type(self).requests.append((url.path, urllib.parse.parse_qs(url.query)))
        status, body = type(self).answers.get(url.path, (404, {"errors": [{"code": 404}]}))
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def fake() -> Iterator[tuple[int, type[_Fake]]]:
    handler = type("Handler", (_Fake,), {"requests": [], "answers": {}})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server.server_address[1], handler
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_a_trace_is_fetched_by_its_id_and_an_unknown_one_is_none(
    fake: tuple[int, type[_Fake]],
) -> None:
    port, handler = fake
    handler.answers[f"/api/traces/{TRACE_ID}"] = (200, ANSWER)
    client = jaeger.JaegerQuery(f"http://127.0.0.1:{port}")
    trace = client.trace(TRACE_ID.upper())
    assert trace is not None
    assert [span.span_id for span in trace.spans] == ["a1", "a2", "e1"]
    assert client.trace("0" * 32) is None
    client.trace(TRACE_ID, raw=True)
    assert handler.requests[-1] == (f"/api/traces/{TRACE_ID}", {"raw": ["true"]})


def test_a_services_traces_are_searched_with_operation_tags_and_limit(
    fake: tuple[int, type[_Fake]],
) -> None:
    port, handler = fake
    handler.answers["/api/traces"] = (200, ANSWER)
    handler.answers["/api/services"] = (200, {"data": ["etcd", "apiserver"], "total": 2})
    client = jaeger.JaegerQuery(f"http://127.0.0.1:{port}/")
    traces = client.traces(
        "apiserver",
        operation="Create",
        tags={"subresource": "binding"},
        limit=5,
        lookback_seconds=60,
    )
    assert [t.trace_id for t in traces] == [TRACE_ID]
    path, params = handler.requests[-1]
    assert path == "/api/traces"
    assert params["service"] == ["apiserver"]
    assert params["operation"] == ["Create"]
    assert json.loads(params["tags"][0]) == {"subresource": "binding"}
    assert params["limit"] == ["5"]
    assert int(params["end"][0]) - int(params["start"][0]) == 60_000_000
    assert client.services() == ["apiserver", "etcd"]


def test_a_refused_request_names_the_answer(fake: tuple[int, type[_Fake]]) -> None:
    port, handler = fake
    handler.answers["/api/traces"] = (400, {"errors": [{"code": 400, "msg": "service required"}]})
    with pytest.raises(jaeger.JaegerQueryError, match=r"answered 400.*service required"):
        jaeger.JaegerQuery(f"http://127.0.0.1:{port}").traces("")


def test_waiting_for_a_trace_returns_once_it_holds_the_spans(
    fake: tuple[int, type[_Fake]],
) -> None:
    port, handler = fake
    handler.answers[f"/api/traces/{TRACE_ID}"] = (200, ANSWER)
    client = jaeger.JaegerQuery(f"http://127.0.0.1:{port}")
    trace = client.wait_for_trace(TRACE_ID, lambda t: bool(t.named("Create")), timeout=5)
    assert trace.trace_id == TRACE_ID
    with pytest.raises(AssertionError, match=r"(?s)did not hold.*etcd: etcdserverpb.KV/Txn"):
        client.wait_for_trace(TRACE_ID, lambda t: bool(t.named("Delete")), timeout=0.3)
    with pytest.raises(AssertionError, match="it has no spans"):
        client.wait_for_trace("1" * 32, lambda t: True, timeout=0.3)


def test_prometheus_exemplars_are_asked_for_a_series_and_a_time_range(
    fake: tuple[int, type[_Fake]],
) -> None:
    port, handler = fake
    answer = {
        "status": "success",
        "data": [
            {
                "seriesLabels": {"__name__": "plumb_attempt_duration_seconds_bucket"},
                "exemplars": [{"labels": {"trace_id": TRACE_ID}, "value": "0.01", "timestamp": 1}],
            }
        ],
    }
    handler.answers["/api/v1/query_exemplars"] = (200, answer)
    got = prometheus.query_exemplars(port, "plumb_attempt_duration_seconds_bucket", 100.0, 160.5)
    assert got == answer
    assert handler.requests[-1] == (
        "/api/v1/query_exemplars",
        {
            "query": ["plumb_attempt_duration_seconds_bucket"],
            "start": ["100.0"],
            "end": ["160.5"],
        },
    )
