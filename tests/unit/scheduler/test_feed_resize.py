"""A pod resized in place, as the watch reports it: the cache counts it as the release plumb
decides as does, and a resize that gives room back sends the pods short of it to be retried."""

from __future__ import annotations

from typing import Any

import pytest

from plumb import scheduler as scheduler_module
from plumb.backend import queue as queue_module
from plumb.backend.records import objects
from plumb.framework import emulation
from plumb.framework.plugins import noderesourcesfit
from plumb_dev.testing.builders import make_node, make_pod
from tests.support.fakes import FakeApi, ManualClock, make_scheduler


def _resizing(main: str, side: str) -> dict[str, Any]:
    """A pod of two containers asking 2 and 1 cpu, bound to n1, whose status says they run
    with ``main`` and ``side`` cpu (and were allocated as much)."""
    body = (
        make_pod("resized", "ns")
        .uid("resized")
        .generation(3)
        .req(cpu="2")
        .container("side", cpu="1")
        .node("n1")
        .obj()
    )
    body["status"] = {
        "phase": "Running",
        "containerStatuses": [
            {
                "name": name,
                "resources": {"requests": {"cpu": cpu}},
                "allocatedResources": {"cpu": cpu},
            }
            for name, cpu in (("main", main), ("side", side))
        ],
    }
    return body


@pytest.mark.parametrize(("minor", "cpu"), [(34, 4000), (36, 4000), (37, 3000)])
def test_the_cache_counts_a_resizing_pod_as_the_release_does(minor: int, cpu: int) -> None:
    s = make_scheduler(FakeApi(), ManualClock())
    s.reconfigure(scheduler_module.defaults("plumb", emulation.emulate(minor)))
    s.feed.resync([make_node("n1").capacity(cpu="8").obj()], [])
    s.feed.on_pod("ADDED", _resizing("1", "2"))
    assert s.cache.nodes.requested("n1")["cpu"] == cpu


def test_a_resize_that_gives_room_back_retries_the_pods_short_of_it() -> None:
    clock = ManualClock()
    s = make_scheduler(FakeApi(), clock)
    s.feed.resync([make_node("n1").capacity(cpu="8").obj()], [])
    s.feed.on_pod("ADDED", _resizing("2", "3"))  # 5 cpu: main asked 2, side grows to 3
    assert s.cache.nodes.requested("n1")["cpu"] == 5000
    s.queue.add(objects.parse_pod(make_pod("waiting", "ns").uid("waiting").obj()))
    entry = s.queue._pop_active()
    assert entry is not None
    s.queue.unschedulable("waiting", frozenset({noderesourcesfit.NAME}))
    clock.advance(60)  # past any backoff
    s.feed.on_pod("MODIFIED", _resizing("2", "1"))  # side back to its spec: 3 cpu
    assert s.cache.nodes.requested("n1")["cpu"] == 3000
    assert s.queue.where("waiting") is queue_module.Where.ACTIVE


def test_a_resize_that_takes_more_room_retries_nothing() -> None:
    clock = ManualClock()
    s = make_scheduler(FakeApi(), clock)
    s.feed.resync([make_node("n1").capacity(cpu="8").obj()], [])
    s.feed.on_pod("ADDED", _resizing("2", "1"))
    s.queue.add(objects.parse_pod(make_pod("waiting", "ns").uid("waiting").obj()))
    assert s.queue._pop_active() is not None
    s.queue.unschedulable("waiting", frozenset({noderesourcesfit.NAME}))
    clock.advance(60)
    s.feed.on_pod("MODIFIED", _resizing("2", "3"))
    assert s.cache.nodes.requested("n1")["cpu"] == 5000
    assert s.queue.where("waiting") is queue_module.Where.UNSCHEDULABLE
