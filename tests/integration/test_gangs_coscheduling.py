"""Gangs of scheduler-plugins' PodGroup (scheduling.x-k8s.io/v1alpha1) side by side: each
scenario runs under plumb and under scheduler-plugins' own kube-scheduler with Coscheduling
(``SCHEDULER_PLUGINS``: built from its Go module, its PodGroup CRD installed from plumb's
manifests), on the session's control plane, and asserts the same pods bound and the same words.
A whole group is bound; a group short of its minMember binds nothing and says why in
scheduler-plugins' words, which plumb writes for that API."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from plumb_dev.cluster.controlplane import lifecycle as controlplane
from plumb_dev.testing import builders, groupclient, kube, schedulerplugins
from plumb_dev.testing.groupbuilders import POD_GROUP_LABEL, make_coscheduling_group
from tests.support import side_by_side
from tests.support.live_cluster import NodeFactory

pytestmark = [pytest.mark.integration, pytest.mark.gangs]


@pytest.fixture(params=(side_by_side.PLUMB, side_by_side.SCHEDULER_PLUGINS))
def coscheduling(
    request: pytest.FixtureRequest, control_plane: controlplane.ControlPlane, tmp_path: Path
) -> Iterator[side_by_side.Runner]:
    """plumb or scheduler-plugins; the PodGroup CRD is installed first either way (plumb reads
    the PodGroups of a CRD that exists when it starts)."""
    schedulerplugins.install_podgroups(control_plane, tmp_path / "kubectl-cache")
    with side_by_side.scheduler_runner(request, request.param) as runner:
        yield runner


def _member(runner: side_by_side.Runner, name: str, namespace: str, group: str) -> kube.JSON:
    pod = runner.pod(name, namespace).label(POD_GROUP_LABEL, group)
    return pod.req(cpu="1").obj()


def _nodes(
    client: kube.Kube,
    runner: side_by_side.Runner,
    namespace: str,
    add_node: NodeFactory,
    *cpus: str,
) -> list[str]:
    """Nodes of ``cpus`` each (10 pods), in the scheduler's view."""
    nodes = [
        add_node(builders.make_node(f"{namespace}-n{i}").capacity(cpu=cpu, pods="10"))
        for i, cpu in enumerate(cpus)
    ]
    side_by_side.in_view(client, runner, namespace, nodes)
    return nodes


def _members(
    client: kube.Kube, runner: side_by_side.Runner, namespace: str, names: Iterable[str]
) -> None:
    """Pods of the group "gang", 1 cpu each."""
    for name in names:
        client.create_pod(_member(runner, name, namespace, "gang"))


def _group(client: kube.Kube, name: str, namespace: str, min_member: int) -> None:
    groupclient.Groups(client).create(make_coscheduling_group(name, namespace, min_member).obj())


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
    nodes = _nodes(kube_client, coscheduling, namespace, add_node, "4")
    _group(kube_client, "gang", namespace, 2)
    _members(kube_client, coscheduling, namespace, ("worker-0", "worker-1"))

    placed = side_by_side.wait_settled(kube_client, namespace, ["worker-0", "worker-1"])

    assert placed == {"worker-0": nodes[0], "worker-1": nodes[0]}


def test_a_group_short_of_its_min_member_binds_nothing_and_says_why(
    coscheduling: side_by_side.Runner,
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
) -> None:
    _nodes(kube_client, coscheduling, namespace, add_node, "4")
    _group(kube_client, "gang", namespace, 3)
    _members(kube_client, coscheduling, namespace, ("worker-0", "worker-1"))

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
    # An attempt made before the second pod existed counted one sibling (a race of both
    # schedulers: Coscheduling has no PreEnqueue, so each pod is tried as soon as it is seen);
    # the last attempt's text is the PodScheduled condition's.
    for name in placed:
        said = _said(kube_client, namespace, name)
        assert said[-1] == side_by_side.failed_scheduling(kube_client, namespace, name)
        assert {text.replace("number: 1,", "number: 2,") for text in said} == {said[-1]}


