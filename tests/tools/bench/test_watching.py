"""The bench's own watch: when each pod was seen bound, and when its claims were seen made."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web

from plumb_dev.bench import watching
from plumb_dev.testing import builders
from tests.support import loopback

JSON = dict[str, Any]


def _pod(version: str, *, claim: str = "", node: str = "") -> JSON:
    body = builders.make_pod("pod-00000", "ns").uid("u0").obj()
    body["metadata"]["resourceVersion"] = version
    if claim:
        body["status"] = {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": claim}]}
    if node:
        body["spec"]["nodeName"] = node
    return body


def _app(events: list[tuple[str, JSON]], done: asyncio.Event) -> web.Application:
    async def pods(request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") != "true":
            return web.json_response({"metadata": {"resourceVersion": "1"}, "items": []})
        response = web.StreamResponse()
        await response.prepare(request)
        for kind, body in events:
            await response.write(json.dumps({"type": kind, "object": body}).encode() + b"\n")
        await done.wait()  # the watch stays open until the test is over
        return response

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/ns/pods", pods)
    return app


async def test_a_pod_is_seen_pending_then_claimed_then_bound_and_its_updates_are_passed_on() -> (
    None
):
    events = [
        ("ADDED", _pod("2")),
        ("MODIFIED", _pod("3", claim="pod-00000-gpu-abcde")),
        ("MODIFIED", _pod("4", claim="pod-00000-gpu-abcde", node="n1")),
    ]
    added: list[str] = []
    modified: list[str] = []

    async def on_added(pod: JSON) -> None:
        added.append(pod["metadata"]["resourceVersion"])

    async def on_modified(pod: JSON) -> None:
        modified.append(pod["metadata"]["resourceVersion"])

    done = asyncio.Event()
    async with loopback.serving(_app(events, done)) as port:
        api = loopback.client(port)
        watch = watching.PodWatch(api, "ns", on_added=on_added, on_modified=on_modified)
        try:
            await watch.start()
            for _ in range(100):
                if watch.bound:
                    break
                await asyncio.sleep(0.02)
        finally:
            await watch.stop()
            await api.close()
            done.set()
    assert (added, modified) == (["2"], ["3", "4"])
    assert watch.pending == {}
    assert set(watch.claimed) == set(watch.bound) == {"pod-00000"}
    assert watch.claimed["pod-00000"] <= watch.bound["pod-00000"]
