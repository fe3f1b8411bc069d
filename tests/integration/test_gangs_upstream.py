"""Gangs of the upstream PodGroup (scheduling.k8s.io/v1beta1) side by side: each scenario runs
under plumb and under kube-scheduler v1.37 with GenericWorkload on, on the gated plane
(conftest's ``gated_*`` fixtures), and asserts the same pods bound, the same FailedScheduling
text and the same PodGroupInitiallyScheduled condition.

Nodes: two of 4 cpu ("a", "b"); each member asks 2 cpu, so the two nodes hold four members.
No pod of lower priority than the groups' (0) runs, so group preemption finds no victims.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from plumb_dev.testing import builders, groupclient, kube
from plumb_dev.testing.groupbuilders import UPSTREAM_API, make_group
from tests.support import side_by_side
from tests.support.live_cluster import NodeFactory
from tests.support.side_by_side import gated_scheduler_fixture  # noqa: F401

pytestmark = [pytest.mark.integration, pytest.mark.gangs]

CONDITION = "PodGroupInitiallyScheduled"
NO_VICTIMS = "pod group preemption: No preemption victims found for incoming preemptor"
FULL = "0/2 nodes are available: 2 Insufficient cpu."


class Gangs:
    """One test's stage: its client, namespace and scheduler, and the PodGroups it made."""

    def __init__(self, client: kube.Kube, namespace: str, scheduler: side_by_side.Runner) -> None:
        self.client = client
        self.namespace = namespace
        self.scheduler = scheduler
        self.groups = groupclient.Groups(client)
        self.node_names: list[str] = []

    def nodes(self, add_node: NodeFactory, cpu: str = "4") -> list[str]:
        names = [
            add_node(builders.make_node(f"{self.namespace}-{n}").capacity(cpu=cpu, memory="8Gi"))
            for n in ("a", "b")
        ]
        side_by_side.in_view(self.client, self.scheduler, self.namespace, names)
        self.node_names = names
        return names

    def group(self, name: str, min_count: int) -> None:
        self.groups.create(make_group(name, self.namespace, min_count).obj())

    def members(self, group: str, *names: str, cpu: str = "2") -> None:
        for name in names:
            pod = self.scheduler.pod(name, self.namespace).req(cpu=cpu).pod_group(group)
            self.client.create_pod(pod.obj())

    def settle(self, names: Sequence[str]) -> dict[str, str | None]:
        return side_by_side.wait_settled(self.client, self.namespace, names)

    def bound(self, names: Sequence[str], timeout: float = 90.0) -> dict[str, str]:
        """Waits until every named pod is bound (past failures, preemption): {pod: node}."""

        def nodes() -> dict[str, str] | None:
            pods = {p["metadata"]["name"]: p for p in self.client.pods(self.namespace)}
            found = {n: pods[n]["spec"].get("nodeName") for n in names if n in pods}
            return found if len(found) == len(names) and all(found.values()) else None

        return kube.wait_for(f"{', '.join(names)} bound", nodes, timeout=timeout)

    def failed(self, name: str) -> str | None:
        return side_by_side.failed_scheduling(self.client, self.namespace, name)

    def condition(self, group: str) -> tuple[str, str, str] | None:
        return kube.wait_for(
            f"{group}'s {CONDITION} condition",
            lambda: self.groups.condition(self.namespace, group, CONDITION),
        )

    def quiet(self, names: Sequence[str]) -> None:
        """Neither bound nor FailedScheduling, once the scheduler has seen every pod made so
        far (a probe pod judged after them: the pod stream is ordered)."""
        side_by_side.in_view(self.client, self.scheduler, self.namespace, self.node_names)
        for name in names:
            assert self.client.pod(self.namespace, name)["spec"].get("nodeName") is None
            assert self.failed(name) is None


@pytest.fixture
def gangs(
    gated_client: kube.Kube, gated_namespace: str, gated_scheduler: side_by_side.Runner
) -> Gangs:
    return Gangs(gated_client, gated_namespace, gated_scheduler)


def test_a_gang_that_fits_is_bound_whole(gangs: Gangs, gated_add_node: NodeFactory) -> None:
    a, b = gangs.nodes(gated_add_node)
    gangs.group("train", 4)
    gangs.members("train", "w0", "w1", "w2", "w3")
    placed = gangs.settle(["w0", "w1", "w2", "w3"])
    assert sorted(node or "" for node in placed.values()) == [a, a, b, b]
    assert gangs.condition("train") == ("True", "Scheduled", "")