@pytest.mark.long
def test_a_group_with_room_for_fewer_than_min_member_binds_nothing(
    coscheduling: side_by_side.Runner,
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
) -> None:
    _nodes(kube_client, coscheduling, namespace, add_node, "1", "1")
    _group(kube_client, "gang", namespace, 3)
    workers = [f"worker-{i}" for i in range(3)]
    _members(kube_client, coscheduling, namespace, workers)

    placed = side_by_side.wait_settled(kube_client, namespace, workers)
    # Two members fit and wait at Permit for the third, which fits nowhere; its PostFilter
    # rejects them. Longer than the Permit wait, so no member is still waiting to bind.
    time.sleep(schedulerplugins.PERMIT_WAITING_SECONDS + 2)

    assert placed == dict.fromkeys(workers)
    assert not [n for n in workers if kube_client.pod(namespace, n)["spec"].get("nodeName")]
    said = {name: _said(kube_client, namespace, name) for name in workers}
    # Which member is the one left out, and which rejection a waiting member gets, depends on
    # the order of the attempts (and a member tried before the others existed is refused for
    # too few siblings); each text is one of these.
    texts = {
        name: {
            f"0/2 nodes are available: pre-filter pod {name} cannot find enough sibling pods, "
            f"current pods number: {count}, minMember of group: 3. no new claims to "
            "deallocate, preemption: 0/2 nodes are available: 2 Preemption is not helpful for "
            f"scheduling., PodGroup {namespace}/gang gets rejected due to Pod {name} is "
            "unschedulable even after PostFilter"
            for count in (1, 2)
        }
        | {
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


@pytest.mark.long
def test_a_labelled_pod_without_its_pod_group_is_never_bound(
    coscheduling: side_by_side.Runner,
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
) -> None:
    _nodes(kube_client, coscheduling, namespace, add_node, "4", "4")
    kube_client.create_pod(_member(coscheduling, "orphan", namespace, "missing"))

    placed = side_by_side.wait_settled(kube_client, namespace, ["orphan"])

    assert placed == {"orphan": None}
    # It passes the filters; Permit refuses it, in the binding cycle, on the one node chosen.
    assert _said(kube_client, namespace, "orphan") == [
        "0/1 nodes are available: 1 PodGroup not found."
    ]


def test_members_beyond_min_member_bind_where_there_is_room(
    coscheduling: side_by_side.Runner,
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
) -> None:
    _nodes(kube_client, coscheduling, namespace, add_node, "2")
    _group(kube_client, "gang", namespace, 2)
    workers = [f"worker-{i}" for i in range(3)]
    _members(kube_client, coscheduling, namespace, workers)
    placed = side_by_side.wait_settled(kube_client, namespace, workers)
    # The minimum placed, the one left over fails on its own: DefaultPreemption's words (in a
    # v1.34 kube-scheduler's), and no rejection of the group.
    assert [name for name, node in placed.items() if node is None] == ["worker-2"]
    assert _said(kube_client, namespace, "worker-2") == [
        "0/1 nodes are available: 1 Insufficient cpu. no new claims to deallocate, preemption: "
        "0/1 nodes are available: 1 No preemption victims found for incoming pod."
    ]


@pytest.mark.long
def test_a_member_arriving_late_completes_the_group(
    coscheduling: side_by_side.Runner,
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
) -> None:
    _nodes(kube_client, coscheduling, namespace, add_node, "4")
    _group(kube_client, "gang", namespace, 3)
    _members(kube_client, coscheduling, namespace, ("worker-0", "worker-1"))
    assert side_by_side.wait_settled(kube_client, namespace, ["worker-0", "worker-1"]) == {
        "worker-0": None,
        "worker-1": None,
    }
    kube_client.create_pod(_member(coscheduling, "worker-2", namespace, "gang"))
    workers = ["worker-0", "worker-1", "worker-2"]
    bound = kube.wait_for(
        "the whole group bound",
        lambda: all(kube_client.pod(namespace, n)["spec"].get("nodeName") for n in workers),
        timeout=60,
    )
    assert bound
