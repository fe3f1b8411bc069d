"""Preemption against the real control plane: priorities from PriorityClasses (the Priority
admission plugin), victims chosen as kube-scheduler chooses them, the DisruptionTarget condition,
the Preempted event, the nomination and the room it holds, PodDisruptionBudgets and
preemptionPolicy Never.

Victims carry a finalizer where the test must see them terminate (a scale node has no kubelet,
so without one a pod with a grace period of 0 is gone at once); the test releases them.
"""

from __future__ import annotations

from typing import Any

import pytest

from plumb import DEFAULT_SCHEDULER_NAME
from plumb.testing import builders, kube
from tests.integration.conftest import NodeFactory, Plumb, events_of

pytestmark = pytest.mark.integration

HOLD = "plumb.test/hold"
HIGH = 1000


def _pod(namespace: str, name: str, cpu: str, priority: int = 0) -> builders.PodBuilder:
    pod = builders.make_pod(name, namespace).scheduler(DEFAULT_SCHEDULER_NAME).req(cpu=cpu)
    pod = pod.grace(0)
    return pod.priority(priority) if priority else pod


def _place(client: kube.Kube, pods: list[builders.PodBuilder], node: str) -> None:
    """Pods already running on ``node`` (bound at creation), holding a finalizer."""
    for pod in pods:
        client.create_pod(pod.node(node).finalizer(HOLD).obj())


def _gone_or_terminating(client: kube.Kube, namespace: str) -> dict[str, str]:
    """Pods being deleted, by name, with the reason of their DisruptionTarget condition."""
    found = {}
    for pod in client.pods(namespace):
        if pod["metadata"].get("deletionTimestamp"):
            conditions = pod["status"].get("conditions") or []
            reasons = [c.get("reason", "") for c in conditions if c["type"] == "DisruptionTarget"]
            found[pod["metadata"]["name"]] = reasons[0] if reasons else ""
    return found


def _release_all(client: kube.Kube, namespace: str) -> None:
    for pod in client.pods(namespace):
        if pod["metadata"].get("finalizers"):
            client.release(namespace, pod["metadata"]["name"])


def _status(client: kube.Kube, namespace: str, name: str) -> dict[str, Any]:
    status: dict[str, Any] = client.pod(namespace, name).get("status") or {}
    return status


def _text(event: dict[str, Any]) -> str:
    return str(event.get("note") or event.get("message"))


def _failed_message(client: kube.Kube, namespace: str, name: str) -> str:
    def newest() -> str | None:
        events = events_of(client, namespace, name, "FailedScheduling")
        return _text(events[-1]) if events else None

    return kube.wait_for(f"a FailedScheduling event on {namespace}/{name}", newest)


def test_a_priority_pod_preempts_the_fewest_victims_on_one_node_and_binds_there(
    kube_client: kube.Kube, namespace: str, add_node: NodeFactory, plumb: Plumb
) -> None:
    """Node a holds four 1-cpu pods (priority 0): room for a 2-cpu pod means 2 victims. Node
    b holds a 2-cpu pod of priority 0 and two 1-cpu pods of priority 5: all three removed, the
    priority-5 pods are reprieved first and still leave room, so the 2-cpu pod is b's only
    victim. One victim beats two: b, and only that pod is touched."""
    a = add_node(builders.make_node(f"{namespace}-a").capacity(cpu="4"))
    b = add_node(builders.make_node(f"{namespace}-b").capacity(cpu="4"))
    _place(kube_client, [_pod(namespace, f"a{i}", "1") for i in range(4)], a)
    _place(
        kube_client,
        [
            _pod(namespace, "b-big", "2"),
            _pod(namespace, "b-mid1", "1", priority=5),
            _pod(namespace, "b-mid2", "1", priority=5),
        ],
        b,
    )
    kube_client.create_pod(_pod(namespace, "vip", "2", priority=HIGH).obj())

    terminating = kube.wait_for(
        "the victim to be terminating",
        lambda: _gone_or_terminating(kube_client, namespace) or None,
    )
    assert terminating == {"b-big": "PreemptionByScheduler"}
    nominated = kube.wait_for(
        "vip's nomination",
        lambda: _status(kube_client, namespace, "vip").get("nominatedNodeName"),
    )
    assert nominated == b
    preempted = events_of(kube_client, namespace, "b-big", "Preempted")
    assert len(preempted) == 1
    vip_uid = kube_client.pod(namespace, "vip")["metadata"]["uid"]
    assert _text(preempted[0]) == f"Preempted by pod {vip_uid} on node {b}"
    assert preempted[0]["related"]["name"] == "vip"
    # While the victim terminates it still holds its room: vip waits, nominated.
    assert kube_client.pod(namespace, "vip")["spec"].get("nodeName") is None

    kube_client.release(namespace, "b-big")
    bound = kube.wait_for(
        "vip to be bound",
        lambda: kube_client.pod(namespace, "vip")["spec"].get("nodeName"),
    )
    assert bound == b
    left = {p["metadata"]["name"] for p in kube_client.pods(namespace)}
    assert left == {"a0", "a1", "a2", "a3", "b-mid1", "b-mid2", "vip"}
    _release_all(kube_client, namespace)