def test_a_gang_that_does_not_fit_binds_no_member(
    gangs: Gangs, gated_add_node: NodeFactory
) -> None:
    gangs.nodes(gated_add_node)
    gangs.group("train", 5)
    names = ["w0", "w1", "w2", "w3", "w4"]
    gangs.members("train", *names)
    assert gangs.settle(names) == dict.fromkeys(names)
    status = f"minCount (5) cannot be satisfied: 4 scheduled, 0 remaining, {NO_VICTIMS}"
    for name in ("w0", "w1", "w2", "w3"):
        assert gangs.failed(name) == f"pod group is unschedulable, {status}"
    assert gangs.failed("w4") == FULL
    assert gangs.condition("train") == ("False", "Unschedulable", status)


def test_a_min_count_below_the_group_size_binds_what_fits(
    gangs: Gangs, gated_add_node: NodeFactory
) -> None:
    gangs.nodes(gated_add_node)
    gangs.group("train", 2)
    names = ["w0", "w1", "w2", "w3", "w4"]
    gangs.members("train", *names)
    placed = gangs.settle(names)
    assert [name for name, node in placed.items() if node is None] == ["w4"]
    assert gangs.failed("w4") == FULL
    assert gangs.condition("train") == ("True", "Scheduled", "")


@pytest.mark.long  # in make test-long; the rest of this file stays in make test
def test_members_wait_without_a_word_until_the_last_one_arrives(
    gangs: Gangs, gated_add_node: NodeFactory
) -> None:
    gangs.nodes(gated_add_node)
    gangs.group("train", 3)
    gangs.members("train", "w0", "w1")
    gangs.quiet(["w0", "w1"])
    gangs.members("train", "w2")
    assert None not in gangs.settle(["w0", "w1", "w2"]).values()


@pytest.mark.long  # in make test-long; the rest of this file stays in make test
def test_members_of_a_pod_group_not_made_yet_wait_for_it(
    gangs: Gangs, gated_add_node: NodeFactory
) -> None:
    gangs.nodes(gated_add_node)
    gangs.members("train", "w0", "w1")
    gangs.quiet(["w0", "w1"])
    gangs.group("train", 2)
    assert None not in gangs.settle(["w0", "w1"]).values()


@pytest.mark.long  # in make test-long; the rest of this file stays in make test
def test_of_two_gangs_competing_for_room_the_first_takes_it(
    gangs: Gangs, gated_add_node: NodeFactory
) -> None:
    gangs.nodes(gated_add_node)
    gangs.members("first", "a0", "a1", "a2")
    gangs.members("second", "b0", "b1", "b2")
    gangs.quiet(["a0", "b0"])
    gangs.group("first", 3)
    assert None not in gangs.settle(["a0", "a1", "a2"]).values()
    gangs.group("second", 3)
    assert gangs.settle(["b0", "b1", "b2"]) == dict.fromkeys(["b0", "b1", "b2"])
    status = f"minCount (3) cannot be satisfied: 1 scheduled, 1 remaining, {NO_VICTIMS}"
    assert gangs.failed("b0") == f"pod group is unschedulable, {status}"
    assert gangs.failed("b1") == FULL
    assert gangs.failed("b2") == "minCount (3) cannot be satisfied: 1 scheduled, 1 remaining"
    assert gangs.condition("second") == ("False", "Unschedulable", status)


@pytest.mark.long  # in make test-long; the rest of this file stays in make test
def test_a_single_pod_placed_first_leaves_a_gang_too_little_room(
    gangs: Gangs, gated_add_node: NodeFactory
) -> None:
    gangs.nodes(gated_add_node)
    single = gangs.scheduler.pod("single", gangs.namespace).req(cpu="2")
    gangs.client.create_pod(single.obj())
    assert gangs.settle(["single"])["single"] is not None
    gangs.group("train", 4)
    names = ["w0", "w1", "w2", "w3"]
    gangs.members("train", *names)
    assert gangs.settle(names) == dict.fromkeys(names)
    status = f"minCount (4) cannot be satisfied: 3 scheduled, 0 remaining, {NO_VICTIMS}"
    assert gangs.failed("w0") == f"pod group is unschedulable, {status}"
    assert gangs.failed("w3") == FULL


@pytest.mark.long  # in make test-long; the rest of this file stays in make test
def test_a_gang_spread_over_zones_takes_both(gangs: Gangs, gated_add_node: NodeFactory) -> None:
    zones = {}
    for zone in ("z1", "z2"):
        for n in ("x", "y"):
            node = builders.make_node(f"{gangs.namespace}-{zone}{n}").capacity(cpu="8")
            zones[gated_add_node(node.zone(zone))] = zone
    side_by_side.in_view(gangs.client, gangs.scheduler, gangs.namespace, list(zones))
    gangs.group("train", 4)
    names = ["w0", "w1", "w2", "w3"]
    for name in names:
        pod = gangs.scheduler.pod(name, gangs.namespace).req(cpu="1").pod_group("train")
        pod = pod.label("app", "train").spread(builders.ZONE_LABEL, 1, selector={"app": "train"})
        gangs.client.create_pod(pod.obj())
    placed = side_by_side.wait_settled(gangs.client, gangs.namespace, names, cluster_nodes=4)
    counts = sorted(
        sum(zones[node] == zone for node in placed.values() if node) for zone in ("z1", "z2")
    )
    assert counts == [2, 2]


