"""The per-pod requests' own HTTP/1.1 connections: answers of every framing read whole,
connections kept and reused, and every way a request can go wrong raised as a TransportError."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from plumb.k8s import client as k8s_client
from tests.support import loopback

BINDING = {"kind": "Status", "status": "Success", "code": 201}


@contextlib.asynccontextmanager
async def _raw_server(answer: bytes) -> AsyncIterator[k8s_client.ApiClient]:
    """plumb's client and a server that answers every request with ``answer``'s bytes, on the
    same connection unless the answer says it closes it (or has no length: its body runs to
    the close)."""
    writers: list[asyncio.StreamWriter] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while await reader.readuntil(b"\r\n\r\n"):
                writer.write(answer)
                await writer.drain()
                if b"Connection: close" in answer or b"Content-Length" not in answer:
                    break
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    client = loopback.client(int(server.sockets[0].getsockname()[1]))
    try:
        yield client
    finally:
        await client.close()
        server.close()
        for writer in writers:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
        await server.wait_closed()


@pytest.fixture
async def api() -> AsyncIterator[tuple[k8s_client.ApiClient, list[dict[str, object]]]]:
    seen: list[dict[str, object]] = []

    async def binding(request: web.Request) -> web.StreamResponse:
        seen.append(
            {
                "path": request.path,
                "peer": request.transport.get_extra_info("peername") if request.transport else None,
                "body": await request.json(),
                "authorization": request.headers.get("Authorization"),
                "content_type": request.headers.get("Content-Type"),
                "traceparent": request.headers.get("traceparent"),
            }
        )
        return web.json_response(BINDING, status=201)

    async def event(request: web.Request) -> web.StreamResponse:
        # A streamed (chunked) answer, as the API server's for a body over 2 KiB.
        response = web.StreamResponse(status=201, headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        body = json.dumps(await request.json() | {"padding": "x" * 5000}).encode()
        for start in range(0, len(body), 1000):
            await response.write(body[start : start + 1000])
        await response.write_eof()
        return response

    async def slow(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(1)  # past the test's 0.2 s; the server's cleanup waits for it
        return web.json_response({})

    app = web.Application()
    app.router.add_post("/api/v1/namespaces/{ns}/pods/{name}/binding", binding)
    app.router.add_post("/apis/events.k8s.io/v1/namespaces/{ns}/events", event)
    app.router.add_patch("/api/v1/namespaces/{ns}/pods/{name}/status", slow)
    async with loopback.serving(app) as port:
        client = loopback.client(port)
        try:
            yield client, seen
        finally:
            await client.close()


async def test_a_binding_is_posted_and_its_answer_read(
    api: tuple[k8s_client.ApiClient, list[dict[str, object]]],
) -> None:
    client, seen = api
    response = await client.bind(namespace="shop", name="web-1", uid="u1", node="n1")
    assert (response.status, response.body) == (201, BINDING)
    assert seen[0]["path"] == "/api/v1/namespaces/shop/pods/web-1/binding"
    assert seen[0]["content_type"] == "application/json"
    body = seen[0]["body"]
    assert isinstance(body, dict)
    assert body["target"] == {"apiVersion": "v1", "kind": "Node", "name": "n1"}


async def test_a_traceparent_goes_with_the_binding_or_with_the_tasks_requests(
    api: tuple[k8s_client.ApiClient, list[dict[str, object]]],
) -> None:
    client, seen = api
    given = "00-" + "ab" * 16 + "-" + "cd" * 8 + "-01"
    await client.bind(namespace="shop", name="web-1", uid="u1", node="n1", traceparent=given)
    token = k8s_client.TRACEPARENT.set(lambda: "00-" + "ef" * 16 + "-" + "12" * 8 + "-00")
    try:
        await client.bind(namespace="shop", name="web-2", uid="u2", node="n1")
        await client.bind(namespace="shop", name="web-3", uid="u3", node="n1", traceparent=given)
    finally:
        k8s_client.TRACEPARENT.reset(token)
    await client.bind(namespace="shop", name="web-4", uid="u4", node="n1")
    assert [entry["traceparent"] for entry in seen] == [
        given,
        "00-" + "ef" * 16 + "-" + "12" * 8 + "-00",  # the task's (PreBind's)
        given,  # the request's own wins
        None,  # tracing off: no header
    ]


async def test_connections_are_kept_and_reused(
    api: tuple[k8s_client.ApiClient, list[dict[str, object]]],
) -> None:
    client, seen = api
    for i in range(5):
        await client.bind(namespace="shop", name=f"web-{i}", uid=f"u{i}", node="n1")
    assert len({str(s["peer"]) for s in seen}) == 1  # one connection, one request after another
    await asyncio.gather(
        *(client.bind(namespace="shop", name=f"w-{i}", uid=f"v{i}", node="n1") for i in range(8))
    )
    assert 1 < len({str(s["peer"]) for s in seen}) <= 9  # concurrent requests open more


async def test_a_chunked_answer_is_read_whole(
    api: tuple[k8s_client.ApiClient, list[dict[str, object]]],
) -> None:
    client, _seen = api
    for _ in range(2):  # the connection stays usable after it
        response = await client.create_event(namespace="shop", event={"note": "Scheduled"})
        assert response.status == 201
        assert response.body["note"] == "Scheduled"
        assert len(response.body["padding"]) == 5000


async def test_a_request_past_its_timeout_raises_a_transport_error(
    api: tuple[k8s_client.ApiClient, list[dict[str, object]]],
) -> None:
    client, _seen = api
    path = "/api/v1/namespaces/shop/pods/web-1/status"
    with pytest.raises(k8s_client.TransportError, match="TimeoutError"):
        await client.request("PATCH", path, body={}, request_timeout=0.2, hot=True)
    response = await client.bind(namespace="shop", name="web-1", uid="u1", node="n1")
    assert response.status == 201  # a fresh connection for the next request


async def test_a_refused_connection_raises_a_transport_error() -> None:
    server = await asyncio.start_server(lambda _r, _w: None, "127.0.0.1", 0)
    port = int(server.sockets[0].getsockname()[1])
    server.close()
    await server.wait_closed()
    client = loopback.client(port)
    with pytest.raises(k8s_client.TransportError, match="binding"):
        await client.bind(namespace="shop", name="web-1", uid="u1", node="n1")
    await client.close()


@pytest.mark.parametrize(
    ("answer", "status", "body"),
    [
        # Connection: close: the answer is read, the connection not kept.
        (
            b"HTTP/1.1 409 Conflict\r\nContent-Type: application/json\r\nContent-Length: 13\r\n"
            b'Connection: close\r\n\r\n{"code": 409}',
            409,
            {"code": 409},
        ),
        # No Content-Length, not chunked: the body runs to the end of the connection.
        (b"HTTP/1.0 500 Oops\r\nContent-Type: text/plain\r\n\r\n", 500, ""),
        # An interim answer before the real one.
        (
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n"
            b"Content-Type: application/json\r\n\r\n{}",
            201,
            {},
        ),
    ],
)
async def test_answers_of_every_framing_are_read(answer: bytes, status: int, body: object) -> None:
    async with _raw_server(answer) as client:
        for _ in range(2):  # the connection reused, or a new one where the first was closed
            response = await client.bind(namespace="shop", name="web-1", uid="u1", node="n1")
            assert (response.status, response.body) == (status, body)


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 201 Created\r\nContent-Length: 50\r\n\r\n{}",  # cut short
        b"nonsense\r\n\r\n",  # not HTTP
        b"",  # closed with no answer at all
    ],
)
async def test_a_broken_answer_raises_a_transport_error(answer: bytes) -> None:
    async with _raw_server(answer + b"Connection: close") as client:
        with pytest.raises(k8s_client.TransportError):
            await client.bind(namespace="shop", name="web-1", uid="u1", node="n1")


def test_tls_connections_get_the_smaller_read_buffer() -> None:
    """asyncio's SSL protocol allocates its whole read buffer per connection: plumb asks for
    32 KiB instead of 256 KiB (a hundred connections held 27 MiB)."""
    import asyncio.sslproto

    before = asyncio.sslproto.SSLProtocol.max_size
    try:
        k8s_client.limit_tls_buffers()
        assert asyncio.sslproto.SSLProtocol.max_size == k8s_client.TLS_READ_BUFFER == 32 * 1024
    finally:
        asyncio.sslproto.SSLProtocol.max_size = before
