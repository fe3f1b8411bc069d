"""The Python plugins' points around a placement, in the scheduling loop: Reserve and Permit
refusing a pod undo its reservation and report kube-scheduler's FitError over the one node;
PreBind refusing fails the binding and unreserves; PostBind runs once the pod is bound."""

from __future__ import annotations

import pytest

from plumb import binder, events
from plumb import scheduler as scheduler_module
from plumb.backend import queue as queue_module
from plumb.extensions import registry
from plumb.framework import schedconfig
from plumb.scheduler import profiles
from plumb_dev.testing.builders import make_node, make_pod
from tests.support import sample_plugins
from tests.support.fakes import FakeApi, ManualClock, reference_kernel

FOUND = registry.of(sample_plugins.Gatekeeper)
CONFIG = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: plumb
  plugins: {multiPoint: {enabled: [{name: Gatekeeper}]}}
"""


@pytest.fixture(autouse=True)
def _ledger() -> None:
    sample_plugins.Gatekeeper.reserved.clear()
    sample_plugins.Gatekeeper.unreserved.clear()


async def _run(*refuse: str) -> tuple[FakeApi, scheduler_module.Scheduler]:
    api, clock = FakeApi(), ManualClock()
    served = profiles.Served(profiles=schedconfig.parse(CONFIG, extensions=FOUND).profiles)
    s = scheduler_module.Scheduler(
        served=served,
        binder=binder.Binder(api),
        recorder=events.Recorder(api, instance="test", clock=clock),
        kernel=reference_kernel,
        queue=queue_module.SchedulingQueue(clock=clock),
        extensions=FOUND,
    )
    s.feed.resync([make_node("n0").obj()], [])
    for i, point in enumerate(refuse):
        pod = make_pod(f"p{i}", "shop").uid(f"u{i}").scheduler("plumb")
        if point:
            pod = pod.label("plumb.test/refuse", point)
        s.feed.on_pod("ADDED", pod.obj())
    await s.schedule_batch(await s.queue.pop_batch(8))
    await s.drain()
    return api, s


def _said(api: FakeApi, name: str) -> list[tuple[str, str]]:
    return [
        (e["reason"], e["note"])
        for e in api.events
        if e["regarding"]["name"] == name and e["reason"] != "Scheduled"
    ]


async def test_reserve_and_permit_refusals_undo_the_reservation_and_say_why() -> None:
    api, s = await _run("", "Reserve", "Permit")
    assert api.binds == [("p0", "n0")]
    assert _said(api, "p1") == [
        ("FailedScheduling", "0/1 nodes are available: 1 no room in the ledger.")
    ]
    assert _said(api, "p2") == [
        ("FailedScheduling", "0/1 nodes are available: 1 not permitted today.")
    ]
    # p2 was reserved before Permit refused it, and unreserved then.
    assert sample_plugins.Gatekeeper.reserved == [("shop/p0", "n0"), ("shop/p2", "n0")]
    assert sample_plugins.Gatekeeper.unreserved == [("shop/p2", "n0")]
    assert s.cache.node_of("u1") is None
    assert s.cache.node_of("u2") is None
    # They wait for a cluster event that may help (the unschedulable pool), not a backoff.
    assert s.queue.where("u1") is queue_module.Where.UNSCHEDULABLE


async def test_a_prebind_refusal_fails_the_binding_and_unreserves() -> None:
    api, s = await _run("PreBind")
    assert api.binds == []
    assert _said(api, "p0") == [("FailedScheduling", "the ledger is closed")]
    assert sample_plugins.Gatekeeper.unreserved == [("shop/p0", "n0")]
    assert s.cache.node_of("u0") is None