@pytest.mark.long  # in make test-long; the rest of this file stays in make test
def test_members_of_another_priority_than_their_group_are_an_error(
    gangs: Gangs, gated_add_node: NodeFactory
) -> None:
    gangs.nodes(gated_add_node)
    gangs.group("train", 2)
    gangs.members("train", "w0")
    urgent = gangs.scheduler.pod("w1", gangs.namespace).req(cpu="2").pod_group("train")
    gangs.client.create_pod(urgent.priority(1000).obj())
    assert gangs.settle(["w0", "w1"]) == {"w0": None, "w1": None}
    error = (
        "all pods in a single pod group should have the same priority as the pod group's "
        "priority, got 1000 and 0"
    )
    assert gangs.failed("w1") == error
    assert gangs.condition("train") == ("False", "SchedulerError", error)


def _victims(gangs: Gangs, nodes: Sequence[str], per_node: int) -> list[str]:
    """Pods of priority 0 bound to ``nodes`` (2 cpu each), deleted at once when preempted."""
    names = []
    for node in nodes:
        for i in range(per_node):
            name = f"low-{node.rsplit('-', 1)[-1]}{i}"
            pod = builders.make_pod(name, gangs.namespace).req(cpu="2").node(node).grace(0)
            gangs.client.create_pod(pod.obj())
            names.append(name)
    return names


def _urgent_group(gangs: Gangs, name: str, min_count: int) -> None:
    gangs.client.ensure_priority_class(1000)
    body = make_group(name, gangs.namespace, min_count)
    gangs.groups.create(body.priority_class(builders.priority_class_name(1000)).obj())


def _urgent_members(gangs: Gangs, group: str, *names: str) -> None:
    for name in names:
        pod = gangs.scheduler.pod(name, gangs.namespace).req(cpu="2").pod_group(group)
        gangs.client.create_pod(pod.priority(1000).obj())


@pytest.mark.long  # in make test-long; the rest of this file stays in make test
def test_a_gang_preempts_the_fewest_lower_priority_pods_it_needs(
    gangs: Gangs, gated_add_node: NodeFactory
) -> None:
    a, b = gangs.nodes(gated_add_node)
    low = _victims(gangs, [a, b], 2)
    _urgent_group(gangs, "urgent", 3)
    _urgent_members(gangs, "urgent", "u0", "u1", "u2")
    placed = gangs.bound(["u0", "u1", "u2"])
    assert sorted(placed.values()) in (sorted([a, a, b]), sorted([a, b, b]))
    left = {p["metadata"]["name"] for p in gangs.client.pods(gangs.namespace)}
    assert len(left & set(low)) == 1  # three preempted, one reprieved
    # The cycle that preempted: the first member fit nowhere, the group stopped there.
    assert gangs.failed("u0") == FULL
    for name in ("u1", "u2"):
        assert gangs.failed(name) == "minCount (3) cannot be satisfied: 0 scheduled, 2 remaining"
    uid = gangs.groups.get(UPSTREAM_API, gangs.namespace, "urgent")["metadata"]["uid"]
    notes = [
        e.get("message")
        for e in gangs.client.events(gangs.namespace)
        if e.get("reason") == "Preempted"
    ]
    assert notes == [f"Preempted by podgroup {uid} on node cluster"] * 3


@pytest.mark.long  # in make test-long; the rest of this file stays in make test
def test_a_gang_that_would_not_fit_even_without_lower_priority_pods_preempts_none(
    gangs: Gangs, gated_add_node: NodeFactory
) -> None:
    a, _ = gangs.nodes(gated_add_node)
    low = _victims(gangs, [a], 1)
    _urgent_group(gangs, "urgent", 5)
    names = ["u0", "u1", "u2", "u3", "u4"]
    _urgent_members(gangs, "urgent", *names)
    assert gangs.settle(names) == dict.fromkeys(names)
    # Without the victim, b and a hold four members: still one short of five, so nothing is
    # preempted; the group's words say both.
    status = (
        "minCount (5) cannot be satisfied: 3 scheduled, 1 remaining, deallocation and deletion "
        "of ResourceClaims completed, pod group preemption: minCount (5) cannot be satisfied: "
        "4 scheduled, 0 remaining"
    )
    for name in ("u0", "u1", "u2"):
        assert gangs.failed(name) == f"pod group is unschedulable, {status}"
    assert gangs.failed("u3") == FULL
    assert gangs.failed("u4") == "minCount (5) cannot be satisfied: 3 scheduled, 1 remaining"
    assert gangs.condition("urgent") == ("False", "Unschedulable", status)
    assert low[0] in {p["metadata"]["name"] for p in gangs.client.pods(gangs.namespace)}
