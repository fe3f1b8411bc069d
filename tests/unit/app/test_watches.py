"""Watches are supervised: an event no handler can take (a bug, an unexpected payload) is
logged and counted, its collection is listed afresh after a backoff, the events after it
arrive, the other collections never stop, and shutdown still stops every watch at once."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import pytest
from aiohttp import web
from prometheus_client import parser

from plumb.app import watches
from plumb.backend import queue as queue_module
from plumb.k8s import client as k8s_client
from plumb.k8s import reflectors
from plumb.observability import metrics
from plumb_dev.testing.builders import make_node, make_pod
from tests.support import loopback
from tests.support.dra_bodies import claim_body, device, slice_body
from tests.support.fakes import FakeApi, ManualClock, make_scheduler
from tests.support.volume_objects import csidriver_body, storage_capacity_body

Script = Callable[[web.Request], Awaitable[web.StreamResponse]]
PODS, NODES = "/api/v1/pods", "/api/v1/nodes"


def _line(event_type: str, body: dict[str, Any]) -> bytes:
    return json.dumps({"type": event_type, "object": body}).encode() + b"\n"


def _events(*lines: bytes) -> Script:
    async def stream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        await response.prepare(request)
        for line in lines:
            await response.write(line)
        await response.write_eof()
        return response

    return stream


class Server:
    """A scripted API server: lists from ``lists``, each watch from the next of its path's
    ``scripts``, else held open until the test ends. Records what was asked."""

    def __init__(self) -> None:
        self.lists: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.versions: dict[str, str] = defaultdict(lambda: "1")
        self.scripts: dict[str, list[Script]] = defaultdict(list)
        self.listed: list[str] = []
        self.watched: list[tuple[str, str]] = []  # (path, resourceVersion)
        self.unserved: tuple[str, ...] = ()  # path prefixes answered 404 (an API not served)
        self.forbidden: tuple[str, ...] = ()  # path prefixes answered 403 (RBAC refuses them)
        self.done = asyncio.Event()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        if path.startswith(self.unserved or ("\0",)):
            raise web.HTTPNotFound()
        if path.startswith(self.forbidden or ("\0",)):
            raise web.HTTPForbidden()
        if request.query.get("watch") != "true":
            self.listed.append(path)
            return web.json_response(
                {"items": self.lists[path], "metadata": {"resourceVersion": self.versions[path]}}
            )
        self.watched.append((path, request.query["resourceVersion"]))
        if self.scripts[path]:
            return await self.scripts[path].pop(0)(request)
        await self.done.wait()  # the test cancels the watch while it waits here
        raise web.HTTPServiceUnavailable()


@pytest.fixture
async def server() -> AsyncIterator[tuple[Server, k8s_client.ApiClient]]:
    scripted = Server()
    app = web.Application()
    app.router.add_get("/{tail:.*}", scripted.handle)
    async with loopback.serving(app) as port:
        api = loopback.client(port)
        try:
            yield scripted, api
        finally:
            scripted.done.set()
            await api.close()


async def _until(condition: Callable[[], bool]) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the condition never came true")


async def _stop(task: asyncio.Task[None]) -> None:
    """Cancel ``task``, which must end at once (shutdown)."""
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, timeout=2)


async def test_a_handler_that_raises_once_is_followed_by_a_relist_and_later_events(
    server: tuple[Server, k8s_client.ApiClient], caplog: pytest.LogCaptureFixture
) -> None:
    scripted, api = server
    # The handler fails on "bad"; "c" comes after it in the same stream, so only the list
    # that follows the failure can bring it.
    scripted.scripts[PODS] = [
        _events(
            _line("ADDED", make_pod("a").resource_version("11").obj()),
            _line("ADDED", make_pod("bad").resource_version("12").obj()),
            _line("ADDED", make_pod("c").resource_version("13").obj()),
        ),
        _events(
            _line("MODIFIED", make_pod("bad").resource_version("21").obj()),
            _line("ADDED", make_pod("d").resource_version("22").obj()),
        ),
    ]
    seen: list[tuple[str, str]] = []
    failed: list[Exception] = []
    sleeps: list[float] = []
    lists = iter(["20"])

    def on_event(kind: str, body: Mapping[str, Any]) -> None:
        name = body["metadata"]["name"]
        if name == "bad" and kind == "ADDED":
            raise KeyError("spec")  # a handler's bug, once
        seen.append((kind, name))

    async def relist() -> str:
        seen.append(("LISTED", ""))
        return next(lists)

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    caplog.set_level(logging.INFO, logger=reflectors.__name__)
    task = asyncio.create_task(
        reflectors.watch_forever(
            api,
            PODS,
            "10",
            on_event=on_event,
            relist=relist,
            on_failure=failed.append,
            sleep=sleep,
        )
    )
    await _until(lambda: len(scripted.watched) == 3)
    assert not task.done()  # still watching: the failure did not end it
    await _stop(task)

    assert seen == [("ADDED", "a"), ("LISTED", ""), ("MODIFIED", "bad"), ("ADDED", "d")]
    # Resumed from the list's version, and from the last event's after that stream ended.
    assert scripted.watched == [(PODS, "10"), (PODS, "20"), (PODS, "22")]
    assert sleeps == [1.0]
    assert [type(error) for error in failed] == [KeyError]
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1
    message = errors[0].getMessage()
    assert message.startswith("watch of /api/v1/pods failed: KeyError: 'spec' (raised at ")
    assert "in on_event)" in message
    assert message.endswith("; re-listing in 1.0 s")
    assert errors[0].exc_info is None  # one line: plumb's log carries no traceback
    assert "Traceback" not in caplog.text


async def test_failures_back_off_doubling_to_the_cap_and_a_failing_relist_is_retried(
    server: tuple[Server, k8s_client.ApiClient],
) -> None:
    scripted, api = server
    # Every event fails for a while (a poison object the watch keeps sending), and the first
    # list after one of the failures fails too (its handler has the same bug).
    scripted.scripts[PODS] = [
        _events(_line("ADDED", make_pod("bad").resource_version(str(11 + i)).obj()))
        for i in range(6)
    ]
    scripted.scripts[PODS].append(
        _events(_line("ADDED", make_pod("good").resource_version("30").obj()))
    )
    sleeps: list[float] = []
    relists = 0
    seen: list[str] = []

    def on_event(kind: str, body: Mapping[str, Any]) -> None:
        if body["metadata"]["name"] == "bad":
            raise ValueError("a payload no handler expected")
        seen.append(body["metadata"]["name"])

    async def relist() -> str:
        nonlocal relists
        relists += 1
        if relists == 2:
            raise RuntimeError("the list's handler failed too")
        return "20"

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    task = asyncio.create_task(
        reflectors.watch_forever(api, PODS, "10", on_event=on_event, relist=relist, sleep=sleep)
    )
    await _until(lambda: len(scripted.watched) == 8)
    await _stop(task)
    assert seen == ["good"]
    # Six watches failed and one list: each waits twice as long as the one before, up to 30 s.
    assert sleeps == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert relists == 7  # one after each failure, the failed list retried
    assert [version for _, version in scripted.watched] == ["10", *["20"] * 6, "30"]


async def test_shutdown_stops_a_watch_waiting_out_its_backoff(
    server: tuple[Server, k8s_client.ApiClient],
) -> None:
    scripted, api = server
    scripted.scripts[PODS] = [_events(_line("ADDED", make_pod("bad").resource_version("11").obj()))]
    waiting = asyncio.Event()

    async def sleep(seconds: float) -> None:
        waiting.set()
        await asyncio.Event().wait()  # a backoff longer than the test

    def on_event(kind: str, body: Mapping[str, Any]) -> None:
        raise RuntimeError("bug")

    async def relist() -> str:
        raise AssertionError("cancelled before the relist")

    task = asyncio.create_task(
        reflectors.watch_forever(api, PODS, "10", on_event=on_event, relist=relist, sleep=sleep)
    )
    await asyncio.wait_for(waiting.wait(), timeout=5)
    await _stop(task)


async def test_a_node_plumb_cannot_parse_is_left_out_and_the_watches_go_on(
    server: tuple[Server, k8s_client.ApiClient],
) -> None:
    # The whole feed, as plumb runs it: one node's payload plumb cannot read. It is logged and
    # left out (feed._read) rather than failing the watch: a relist would meet it again, for
    # ever. The nodes' watch goes on (no relist, nothing counted) and a pod reaches the queue.
    scripted, api = server
    good = make_node("n0").capacity(cpu="4").obj()
    scripted.lists[NODES] = [good]
    poison = make_node("n1").capacity(cpu="4").obj()
    poison["spec"] = {"taints": "NoSchedule"}  # a string where a list belongs
    later = make_node("n2").capacity(cpu="4").obj()
    later["metadata"]["resourceVersion"] = "8"

    async def pods(request: web.Request) -> web.StreamResponse:
        pod = make_pod("web-0", "shop").uid("u0").scheduler("plumb").obj()
        pod["metadata"]["resourceVersion"] = "9"
        return await _events(_line("ADDED", pod))(request)

    scripted.scripts[NODES] = [_events(_line("ADDED", poison), _line("ADDED", later))]
    scripted.scripts[PODS] = [pods]
    scheduler = make_scheduler(FakeApi(), ManualClock())
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    tasks = await watches.sync_and_watch(scheduler, api, sleep=sleep)
    try:
        await _until(lambda: scheduler.queue.counts()[queue_module.Where.ACTIVE] == 1)
        await _until(lambda: "n2" in scheduler.cache.nodes.names())
        assert sorted(scheduler.cache.nodes.names()) == ["n0", "n2"]
        assert scripted.listed.count(NODES) == 1
        assert not any(task.done() for task in tasks)
        page = scheduler.metrics.render().decode()
        restarts = {
            sample.labels["resource"]: sample.value
            for family in parser.text_string_to_metric_families(page)
            for sample in family.samples
            if sample.name == metrics.WATCH_RESTARTS
        }
        assert restarts["nodes"] == 0.0  # on the page from the start, never counted
        assert set(restarts.values()) == {0.0}
    finally:
        for task in tasks:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(asyncio.gather(*tasks), timeout=2)
    assert all(task.cancelled() for task in tasks)


async def test_csidrivers_and_storage_capacities_are_listed_then_watched_into_the_store(
    server: tuple[Server, k8s_client.ApiClient],
) -> None:
    # VolumeBinding's capacity check and score and NodeVolumeLimits' driver check read these
    # two kinds: listed at start, then each watch brings its changes.
    scripted, api = server
    drivers = "/apis/storage.k8s.io/v1/csidrivers"
    capacities = "/apis/storage.k8s.io/v1/csistoragecapacities"
    scripted.lists[drivers] = [csidriver_body("csi.example", storage_capacity=True)]
    scripted.lists[capacities] = [storage_capacity_body("a", "fast", capacity="1Gi", node="n")]
    scripted.scripts[capacities] = [
        _events(
            _line("ADDED", storage_capacity_body("b", "fast", capacity="2Gi", node="n")),
            _line("DELETED", storage_capacity_body("a", "fast", capacity="1Gi", node="n")),
        )
    ]
    scripted.scripts[drivers] = [_events(_line("DELETED", csidriver_body("csi.example")))]
    scheduler = make_scheduler(FakeApi(), ManualClock())

    async def sleep(_seconds: float) -> None:
        await asyncio.sleep(0)

    tasks = await watches.sync_and_watch(scheduler, api, sleep=sleep)
    try:
        store = scheduler.cache.volumes
        assert {drivers, capacities} <= set(scripted.listed)
        await _until(lambda: [c.name for c in store.capacities_of_class("fast")] == ["b"])
        await _until(lambda: store.csidriver("csi.example") is None)
    finally:
        for task in tasks:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(asyncio.gather(*tasks), timeout=2)


@contextlib.asynccontextmanager
async def _watching(
    scheduler: Any, api: k8s_client.ApiClient
) -> AsyncIterator[list[asyncio.Task[None]]]:
    async def sleep(_seconds: float) -> None:
        await asyncio.sleep(0)

    tasks = await watches.sync_and_watch(scheduler, api, sleep=sleep)
    try:
        yield tasks
    finally:
        for task in tasks:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(asyncio.gather(*tasks), timeout=2)


async def test_dra_objects_are_listed_then_watched_into_the_store(
    server: tuple[Server, k8s_client.ApiClient],
) -> None:
    scripted, api = server
    slices, claims = (f"{watches.DRA_GROUP}/{r}" for r in ("resourceslices", "resourceclaims"))
    scripted.lists[slices] = [slice_body("node-a-gpus", device("gpu-0"))]
    scripted.lists[f"{watches.DRA_GROUP}/deviceclasses"] = [{"metadata": {"name": "gpu"}}]
    scripted.scripts[claims] = [_events(_line("ADDED", claim_body("train-gpu")))]
    scripted.scripts[slices] = [_events(_line("DELETED", slice_body("node-a-gpus")))]
    scheduler = make_scheduler(FakeApi(), ManualClock())
    store = scheduler.cache.dra
    async with _watching(scheduler, api):
        assert {path for path, _kind in watches.DRA_PATHS} <= set(scripted.listed)
        assert store.device_class("gpu") is not None
        await _until(lambda: store.claim("ml", "train-gpu") is not None)
        await _until(lambda: store.resource_slice("node-a-gpus") is None)
        assert {path for path, _version in scripted.watched} >= {slices, claims}


async def test_an_api_server_without_resource_k8s_io_is_logged_once_and_plumb_goes_on(
    server: tuple[Server, k8s_client.ApiClient], caplog: pytest.LogCaptureFixture
) -> None:
    scripted, api = server
    scripted.unserved = (watches.DRA_GROUP,)
    scripted.lists[NODES] = [make_node("n0").capacity(cpu="4").obj()]
    scheduler = make_scheduler(FakeApi(), ManualClock())
    caplog.set_level(logging.WARNING, logger=watches.__name__)
    async with _watching(scheduler, api) as tasks:
        assert scheduler.cache.nodes.names() == ["n0"]
        assert not any(path.startswith(watches.DRA_GROUP) for path, _v in scripted.watched)
        assert not any(task.done() for task in tasks)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "the API server does not serve /apis/resource.k8s.io/v1 (GET "
        "/apis/resource.k8s.io/v1/resourceslices: HTTP 404); plumb goes on without it: pods "
        "with resourceClaims wait, as their claims cannot exist"
    ]


async def test_pod_groups_plumb_may_not_list_are_logged_and_plumb_goes_on(
    server: tuple[Server, k8s_client.ApiClient], caplog: pytest.LogCaptureFixture
) -> None:
    """A ClusterRole without the PodGroup rules (an older install) costs the gangs, not the
    scheduler: the 403 is logged once, and every other collection is watched."""
    scripted, api = server
    upstream = watches.GROUP_PATHS[0][0]
    scripted.forbidden = (upstream,)
    scripted.lists[NODES] = [make_node("n0").capacity(cpu="4").obj()]
    scheduler = make_scheduler(FakeApi(), ManualClock())
    caplog.set_level(logging.WARNING, logger=watches.__name__)
    async with _watching(scheduler, api) as tasks:
        assert scheduler.cache.nodes.names() == ["n0"]
        assert not any(path.startswith(upstream) for path, _v in scripted.watched)
        assert any(path.startswith(watches.DRA_GROUP) for path in scripted.listed)
        assert not any(task.done() for task in tasks)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "plumb's service account may not list (see its ClusterRole) /apis/scheduling.k8s.io/"
        "v1beta1 (GET /apis/scheduling.k8s.io/v1beta1/podgroups: HTTP 403); plumb goes on "
        "without it: pods naming a PodGroup of scheduling.k8s.io are decided one by one"
    ]
