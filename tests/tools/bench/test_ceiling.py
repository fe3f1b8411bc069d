"""The raw binder's ceiling: the API work every scheduler must do per pod, with plumb's shape
and concurrency, and nothing more."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any, cast

from plumb.app import runtime as app_running
from plumb.backend.records import objects
from plumb.events import Recorder
from plumb.k8s import client as k8s_client
from plumb_dev.bench import ceiling
from plumb_dev.testing import builders


class CeilingApi:
    """Answers bindings (refusing the names in ``refuse``) and events, recording each call."""

    def __init__(self, refuse: frozenset[str] = frozenset(), expect: int = 0) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.refuse = refuse
        self.expect = expect
        self.done = asyncio.Event()
        """Set once ``expect`` bindings and events were made."""

    def _record(self, kind: str, args: Any) -> None:
        self.calls.append((kind, args))
        if sum(1 for k, _ in self.calls if k in ("bind", "event")) >= self.expect:
            self.done.set()

    async def request(self, method: str, path: str, **_: Any) -> k8s_client.ApiResponse:
        self.calls.append(("request", path))
        return k8s_client.ApiResponse(status=200, body={})

    async def bind(
        self, *, namespace: str, name: str, uid: str, node: str, traceparent: str | None = None
    ) -> k8s_client.ApiResponse:
        self._record("bind", (namespace, name, uid, node))
        return k8s_client.ApiResponse(status=409 if name in self.refuse else 201, body={})

    async def create_event(
        self, *, namespace: str, event: dict[str, Any]
    ) -> k8s_client.ApiResponse:
        self._record("event", event)
        return k8s_client.ApiResponse(status=201, body={})

    async def patch_pod_status(self, **_: Any) -> k8s_client.ApiResponse:
        return k8s_client.ApiResponse(status=200, body={})


def test_the_ceiling_uses_plumbs_concurrency() -> None:
    assert app_running.RunSettings.bind_concurrency == ceiling.CONCURRENCY
    recorder_default = inspect.signature(Recorder).parameters["concurrency"].default
    assert recorder_default == ceiling.EVENT_CONCURRENCY


async def test_the_scheduled_event_is_shaped_as_plumbs() -> None:
    api = CeilingApi()
    recorder = Recorder(api, instance="plumb-0")
    recorder.scheduled(objects.parse_pod(builders.make_pod("web-1", "ns").uid("uid-1").obj()), "n7")
    await recorder.drain()
    [(_, plumbs)] = api.calls
    ours = ceiling.scheduled_event(
        namespace="ns", name="web-1", uid="uid-1", node="n7", instance="plumb-0"
    )
    assert set(ours) == set(plumbs)
    varying = {"metadata", "eventTime", "reportingController"}
    assert {k: v for k, v in ours.items() if k not in varying} == {
        k: v for k, v in plumbs.items() if k not in varying
    }
    assert ours["metadata"]["name"].startswith("web-1.")
    assert ours["metadata"]["namespace"] == "ns"
    assert ours["eventTime"].endswith("Z")


async def test_the_raw_binder_binds_then_posts_the_event() -> None:
    api = CeilingApi(refuse=frozenset({"pod-2"}), expect=7)  # 4 bindings, 3 events
    binder = ceiling.RawBinder(
        cast(k8s_client.ApiClient, api), "ns", lambda name: f"node-of-{name}", concurrency=2
    )
    await binder.warm_up()
    for i in range(3):
        binder.submit(f"pod-{i}", f"uid-{i}")
    await binder.on_added(builders.make_pod("bound", "ns").uid("u").node("n").obj())
    await binder.on_added(builders.make_pod("pod-3", "ns").uid("uid-3").obj())
    await asyncio.wait_for(api.done.wait(), timeout=10)
    await binder.stop()
    binds = [args for kind, args in api.calls if kind == "bind"]
    assert sorted(binds) == [("ns", f"pod-{i}", f"uid-{i}", f"node-of-pod-{i}") for i in range(4)]
    # The refused binding gets no event, and is a failure; the already-bound pod is left alone.
    events = sorted(body["regarding"]["name"] for kind, body in api.calls if kind == "event")
    assert events == ["pod-0", "pod-1", "pod-3"]
    assert binder.events_posted == 3
    assert binder.failures == ["pod-2 -> node-of-pod-2: HTTP 409"]


def _claimed(name: str, claim: str | None) -> dict[str, Any]:
    """A pending pod with a claim from a template; ``claim``: the one the controller made."""
    body = builders.make_pod(name, "ns").uid(f"uid-{name}").obj()
    body["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "gpu"}]
    if claim is not None:
        body["status"] = {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": claim}]}
    return body


async def test_a_pod_with_claims_is_bound_once_they_exist_and_after_they_are_written() -> None:
    api = CeilingApi(expect=4)  # 2 bindings, 2 events
    reserved: list[tuple[str, str, int]] = []

    async def reserve(pod: dict[str, Any], node: str) -> str | None:
        claim = pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
        reserved.append((claim, node, len([c for c in api.calls if c[0] == "bind"])))
        return "HTTP 409: conflict" if claim == "c-refused" else None

    binder = ceiling.RawBinder(
        cast(k8s_client.ApiClient, api),
        "ns",
        lambda name: f"node-of-{name}",
        concurrency=1,
        reserve=reserve,
        ready=lambda pod: bool((pod.get("status") or {}).get("resourceClaimStatuses")),
    )
    await binder.on_added(_claimed("a", None))  # its claim not made yet: left
    await binder.on_added(_claimed("b", "c-b"))
    await binder.on_modified(_claimed("a", "c-a"))  # the controller recorded it
    await binder.on_modified(_claimed("a", "c-a"))  # seen again: taken once
    await binder.on_added(_claimed("c", "c-refused"))
    await asyncio.wait_for(api.done.wait(), timeout=10)
    await binder.stop()
    binds = [args[1] for kind, args in api.calls if kind == "bind"]
    assert binds == ["b", "a"]
    # Each claim written before its pod's binding; the refused one's pod is not bound.
    assert reserved == [
        ("c-b", "node-of-b", 0),
        ("c-a", "node-of-a", 1),
        ("c-refused", "node-of-c", 2),
    ]
    assert binder.failures == ["c -> node-of-c: HTTP 409: conflict"]
