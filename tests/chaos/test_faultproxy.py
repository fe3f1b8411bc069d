"""The chaos suite's fault proxy, against a scripted upstream on 127.0.0.1: what a client sees
for each fault, watches relayed as they stream and cut, pause and resume, seeded shares, the
counters, the kubeconfig it writes, and that stopping it leaves no thread or socket behind."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import socket
import stat
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from plumb.k8s import credentials
from tests.chaos import faultproxy
from tests.chaos.faultproxy import Fault, RequestClass, Rule

BINDING = "/api/v1/namespaces/default/pods/web-0/binding"
WATCH = "/api/v1/pods?watch=true&resourceVersion=7"
ADDED, MODIFIED = b'{"type":"ADDED"}\n', b'{"type":"MODIFIED"}\n'


@dataclasses.dataclass(frozen=True, kw_only=True)
class Seen:
    method: str
    target: str
    headers: dict[str, str]
    body: bytes


class Upstream:
    """A scripted API server: records every request; a watch sends ADDED at once, and
    MODIFIED only when the test sets ``release``; other requests answer 201 at once."""

    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self.release = asyncio.Event()
        self.url = ""

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        body = await request.read()
        self.seen.append(
            Seen(
                method=request.method,
                target=request.raw_path,
                headers=dict(request.headers),
                body=body,
            )
        )
        if request.query.get("watch") == "true":
            response = web.StreamResponse(headers={"Content-Type": "application/json"})
            await response.prepare(request)
            await response.write(ADDED)
            await self.release.wait()
            await response.write(MODIFIED)
            await response.write_eof()
            return response
        return web.json_response({"kind": "Binding"}, status=201, headers={"X-Upstream": "1"})


@pytest.fixture
async def upstream() -> AsyncIterator[Upstream]:
    scripted = Upstream()
    server = web.Server(scripted.handle, handler_cancellation=True, access_log=None)
    runner = web.ServerRunner(server, shutdown_timeout=0.5)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    scripted.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        yield scripted
    finally:
        scripted.release.set()
        await runner.cleanup()


@pytest.fixture
def proxy(upstream: Upstream) -> Iterator[faultproxy.FaultProxy]:
    with faultproxy.FaultProxy(
        upstream.url, seed=7, delay=0.3, retry_after=3, cut_after=(0.1, 0.1)
    ) as started:
        yield started


@pytest.fixture
async def client() -> AsyncIterator[aiohttp.ClientSession]:
    # A connection per request, so no test's fault lands on a connection another one opened.
    # (aiohttp also resends an idempotent request once when its connection drops, so the
    # tests of a dropped connection use POST.)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as session:
        yield session


@pytest.mark.parametrize(
    ("method", "target", "kind"),
    [
        ("POST", BINDING, RequestClass.BINDING),
        ("POST", "/api/v1/namespaces/ns/events", RequestClass.EVENT),
        ("POST", "/apis/events.k8s.io/v1/namespaces/ns/events", RequestClass.EVENT),
        ("GET", "/api/v1/pods?watch=true", RequestClass.WATCH),
        ("GET", "/api/v1/namespaces/ns/pods?labelSelector=a%3Db&watch=1", RequestClass.WATCH),
        ("GET", "/apis/coordination.k8s.io/v1/watch/namespaces/ns/leases", RequestClass.WATCH),
        ("GET", "/api/v1/pods?watch=false", RequestClass.OTHER),
        ("GET", "/api/v1/namespaces/ns/events", RequestClass.OTHER),
        ("GET", "/api/v1/namespaces/default/pods/web-0/binding", RequestClass.OTHER),
        ("PATCH", "/api/v1/namespaces/ns/pods/p/status", RequestClass.OTHER),
        ("POST", "/api/v1/namespaces/ns/pods", RequestClass.OTHER),
    ],
)
def test_classify(method: str, target: str, kind: RequestClass) -> None:
    assert faultproxy.classify(method, target) is kind


def test_rules_refuse_what_cannot_happen() -> None:
    with pytest.raises(ValueError, match="between 0 and 1"):
        Rule(RequestClass.OTHER, Fault.ERROR, 1.5)
    with pytest.raises(ValueError, match="only a watch"):
        Rule(RequestClass.BINDING, Fault.CUT, 0.5)
    with pytest.raises(ValueError, match="use CUT"):
        Rule(RequestClass.WATCH, Fault.LOST, 0.5)
    with pytest.raises(ValueError, match=r"add up to 1\.2"):
        faultproxy.FaultProxy("http://127.0.0.1:1").set_rules(
            [Rule(RequestClass.EVENT, Fault.DROP, 0.6), Rule(RequestClass.EVENT, Fault.ERROR, 0.6)]
        )


async def test_a_request_passes_through_unchanged(
    proxy: faultproxy.FaultProxy, upstream: Upstream, client: aiohttp.ClientSession
) -> None:
    headers = {"Authorization": "Bearer t0k", "Connection": "X-Hop", "X-Hop": "1"}
    async with client.post(
        proxy.url + BINDING + "?dryRun=All", data=b'{"target":{}}', headers=headers
    ) as response:
        assert response.status == 201
        assert response.headers["X-Upstream"] == "1"
        assert await response.json() == {"kind": "Binding"}
    [seen] = upstream.seen
    assert (seen.method, seen.target, seen.body) == (
        "POST",
        BINDING + "?dryRun=All",
        b'{"target":{}}',
    )
    assert seen.headers["Authorization"] == "Bearer t0k"
    assert seen.headers["Host"] == upstream.url.removeprefix("http://")
    assert "X-Hop" not in seen.headers  # named hop-by-hop by the client's Connection header
    assert proxy.counts() == {(RequestClass.BINDING, faultproxy.PASSED): 1}


async def test_drop_closes_the_connection_before_the_api_server_sees_it(
    proxy: faultproxy.FaultProxy, upstream: Upstream, client: aiohttp.ClientSession
) -> None:
    proxy.set_rules([Rule(RequestClass.BINDING, Fault.DROP, 1.0)])
    with pytest.raises(aiohttp.ServerDisconnectedError):
        await client.post(proxy.url + BINDING, data=b"{}")
    assert upstream.seen == []
    assert proxy.counts() == {(RequestClass.BINDING, Fault.DROP): 1}


async def test_lost_lets_the_api_server_commit_but_the_answer_never_comes(
    proxy: faultproxy.FaultProxy, upstream: Upstream, client: aiohttp.ClientSession
) -> None:
    proxy.set_rules([Rule(RequestClass.BINDING, Fault.LOST, 1.0)])
    with pytest.raises(aiohttp.ServerDisconnectedError):
        await client.post(proxy.url + BINDING, data=b"{}")
    assert [seen.target for seen in upstream.seen] == [BINDING]
    assert proxy.counts() == {(RequestClass.BINDING, Fault.LOST): 1}


@pytest.mark.parametrize(
    ("fault", "code", "reason"),
    [
        (Fault.TOO_MANY, 429, "TooManyRequests"),
        (Fault.ERROR, 500, "InternalError"),
        (Fault.CONFLICT, 409, "Conflict"),
    ],
)
async def test_status_faults_answer_a_kubernetes_status_without_forwarding(
    proxy: faultproxy.FaultProxy,
    upstream: Upstream,
    client: aiohttp.ClientSession,
    fault: Fault,
    code: int,
    reason: str,
) -> None:
    proxy.set_rules([Rule(RequestClass.EVENT, fault, 1.0)])
    async with client.post(proxy.url + "/api/v1/namespaces/ns/events", data=b"{}") as response:
        body = await response.json()
        assert response.status == code
        assert response.headers.get("Retry-After") == ("3" if code == 429 else None)
    assert body["kind"] == "Status"
    assert body["apiVersion"] == "v1"
    assert (body["status"], body["reason"], body["code"]) == ("Failure", reason, code)
    assert "injected" in body["message"]
    assert upstream.seen == []


async def test_delay_forwards_after_the_delay(
    proxy: faultproxy.FaultProxy, upstream: Upstream, client: aiohttp.ClientSession
) -> None:
    proxy.set_rules([Rule(RequestClass.OTHER, Fault.DELAY, 1.0)])
    started = time.monotonic()
    async with client.get(proxy.url + "/api/v1/nodes") as response:
        assert response.status == 201
    assert time.monotonic() - started >= 0.3
    assert len(upstream.seen) == 1


async def test_a_watch_is_relayed_chunk_by_chunk_and_ends_with_upstream(
    proxy: faultproxy.FaultProxy, upstream: Upstream, client: aiohttp.ClientSession
) -> None:
    async with client.get(proxy.url + WATCH) as response:
        assert response.status == 200
        # Upstream holds MODIFIED back: ADDED can only arrive if the proxy does not buffer.
        assert await asyncio.wait_for(response.content.readline(), 2.0) == ADDED
        upstream.release.set()
        assert await asyncio.wait_for(response.content.read(), 2.0) == MODIFIED
    assert proxy.counts() == {(RequestClass.WATCH, faultproxy.PASSED): 1}


async def test_cut_ends_a_watch_mid_stream(
    proxy: faultproxy.FaultProxy, client: aiohttp.ClientSession
) -> None:
    proxy.set_rules([Rule(RequestClass.WATCH, Fault.CUT, 1.0)])
    async with client.get(proxy.url + WATCH) as response:
        assert await asyncio.wait_for(response.content.readline(), 2.0) == ADDED
        with pytest.raises(aiohttp.ClientPayloadError):
            await asyncio.wait_for(response.content.read(), 2.0)
    assert proxy.counts() == {(RequestClass.WATCH, Fault.CUT): 1}


async def test_pause_holds_requests_and_cuts_watches_until_resume(
    proxy: faultproxy.FaultProxy, client: aiohttp.ClientSession
) -> None:
    async with client.get(proxy.url + WATCH) as watch:
        assert await asyncio.wait_for(watch.content.readline(), 2.0) == ADDED
        proxy.pause()
        with pytest.raises(aiohttp.ClientPayloadError):
            await asyncio.wait_for(watch.content.read(), 2.0)
    held = asyncio.create_task(client.get(proxy.url + "/api/v1/nodes"))
    await asyncio.sleep(0.3)
    assert not held.done()
    proxy.resume()
    async with await asyncio.wait_for(held, 2.0) as response:
        assert response.status == 201
    assert proxy.counts() == {
        (RequestClass.WATCH, faultproxy.PASSED): 1,
        (RequestClass.WATCH, Fault.CUT): 1,
        (RequestClass.OTHER, faultproxy.PASSED): 1,
    }


async def test_cut_watches_closes_every_open_watch(
    proxy: faultproxy.FaultProxy, client: aiohttp.ClientSession
) -> None:
    responses = [await client.get(proxy.url + WATCH) for _ in range(3)]
    for response in responses:
        assert await asyncio.wait_for(response.content.readline(), 2.0) == ADDED
    assert proxy.cut_watches() == 3
    for response in responses:
        with pytest.raises(aiohttp.ClientPayloadError):
            await asyncio.wait_for(response.content.read(), 2.0)
        response.release()
    assert proxy.cut_watches() == 0


async def outcomes(proxy: faultproxy.FaultProxy, n: int) -> list[int]:
    """The statuses of ``n`` GETs in a row over one kept-alive connection."""
    async with aiohttp.ClientSession() as session:
        statuses = []
        for _ in range(n):
            async with session.get(proxy.url + "/api/v1/nodes") as response:
                statuses.append(response.status)
        return statuses


async def test_shares_are_honoured_and_repeatable_with_a_seed(upstream: Upstream) -> None:
    half = [Rule(RequestClass.OTHER, Fault.ERROR, 0.5)]
    with faultproxy.FaultProxy(upstream.url, seed=1, rules=half) as proxy:
        first = await outcomes(proxy, 200)
        assert 70 <= first.count(500) <= 130
        assert proxy.counts() == {
            (RequestClass.OTHER, Fault.ERROR): first.count(500),
            (RequestClass.OTHER, faultproxy.PASSED): first.count(201),
        }
        assert proxy.faults_injected() == first.count(500)
        proxy.set_rules([Rule(RequestClass.OTHER, Fault.ERROR, 1.0)])
        assert await outcomes(proxy, 20) == [500] * 20
        proxy.set_rules([Rule(RequestClass.OTHER, Fault.ERROR, 0.0)])
        assert await outcomes(proxy, 20) == [201] * 20
    with faultproxy.FaultProxy(upstream.url, seed=1, rules=half) as again:
        assert await outcomes(again, 200) == first


async def test_two_rules_share_one_class(
    proxy: faultproxy.FaultProxy, client: aiohttp.ClientSession
) -> None:
    proxy.set_rules(
        [Rule(RequestClass.OTHER, Fault.ERROR, 0.5), Rule(RequestClass.OTHER, Fault.CONFLICT, 0.5)]
    )
    statuses = await outcomes(proxy, 40)
    assert set(statuses) == {500, 409}
    assert proxy.faults_injected() == 40


def test_the_kubeconfig_points_plumb_at_the_proxy(
    proxy: faultproxy.FaultProxy, tmp_path: Path
) -> None:
    path = proxy.write_kubeconfig(tmp_path / "kubeconfig", "t0k")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    creds = credentials.load(path)
    assert creds.server == proxy.url
    assert creds.headers() == {"Authorization": "Bearer t0k"}
    assert creds.ssl_context() is False


async def test_stop_leaves_no_thread_and_no_listener(
    upstream: Upstream, client: aiohttp.ClientSession
) -> None:
    proxy = faultproxy.FaultProxy(upstream.url).start()
    port = int(proxy.url.rsplit(":", 1)[1])
    watch = await client.get(proxy.url + WATCH)
    assert await asyncio.wait_for(watch.content.readline(), 2.0) == ADDED
    proxy.pause()
    held = asyncio.create_task(client.post(proxy.url + BINDING, data=b"{}"))
    await asyncio.sleep(0.1)
    started = time.monotonic()
    proxy.stop()
    assert time.monotonic() - started < 2.0
    assert not [t for t in threading.enumerate() if t.name.startswith("faultproxy")]
    with pytest.raises(aiohttp.ServerDisconnectedError):
        await asyncio.wait_for(held, 2.0)
    watch.release()
    with contextlib.closing(socket.socket()) as probe, pytest.raises(ConnectionRefusedError):
        probe.connect(("127.0.0.1", port))
    proxy.stop()  # twice is fine
    with pytest.raises(RuntimeError, match="not running"):
        proxy.pause()
