"""tests/support/extender_server.py: the programmable extender answers each verb with the test's
handler, records every request, refuses connections once stopped and serves again on the same
port once restarted."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.support.extender_server import ExtenderServer, Reply


def post(url: str, body: Any, timeout: float = 5.0) -> tuple[int, Any]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_a_verb_is_answered_by_its_handler_and_recorded() -> None:
    with ExtenderServer() as server:
        server.on("filter", lambda args: {"NodeNames": args["NodeNames"][:1]})
        status, answer = post(server.url + "/x/filter", {"NodeNames": ["a", "b"]})
        assert (status, answer) == (200, {"NodeNames": ["a"]})
        (request,) = server.requests("filter")
        assert request.path == "/x/filter"
        assert request.method == "POST"
        assert request.headers["Content-Type"] == "application/json"
        assert server.bodies("filter") == [{"NodeNames": ["a", "b"]}]
        assert server.requests("bind") == []


def test_a_reply_sets_the_status_and_raw_bytes() -> None:
    with ExtenderServer() as server:
        server.on("prio", lambda args: Reply(status=500, body=b"boom"))
        assert post(server.url + "/prio", {}) == (500, b"boom")
        # A verb without a handler: 404, still recorded.
        assert post(server.url + "/other", {})[0] == 404
        assert [r.verb for r in server.requests()] == ["prio", "other"]


def test_a_delay_outlasts_a_client_timeout() -> None:
    with ExtenderServer() as server:
        server.on("filter", lambda args: Reply(body={}, delay=1.0))
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            post(server.url + "/filter", {}, timeout=0.2)
        assert time.monotonic() - started < 0.9


def test_stopped_it_refuses_and_restarted_it_serves_on_the_same_port() -> None:
    server = ExtenderServer()
    server.start()
    server.on("filter", lambda args: {})
    port = server.port
    server.stop()
    with pytest.raises(urllib.error.URLError) as refused:
        post(server.url + "/filter", {})
    assert isinstance(refused.value.reason, ConnectionRefusedError)
    server.start()
    try:
        assert server.port == port
        assert post(server.url + "/filter", {}) == (200, {})
    finally:
        server.stop()
