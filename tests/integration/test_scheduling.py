"""plumb scheduling real pods on a real API server: where they land, what users are told."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from plumb.backend.records import objects
from plumb_dev.testing import builders, kube
from tests.support import side_by_side
from tests.support.live_cluster import NodeFactory, events_of
from tests.support.plumb_process import Plumb

pytestmark = pytest.mark.integration


def _node(pod: dict[str, Any]) -> str:
    return str(pod["spec"].get("nodeName") or "")


def _wait_bound(client: kube.Kube, namespace: str, names: list[str]) -> dict[str, str]:
    def bound() -> dict[str, str] | None:
        placed = {p["metadata"]["name"]: _node(p) for p in client.pods(namespace)}
        return placed if all(placed.get(name) for name in names) else None

    return kube.wait_for(f"{len(names)} pods in {namespace} to be bound", bound, timeout=60)


def _failed_scheduling(client: kube.Kube, namespace: str, name: str, expected: str) -> str:
    """The newest FailedScheduling message once it reads ``expected``.

    Watches of nodes and pods are separate streams, so a pod can be tried before plumb has seen
    a node created just before it; the retry that follows must then say the expected thing.
    """

    def newest() -> str | None:
        found = events_of(client, namespace, name, "FailedScheduling")
        found.sort(key=lambda e: (e.get("eventTime") or "", e["metadata"]["name"]))
        if found and found[-1]["message"] == expected:
            return str(found[-1]["message"])
        return None

    return kube.wait_for(f"FailedScheduling {expected!r} for {namespace}/{name}", newest)


def _assert_not_overcommitted(client: kube.Kube, namespace: str, nodes: list[str]) -> None:
    allocatable = {
        n["metadata"]["name"]: objects.parse_node(n).allocatable
        for n in client.nodes()
        if n["metadata"]["name"] in nodes
    }
    used: dict[str, dict[str, int]] = {name: {} for name in nodes}
    for body in client.pods(namespace):
        pod = objects.parse_pod(body)
        if pod.node_name in used:
            totals = used[pod.node_name]
            totals["pods"] = totals.get("pods", 0) + 1
            for resource, amount in pod.requests.items():
                totals[resource] = totals.get(resource, 0) + amount
    for node, totals in used.items():
        for resource, amount in totals.items():
            assert amount <= allocatable[node][resource], (
                f"{node} over-committed on {resource}: {amount} > {allocatable[node][resource]}"
            )


def test_twenty_pods_bound_within_allocatable_and_a_huge_one_waits(
    kube_client: kube.Kube, namespace: str, add_node: NodeFactory, plumb: Plumb
) -> None:
    nodes = [
        add_node(
            builders.make_node(f"{namespace}-n{i}")
            .zone(f"zone-{i}")
            .capacity(cpu="2", memory="4Gi", pods="8")
        )
        for i in range(3)
    ]
    names = []
    for i in range(20):
        cpu = "250m" if i % 2 else "300m"
        pod = builders.make_pod(f"p{i}", namespace).scheduler("plumb").req(cpu=cpu, memory="256Mi")
        kube_client.create_pod(pod.obj())
        names.append(f"p{i}")
    # "cpu: lots" cannot reach the API server; a huge but valid request can.
    kube_client.create_pod(
        builders.make_pod("huge", namespace).scheduler("plumb").req(cpu="100000").obj()
    )

    placed = _wait_bound(kube_client, namespace, names)
    assert {placed[name] for name in names} <= set(nodes)
    _assert_not_overcommitted(kube_client, namespace, nodes)
    for name in names:
        scheduled = kube.wait_for(
            f"a Scheduled event for {name}",
            functools.partial(events_of, kube_client, namespace, name, "Scheduled"),
        )
        assert scheduled[0]["message"] == (
            f"Successfully assigned {namespace}/{name} to {placed[name]}"
        )
        assert scheduled[0]["reportingComponent"] == "plumb"

    message = _failed_scheduling(
        kube_client,
        namespace,
        "huge",
        side_by_side.without_victims("0/3 nodes are available: 3 Insufficient cpu.", 3, 0),
    )
    huge = kube_client.pod(namespace, "huge")
    assert huge["status"]["phase"] == "Pending"
    assert not _node(huge)
    condition = kube.wait_for(
        "PodScheduled=False on huge",
        lambda: [
            c
            for c in kube_client.pod(namespace, "huge")["status"].get("conditions", [])
            if c["type"] == "PodScheduled" and c["status"] == "False"
        ],
    )
    assert condition[0]["reason"] == "Unschedulable"
    assert condition[0]["message"] == message


def test_pods_of_other_schedulers_and_bound_pods_are_left_alone(
    kube_client: kube.Kube, namespace: str, add_node: NodeFactory, plumb: Plumb
) -> None:
    busy = add_node(builders.make_node(f"{namespace}-busy").capacity(cpu="2", pods="10"))
    free = add_node(builders.make_node(f"{namespace}-free").capacity(cpu="2", pods="10"))
    # Bound at creation, as if by another scheduler: it takes 1.5 of busy's 2 cpu.
    kube_client.create_pod(
        builders.make_pod("prebound", namespace).node(busy).req(cpu="1500m").obj()
    )
    kube_client.create_pod(
        builders.make_pod("someone-elses", namespace).scheduler("other").req(cpu="100m").obj()
    )
    kube_client.create_pod(builders.make_pod("default", namespace).req(cpu="100m").obj())
    # 1 cpu fits only on free, because plumb counts the pre-bound pod's request on busy.
    kube_client.create_pod(
        builders.make_pod("mine", namespace).scheduler("plumb").req(cpu="1").obj()
    )

    assert _wait_bound(kube_client, namespace, ["mine"])["mine"] == free
    for name in ("someone-elses", "default"):
        pod = kube_client.pod(namespace, name)
        assert not _node(pod), f"{name} was bound by plumb"
        assert not [e for e in kube_client.events(namespace, name)], f"plumb reported on {name}"
    prebound = kube_client.pod(namespace, "prebound")
    assert _node(prebound) == busy
    assert not kube_client.events(namespace, "prebound")


def test_kopf_leaves_no_marks_on_pods_or_nodes(
    kube_client: kube.Kube, namespace: str, add_node: NodeFactory, plumb: Plumb
) -> None:
    node = add_node(builders.make_node(f"{namespace}-n").capacity(cpu="1", pods="10"))
    for i in range(3):
        kube_client.create_pod(
            builders.make_pod(f"p{i}", namespace).scheduler("plumb").req(cpu="100m").obj()
        )
    kube_client.create_pod(
        builders.make_pod("waits", namespace).scheduler("plumb").req(cpu="8").obj()
    )
    _wait_bound(kube_client, namespace, ["p0", "p1", "p2"])
    _failed_scheduling(
        kube_client,
        namespace,
        "waits",
        side_by_side.without_victims("0/1 nodes are available: 1 Insufficient cpu.", 1, 0),
    )

    bodies = [kube_client.pod(namespace, n) for n in ("p0", "p1", "p2", "waits")]
    bodies += [n for n in kube_client.nodes() if n["metadata"]["name"] == node]
    for body in bodies:
        metadata = body["metadata"]
        marks = [k for k in (metadata.get("annotations") or {}) if "kopf" in k]
        assert not marks, f"{metadata['name']} carries kopf annotations {marks}"
        assert not metadata.get("finalizers"), f"{metadata['name']} has finalizers"


def test_a_waiting_pod_schedules_when_a_node_joins_and_bad_pods_do_not_block_others(
    kube_client: kube.Kube, namespace: str, add_node: NodeFactory, plumb: Plumb
) -> None:
    add_node(builders.make_node(f"{namespace}-small").capacity(cpu="1", pods="10"))
    kube_client.create_pod(
        builders.make_pod("big", namespace).scheduler("plumb").req(cpu="3").obj()
    )
    kube_client.create_pod(
        builders.make_pod("widget", namespace)
        .scheduler("plumb")
        .req(cpu="100m", **{"example.com/widget": "1"})
        .obj()
    )
    _failed_scheduling(
        kube_client,
        namespace,
        "big",
        side_by_side.without_victims("0/1 nodes are available: 1 Insufficient cpu.", 1, 0),
    )
    _failed_scheduling(
        kube_client,
        namespace,
        "widget",
        side_by_side.without_victims(
            "0/1 nodes are available: 1 Insufficient example.com/widget.", 1, 0
        ),
    )
    # Unschedulable pods do not stop the loop: a schedulable pod created after them binds.
    kube_client.create_pod(
        builders.make_pod("fits", namespace).scheduler("plumb").req(cpu="500m").obj()
    )
    _wait_bound(kube_client, namespace, ["fits"])

    large = add_node(builders.make_node(f"{namespace}-large").capacity(cpu="8", pods="10"))
    assert _wait_bound(kube_client, namespace, ["big"])["big"] == large
    assert not _node(kube_client.pod(namespace, "widget"))