def test_the_nominated_room_is_held_from_lower_priority_pods_and_freed_with_the_preemptor(
    kube_client: kube.Kube, namespace: str, add_node: NodeFactory, plumb: Plumb
) -> None:
    """One 4-cpu node full of two 2-cpu priority-0 pods. A 4-cpu priority-1000 pod preempts
    both; while they terminate, 1-cpu priority-0 pods keep coming: once the victims are gone
    the room is the nominated pod's, so they wait. Deleting the nominated pod before it binds
    frees the room for them."""
    node = add_node(builders.make_node(f"{namespace}-n").capacity(cpu="4"))
    _place(kube_client, [_pod(namespace, f"old{i}", "2") for i in range(2)], node)
    kube_client.create_pod(_pod(namespace, "vip", "4", priority=HIGH).obj())
    kube.wait_for(
        "both victims to be terminating",
        lambda: len(_gone_or_terminating(kube_client, namespace)) == 2 or None,
    )
    # A stream of small pods while the victims terminate, and after they are gone.
    for i in range(3):
        kube_client.create_pod(_pod(namespace, f"small{i}", "1").obj())
    assert "Insufficient cpu" in _failed_message(kube_client, namespace, "small0")
    # vip's node is held by vip alone: stop it from binding (it would take the room) by
    # deleting it while the victims still terminate, after checking the small pods waited.
    for i in range(3):
        assert kube_client.pod(namespace, f"small{i}")["spec"].get("nodeName") is None
    kube_client.core.delete_namespaced_pod("vip", namespace, grace_period_seconds=0)
    kube.wait_for(
        "vip to be gone",
        lambda: all(p["metadata"]["name"] != "vip" for p in kube_client.pods(namespace)),
    )
    for i in range(2):
        kube_client.release(namespace, f"old{i}")
    placed = kube.wait_for(
        "the small pods to be bound once the room is free",
        lambda: (
            all(
                kube_client.pod(namespace, f"small{i}")["spec"].get("nodeName") == node
                for i in range(3)
            )
            or None
        ),
    )
    assert placed


def test_the_held_room_is_not_taken_by_lower_priority_pods_once_the_victims_are_gone(
    kube_client: kube.Kube, namespace: str, add_node: NodeFactory, plumb: Plumb
) -> None:
    """As above, but the victims finish first: the small priority-0 pods created while they
    terminated must not take the freed room; the nominated pod binds there, and the small
    ones stay pending (no room left)."""
    node = add_node(builders.make_node(f"{namespace}-n").capacity(cpu="4"))
    _place(kube_client, [_pod(namespace, f"old{i}", "2") for i in range(2)], node)
    kube_client.create_pod(_pod(namespace, "vip", "4", priority=HIGH).obj())
    kube.wait_for(
        "both victims to be terminating",
        lambda: len(_gone_or_terminating(kube_client, namespace)) == 2 or None,
    )
    for i in range(3):
        kube_client.create_pod(_pod(namespace, f"small{i}", "1").obj())
    _failed_message(kube_client, namespace, "small2")
    for i in range(2):
        kube_client.release(namespace, f"old{i}")
    bound = kube.wait_for(
        "vip to be bound", lambda: kube_client.pod(namespace, "vip")["spec"].get("nodeName")
    )
    assert bound == node
    for i in range(3):
        assert kube_client.pod(namespace, f"small{i}")["spec"].get("nodeName") is None


def test_a_pdb_is_respected_when_another_node_avoids_violating_it(
    kube_client: kube.Kube, namespace: str, add_node: NodeFactory, plumb: Plumb
) -> None:
    """Nodes a and b each hold one 4-cpu priority-0 pod; a's is covered by a PDB that allows
    no disruption. Both nodes need exactly one victim of the same priority, so only the PDB
    decides: b. (Without the PDB the hash tie-break picks; the test checks a's pod is not the
    victim whichever way the tie would go, by giving a the lexically smaller name.)"""
    a = add_node(builders.make_node(f"{namespace}-a").capacity(cpu="4"))
    b = add_node(builders.make_node(f"{namespace}-b").capacity(cpu="4"))
    _place(kube_client, [_pod(namespace, "guarded", "4").label("app", "guarded")], a)
    _place(kube_client, [_pod(namespace, "plain", "4")], b)
    kube_client.create_pdb(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "guard", "namespace": namespace},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "guarded"}}},
        }
    )
    kube.wait_for(
        "the disruption controller to fill the PDB's status",
        lambda: (
            "disruptionsAllowed" in (kube_client.pdb(namespace, "guard").get("status") or {})
            or None
        ),
    )
    kube_client.create_pod(_pod(namespace, "vip", "4", priority=HIGH).obj())
    terminating = kube.wait_for(
        "a victim to be terminating",
        lambda: _gone_or_terminating(kube_client, namespace) or None,
    )
    assert terminating == {"plain": "PreemptionByScheduler"}
    assert _status(kube_client, namespace, "vip").get("nominatedNodeName") == b
    _release_all(kube_client, namespace)


def test_preemption_policy_never_evicts_nothing_and_says_why(
    kube_client: kube.Kube, namespace: str, add_node: NodeFactory, plumb: Plumb
) -> None:
    node = add_node(builders.make_node(f"{namespace}-n").capacity(cpu="4"))
    _place(kube_client, [_pod(namespace, "old", "4")], node)
    pod = _pod(namespace, "polite", "4", priority=HIGH).priority(HIGH, preemption_policy="Never")
    kube_client.create_pod(pod.obj())
    message = _failed_message(kube_client, namespace, "polite")
    assert message == (
        "0/1 nodes are available: 1 Insufficient cpu. no new claims to deallocate, "
        "preemption: not eligible due to preemptionPolicy=Never."
    )
    assert not _gone_or_terminating(kube_client, namespace)
    assert not _status(kube_client, namespace, "polite").get("nominatedNodeName")
    _release_all(kube_client, namespace)
