"""scheduler-plugins' Coscheduling as the side-by-side runner starts it (``SCHEDULER_PLUGINS``):
built from its Go module, its PodGroup CRD installed from plumb's manifests, running against the
session's control plane. A whole group is bound; a group short of its minMember binds nothing
and says why in scheduler-plugins' words, which are the words plumb has to match on that API."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from plumb_dev.testing import builders, kube, schedulerplugins
from tests.support import side_by_side
from tests.support.live_cluster import NodeFactory

pytestmark = pytest.mark.integration


@pytest.fixture
def coscheduling(request: pytest.FixtureRequest) -> Iterator[side_by_side.Runner]:
    with side_by_side.scheduler_runner(request, side_by_side.SCHEDULER_PLUGINS) as runner:
        yield runner


def _member(runner: side_by_side.Runner, name: str, namespace: str, group: str) -> kube.JSON:
    pod = runner.pod(name, namespace).label(schedulerplugins.POD_GROUP_LABEL, group)
    return pod.req(cpu="1").obj()


def _said(client: kube.Kube, namespace: str, name: str) -> list[str]:
    """Every distinct text the scheduler gave the pod, oldest first: its FailedScheduling
    events', then its PodScheduled condition's. The condition is the last attempt's; an event
    may be older, since the event recorder folds a pod's later FailedScheduling into a series
    of an earlier one, keeping that one's text."""
    pod = client.pod(namespace, name)
    events = [
        e
        for e in client.events(namespace, name)
        if e.get("reason") == side_by_side.FAILED_SCHEDULING
        and (e.get("involvedObject") or {}).get("uid") == pod["metadata"]["uid"]
    ]
    events.sort(key=lambda e: str(e.get("eventTime") or e.get("lastTimestamp") or ""))
    texts = [str(e.get("message")) for e in events]
    texts += [
        str(c.get("message"))
        for c in pod["status"].get("conditions") or []
        if c.get("type") == "PodScheduled" and c.get("status") == "False"
    ]
    return list(dict.fromkeys(texts))


def test_a_whole_group_is_bound(
    coscheduling: side_by_side.Runner,
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
) -> None:
    nodes = [add_node(builders.make_node(f"{namespace}-n0").capacity(cpu="4", pods="10"))]
    side_by_side.in_view(kube_client, coscheduling, namespace, nodes)
    schedulerplugins.create_pod_group(
        kube_client, schedulerplugins.pod_group("gang", namespace, min_member=2)
    )
    for name in ("worker-0", "worker-1"):
        kube_client.create_pod(_member(coscheduling, name, namespace, "gang"))

    placed = side_by_side.wait_settled(kube_client, namespace, ["worker-0", "worker-1"])

    assert placed == {"worker-0": nodes[0], "worker-1": nodes[0]}


def test_a_group_short_of_its_min_member_binds_nothing_and_says_why(
    coscheduling: side_by_side.Runner,
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
) -> None:
    nodes = [add_node(builders.make_node(f"{namespace}-n0").capacity(cpu="4", pods="10"))]
    side_by_side.in_view(kube_client, coscheduling, namespace, nodes)
    schedulerplugins.create_pod_group(
        kube_client, schedulerplugins.pod_group("gang", namespace, min_member=3)
    )
    for name in ("worker-0", "worker-1"):
        kube_client.create_pod(_member(coscheduling, name, namespace, "gang"))

    placed = side_by_side.wait_settled(kube_client, namespace, ["worker-0", "worker-1"])

    assert placed == {"worker-0": None, "worker-1": None}
    for name in ("worker-0", "worker-1"):
        # PreFilter's refusal, then each PostFilter's words in order: DynamicResources' (a
        # v1.34 kube-scheduler), DefaultPreemption's, Coscheduling's.
        assert side_by_side.failed_scheduling(kube_client, namespace, name) == (
            f"0/1 nodes are available: pre-filter pod {name} cannot find enough sibling pods, "
            f"current pods number: 2, minMember of group: 3. no new claims to deallocate, "
            f"preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling., "
            f"PodGroup {namespace}/gang gets rejected due to Pod {name} is unschedulable even "
            f"after PostFilter"
        )
    assert {name: _said(kube_client, namespace, name) for name in placed} == {
        name: [side_by_side.failed_scheduling(kube_client, namespace, name)] for name in placed
    }


@pytest.mark.long
def test_a_group_with_room_for_fewer_than_min_member_binds_nothing(
    coscheduling: side_by_side.Runner,
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
) -> None:
    nodes = [
        add_node(builders.make_node(f"{namespace}-n{i}").capacity(cpu="1", pods="10"))
        for i in range(2)
    ]
    side_by_side.in_view(kube_client, coscheduling, namespace, nodes)
    schedulerplugins.create_pod_group(
        kube_client, schedulerplugins.pod_group("gang", namespace, min_member=3)
    )
    workers = [f"worker-{i}" for i in range(3)]
    for name in workers:
        kube_client.create_pod(_member(coscheduling, name, namespace, "gang"))

    placed = side_by_side.wait_settled(kube_client, namespace, workers)
    # Two members fit and wait at Permit for the third, which fits nowhere; its PostFilter
    # rejects them. Longer than the Permit wait, so no member is still waiting to bind.
    time.sleep(schedulerplugins.PERMIT_WAITING_SECONDS + 2)

    assert placed == dict.fromkeys(workers)
    assert not [n for n in workers if kube_client.pod(namespace, n)["spec"].get("nodeName")]
    said = {name: _said(kube_client, namespace, name) for name in workers}
    # Which member is the one left out, and which rejection a waiting member gets, depends on
    # the order of the attempts; each text is one of these.
    texts = {
        name: {
            "0/2 nodes are available: 2 Insufficient cpu. no new claims to deallocate, "
            "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming "
            f"pod., PodGroup {namespace}/gang gets rejected due to Pod {name} is unschedulable "
            "even after PostFilter",
            "0/1 nodes are available: 1 optimistic rejection in PostFilter.",
            "0/1 nodes are available: 1 rejection in Unreserve.",
        }
        for name in workers
    }
    unknown = {name: sorted(set(said[name]) - texts[name]) for name in workers}
    assert unknown == {name: [] for name in workers}
    everything = "\n".join(message for messages in said.values() for message in messages)
    assert "Insufficient cpu" in everything
    assert "optimistic rejection in PostFilter" in everything


def test_a_labelled_pod_without_its_pod_group_is_never_bound(
    coscheduling: side_by_side.Runner,
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
) -> None:
    nodes = [
        add_node(builders.make_node(f"{namespace}-n{i}").capacity(cpu="4", pods="10"))
        for i in range(2)
    ]
    side_by_side.in_view(kube_client, coscheduling, namespace, nodes)
    kube_client.create_pod(_member(coscheduling, "orphan", namespace, "missing"))

    placed = side_by_side.wait_settled(kube_client, namespace, ["orphan"])

    assert placed == {"orphan": None}
    # It passes the filters; Permit refuses it, in the binding cycle, on the one node chosen.
    assert _said(kube_client, namespace, "orphan") == [
        "0/1 nodes are available: 1 PodGroup not found."
    ]
