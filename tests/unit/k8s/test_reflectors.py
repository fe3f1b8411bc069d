"""The pod watch over a scripted HTTP server: resuming, bookmarks, 410 re-lists, backoff."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web

from plumb.k8s import client as k8s_client
from plumb.k8s import reflectors
from plumb_dev.testing.builders import make_pod
from tests.support import loopback

Script = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _line(event_type: str, body: dict[str, Any]) -> bytes:
    return json.dumps({"type": event_type, "object": body}).encode() + b"\n"


async def _stream(request: web.Request, *chunks: bytes) -> web.StreamResponse:
    response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
    await response.prepare(request)
    for chunk in chunks:
        await response.write(chunk)
        await asyncio.sleep(0.01)  # separate reads, so lines arrive cut in pieces
    await response.write_eof()
    return response


@pytest.fixture
async def served() -> AsyncIterator[tuple[k8s_client.ApiClient, list[Script], list[str]]]:
    """An API client pointed at a server that answers each watch with the next script."""
    scripts: list[Script] = []
    versions: list[str] = []
    done = asyncio.Event()

    async def pods(request: web.Request) -> web.StreamResponse:
        assert request.query["watch"] == "true"
        assert request.query["allowWatchBookmarks"] == "true"
        versions.append(request.query["resourceVersion"])
        if not scripts:
            await done.wait()  # the test cancels the watch while it waits here
            raise web.HTTPServiceUnavailable()
        return await scripts.pop(0)(request)

    app = web.Application()
    app.router.add_get("/api/v1/pods", pods)
    async with loopback.serving(app) as port:
        api = loopback.client(port)
        try:
            yield api, scripts, versions
        finally:
            done.set()
            await api.close()


async def test_the_watch_resumes_relists_on_410_and_backs_off_on_errors(
    served: tuple[k8s_client.ApiClient, list[Script], list[str]],
) -> None:
    api, scripts, versions = served
    # Beyond aiohttp's line limit.
    big = make_pod("big").resource_version("12").annotation("note", "x" * 300_000).obj()
    added = _line("ADDED", make_pod("a").resource_version("11").obj())
    modified = _line("MODIFIED", make_pod("a").resource_version("14").obj())

    async def first(request: web.Request) -> web.StreamResponse:
        # A line cut in two, a bookmark, a 300 kB object in pieces; then the server ends it.
        big_line = _line("ADDED", big)
        return await _stream(
            request,
            added[:7],
            added[7:] + _line("BOOKMARK", {"metadata": {"resourceVersion": "12"}})[:20],
            _line("BOOKMARK", {"metadata": {"resourceVersion": "12"}})[20:] + big_line[:100_000],
            big_line[100_000:] + modified,
        )

    async def gone(request: web.Request) -> web.StreamResponse:
        return web.json_response({"kind": "Status", "code": 410}, status=410)

    async def expired_in_stream(request: web.Request) -> web.StreamResponse:
        return await _stream(request, _line("ERROR", {"kind": "Status", "code": 410}))

    async def broken(request: web.Request) -> web.StreamResponse:
        return web.json_response({"kind": "Status", "code": 500}, status=500)

    async def last(request: web.Request) -> web.StreamResponse:
        return await _stream(request, _line("DELETED", make_pod("a").resource_version("31").obj()))

    scripts.extend([first, gone, expired_in_stream, broken, last])
    seen: list[tuple[str, str]] = []
    relists = iter(["20", "30"])
    sleeps: list[float] = []

    async def relist() -> str:
        return next(relists)

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    task = asyncio.create_task(
        reflectors.watch_forever(
            api,
            "/api/v1/pods",
            "10",
            on_event=lambda kind, body: seen.append((kind, body["metadata"]["name"])),
            relist=relist,
            sleep=sleep,
        )
    )
    for _ in range(500):
        if len(versions) == 6:
            break
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert seen == [("ADDED", "a"), ("ADDED", "big"), ("MODIFIED", "a"), ("DELETED", "a")]
    # Resumed from the last event's version, then from each re-list's, and again after the 500.
    assert versions == ["10", "14", "20", "30", "30", "31"]
    assert sleeps == [1.0]


async def test_a_watch_the_server_ends_at_once_is_reopened_after_a_backoff(
    served: tuple[k8s_client.ApiClient, list[Script], list[str]],
) -> None:
    # A proxy or a server answering 200 and closing at once: client-go's "very short watch".
    # Reopened at once, it would be thousands of requests a second.
    api, scripts, versions = served

    async def empty(request: web.Request) -> web.StreamResponse:
        return await _stream(request)

    async def one(request: web.Request) -> web.StreamResponse:
        return await _stream(request, _line("ADDED", make_pod("a").resource_version("11").obj()))

    scripts.extend([empty, empty, empty, one, empty])
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    async def relist() -> str:
        raise AssertionError("no re-list: nothing expired")

    task = asyncio.create_task(
        reflectors.watch_forever(
            api, "/api/v1/pods", "10", on_event=lambda *_: None, relist=relist, sleep=sleep
        )
    )
    for _ in range(500):
        if len(versions) == 6:
            break
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # Doubling while the watch keeps ending empty; an event resets it.
    assert sleeps == [1.0, 2.0, 4.0, 1.0]
    assert versions == ["10", "10", "10", "10", "11", "11"]
