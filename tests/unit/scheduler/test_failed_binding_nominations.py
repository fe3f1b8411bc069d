"""A nomination a preemption left in a pod's status, after the pod's binding fails, its
scheduling cycle ends in an error, or its next preemption finds nothing: cleared, here and in
the status, as kube-scheduler's failure handler (clearNominatedNode) and its PostFilter
("nominate no node") do, per release. A nomination left
standing would keep holding room, and count against the sum of the ElasticQuota mins, for a pod
that waits with nowhere to go (docs/reliability.md, the quotas after a handover)."""

from __future__ import annotations

import pytest

from plumb.backend import queue as queue_module
from plumb.framework import emulation
from plumb.k8s import client as k8s_client
from plumb.kernel import contract
from plumb.scheduler import Scheduler
from plumb_dev.testing.builders import make_node, make_pod
from tests.support.fakes import FakeApi, ManualClock, make_scheduler

GATE = "NominatedNodeNameForExpectation"
# The pod a preemption nominated to n1 (by this replica before a restart, or by another).
NOMINATED = make_pod("web", "shop").uid("u-web").scheduler("plumb").req(cpu="1").nominated("n1")
FAILED = k8s_client.ApiResponse(status=500, body={"message": "etcd leader changed"})


async def _cycle(s: Scheduler) -> None:
    await s.schedule_batch(await s.queue.pop_batch(8))
    await s.drain()


def _nominations_written(api: FakeApi) -> list[str | None]:
    return [
        patch["status"]["nominatedNodeName"]
        for name, patch in api.patches
        if name == "web" and "nominatedNodeName" in (patch.get("status") or {})
    ]


@pytest.mark.parametrize(
    ("kube", "cleared"),
    [
        (emulation.emulate(34), True),
        # v1.34's newFailureNominatingInfo with the gate on: no nominating info at all.
        (emulation.emulate(34, {GATE: True}), False),
        (emulation.emulate(35), True),
        (emulation.emulate(36), True),
        (emulation.emulate(37), True),
    ],
    ids=["v1.34", "v1.34-gate-on", "v1.35", "v1.36", "v1.37"],
)
async def test_a_failed_binding_clears_the_nomination_a_preemption_left(
    kube: emulation.Emulation, cleared: bool
) -> None:
    api, clock = FakeApi(FAILED), ManualClock()
    s = make_scheduler(api, clock, kube=kube)
    s.feed.resync([make_node("n1").capacity(cpu="2").obj()], [NOMINATED.obj()])
    assert s.state.nominations.node_of("u-web") == "n1"
    await _cycle(s)
    assert api.binds == [("web", "n1")]
    assert s.queue.where("u-web") is queue_module.Where.BACKOFF
    assert _nominations_written(api) == ([None] if cleared else [])
    assert s.state.nominations.node_of("u-web") == (None if cleared else "n1")


@pytest.mark.parametrize("minor", [34, 37])
async def test_a_preemption_that_finds_nothing_clears_a_nomination_only_the_status_names(
    minor: int,
) -> None:
    """The status names n1 but this replica holds no nomination for the pod (dropped when an
    earlier try assumed it, the status unchanged since): a preemption that finds no candidate
    still clears it, as kube-scheduler's updatePod compares with the pod's status."""
    api, clock = FakeApi(), ManualClock()
    s = make_scheduler(api, clock, kube=emulation.emulate(minor))
    full = make_pod("other", "shop").uid("u-other").node("n1").req(cpu="2").priority(10)
    s.feed.resync([make_node("n1").capacity(cpu="2").obj()], [full.obj(), NOMINATED.obj()])
    s.state.nominations.remove("u-web")
    await _cycle(s)
    assert api.deletes == []
    assert _nominations_written(api) == [None]


@pytest.mark.parametrize(
    ("kube", "cleared"),
    [(emulation.emulate(34, {GATE: True}), False), (emulation.emulate(37), True)],
    ids=["v1.34-gate-on", "v1.37"],
)
async def test_an_error_in_the_scheduling_cycle_clears_the_nomination(
    kube: emulation.Emulation, cleared: bool
) -> None:
    async def broken(cluster: contract.Cluster, batch: contract.Batch) -> contract.Result:
        raise RuntimeError("kernel fault")

    api, clock = FakeApi(), ManualClock()
    s = make_scheduler(api, clock, kube=kube, kernel=broken)
    s.feed.resync([make_node("n1").capacity(cpu="2").obj()], [NOMINATED.obj()])
    await s.decide(await s.queue.pop_batch(8))  # the loop's call: failures isolated
    await s.drain()
    assert api.binds == []
    assert [e["reason"] for e in api.events] == ["FailedScheduling"]
    assert _nominations_written(api) == ([None] if cleared else [])
    assert s.state.nominations.node_of("u-web") == (None if cleared else "n1")
