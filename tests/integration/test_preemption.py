"""Preemption against the real control plane: priorities from PriorityClasses (the Priority
admission plugin), victims chosen as kube-scheduler chooses them, the DisruptionTarget condition,
the Preempted event, the nomination and the room it holds, PodDisruptionBudgets and
preemptionPolicy Never.

Victims carry a finalizer where the test must see them terminate (a scale node has no kubelet,
so without one a pod with a grace period of 0 is gone at once); the test releases them.
"""

from __future__ import annotations

import pytest

from plumb import DEFAULT_SCHEDULER_NAME
from plumb_dev.testing import builders, kube
from tests.support import preemption_steps, side_by_side
from tests.support.live_cluster import NodeFactory, events_of
from tests.support.plumb_process import Plumb
from tests.support.preemption_steps import PREEMPTED
from tests.support.preemption_steps import PREEMPTOR_PRIORITY as HIGH

pytestmark = pytest.mark.integration


def _pod(namespace: str, name: str, cpu: str, priority: int = 0) -> builders.PodBuilder:
    pod = builders.make_pod(name, namespace).scheduler(DEFAULT_SCHEDULER_NAME).req(cpu=cpu)
    pod = pod.grace(0)
    return pod.priority(priority) if priority else pod


def _nominated(client: kube.Kube, namespace: str, name: str) -> str | None:
    return preemption_steps.nominated(client.pod(namespace, name))


def _node_of(client: kube.Kube, namespace: str, name: str) -> str | None:
    node = client.pod(namespace, name)["spec"].get("nodeName")
    return None if node is None else str(node)


def _wait_terminating(client: kube.Kube, namespace: str, count: int) -> dict[str, str]:
    """Waits until ``count`` pods terminate: {name: DisruptionTarget reason}."""
    return kube.wait_for(
        f"{count} victim(s) to be terminating",
        lambda: (
            found
            if len(found := preemption_steps.terminating(client, namespace)) >= count
            else None
        ),
    )


def _small_pods_wait_while_a_vip_s_victims_terminate(
    client: kube.Kube, namespace: str, add_node: NodeFactory
) -> str:
    """One 4-cpu node full of two 2-cpu priority-0 pods; a 4-cpu priority-1000 pod preempts
    both, and while they terminate three 1-cpu priority-0 pods come, and fail. The node."""
    node = add_node(builders.make_node(f"{namespace}-n").capacity(cpu="4"))
    preemption_steps.place(client, node, *(_pod(namespace, f"old{i}", "2") for i in range(2)))
    client.create_pod(_pod(namespace, "vip", "4", priority=HIGH).obj())
    _wait_terminating(client, namespace, 2)
    for i in range(3):
        client.create_pod(_pod(namespace, f"small{i}", "1").obj())
    for i in range(3):
        message = preemption_steps.newest_failed_scheduling(client, namespace, f"small{i}")
        assert "Insufficient cpu" in message
    return node


def test_a_priority_pod_preempts_the_fewest_victims_on_one_node_and_binds_there(
    kube_client: kube.Kube, namespace: str, add_node: NodeFactory, plumb: Plumb
) -> None:
    """Node a holds four 1-cpu pods (priority 0): room for a 2-cpu pod means 2 victims. Node
    b holds a 2-cpu pod of priority 0 and two 1-cpu pods of priority 5: all three removed, the
    priority-5 pods are reprieved first and still leave room, so the 2-cpu pod is b's only
    victim. One victim beats two: b, and only that pod is touched."""
    a = add_node(builders.make_node(f"{namespace}-a").capacity(cpu="4"))
    b = add_node(builders.make_node(f"{namespace}-b").capacity(cpu="4"))
    preemption_steps.place(kube_client, a, *(_pod(namespace, f"a{i}", "1") for i in range(4)))
    preemption_steps.place(
        kube_client,
        b,
        _pod(namespace, "b-big", "2"),
        _pod(namespace, "b-mid1", "1", priority=5),
        _pod(namespace, "b-mid2", "1", priority=5),
    )
    kube_client.create_pod(_pod(namespace, "vip", "2", priority=HIGH).obj())

    assert _wait_terminating(kube_client, namespace, 1) == {"b-big": PREEMPTED}
    nominated = kube.wait_for("vip's nomination", lambda: _nominated(kube_client, namespace, "vip"))
    assert nominated == b
    preempted = events_of(kube_client, namespace, "b-big", "Preempted")
    assert len(preempted) == 1
    vip_uid = kube_client.pod(namespace, "vip")["metadata"]["uid"]
    assert preemption_steps.event_text(preempted[0]) == preemption_steps.preempted_by(vip_uid, b)
    assert preempted[0]["related"]["name"] == "vip"
    # While the victim terminates it still holds its room: vip waits, nominated.
    assert _node_of(kube_client, namespace, "vip") is None

    kube_client.release(namespace, "b-big")
    assert preemption_steps.bound(kube_client, namespace, "vip", timeout=30) == b
    left = {p["metadata"]["name"] for p in kube_client.pods(namespace)}
    assert left == {"a0", "a1", "a2", "a3", "b-mid1", "b-mid2", "vip"}
    preemption_steps.release_all(kube_client, namespace)


def test_the_nominated_room_is_held_from_lower_priority_pods_and_freed_with_the_preemptor(
    kube_client: kube.Kube, namespace: str, add_node: NodeFactory, plumb: Plumb
) -> None:
    """One 4-cpu node full of two 2-cpu priority-0 pods. A 4-cpu priority-1000 pod preempts
    both; while they terminate, 1-cpu priority-0 pods keep coming: once the victims are gone
    the room is the nominated pod's, so they wait. Deleting the nominated pod before it binds
    frees the room for them."""
    node = _small_pods_wait_while_a_vip_s_victims_terminate(kube_client, namespace, add_node)
    # vip's node is held by vip alone: stop it from binding (it would take the room) by
    # deleting it while the victims still terminate, after checking the small pods waited.
    for i in range(3):
        assert _node_of(kube_client, namespace, f"small{i}") is None
    kube_client.core.delete_namespaced_pod("vip", namespace, grace_period_seconds=0)
    kube.wait_for(
        "vip to be gone",
        lambda: all(p["metadata"]["name"] != "vip" for p in kube_client.pods(namespace)),
    )
    for i in range(2):
        kube_client.release(namespace, f"old{i}")
    for i in range(3):
        assert preemption_steps.bound(kube_client, namespace, f"small{i}", timeout=30) == node


def test_the_held_room_is_not_taken_by_lower_priority_pods_once_the_victims_are_gone(
    kube_client: kube.Kube, namespace: str, add_node: NodeFactory, plumb: Plumb
) -> None:
    """As above, but the victims finish first: the small priority-0 pods created while they
    terminated must not take the freed room; the nominated pod binds there, and the small
    ones stay pending (no room left)."""
    node = _small_pods_wait_while_a_vip_s_victims_terminate(kube_client, namespace, add_node)
    for i in range(2):
        kube_client.release(namespace, f"old{i}")
    assert preemption_steps.bound(kube_client, namespace, "vip", timeout=30) == node
    for i in range(3):
        assert _node_of(kube_client, namespace, f"small{i}") is None


def test_a_pdb_is_respected_when_another_node_avoids_violating_it(
    kube_client: kube.Kube, namespace: str, add_node: NodeFactory, plumb: Plumb
) -> None:
    """Nodes a and b each hold one 4-cpu priority-0 pod; a's is covered by a PDB that allows
    no disruption. Both nodes need exactly one victim of the same priority, so only the PDB
    decides: b. (Without the PDB the hash tie-break picks; the test checks a's pod is not the
    victim whichever way the tie would go, by giving a the lexically smaller name.)"""
    a = add_node(builders.make_node(f"{namespace}-a").capacity(cpu="4"))
    b = add_node(builders.make_node(f"{namespace}-b").capacity(cpu="4"))
    preemption_steps.place(kube_client, a, _pod(namespace, "guarded", "4").label("app", "guarded"))
    preemption_steps.place(kube_client, b, _pod(namespace, "plain", "4"))
    kube_client.create_pdb(preemption_steps.pdb(namespace, "guard", {"app": "guarded"}))
    kube.wait_for(
        "the disruption controller to fill the PDB's status",
        lambda: preemption_steps.disruptions_allowed(kube_client, namespace, "guard") is not None,
    )
    kube_client.create_pod(_pod(namespace, "vip", "4", priority=HIGH).obj())
    assert _wait_terminating(kube_client, namespace, 1) == {"plain": PREEMPTED}
    assert _nominated(kube_client, namespace, "vip") == b
    preemption_steps.release_all(kube_client, namespace)


def test_preemption_policy_never_evicts_nothing_and_says_why(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    plumb: Plumb,
    words: side_by_side.Words,
) -> None:
    node = add_node(builders.make_node(f"{namespace}-n").capacity(cpu="4"))
    preemption_steps.place(kube_client, node, _pod(namespace, "old", "4"))
    pod = _pod(namespace, "polite", "4", priority=HIGH).priority(HIGH, preemption_policy="Never")
    kube_client.create_pod(pod.obj())
    # Judged with the node in view (the node and pod watches are separate streams: a first
    # attempt may see no node at all).
    message = preemption_steps.newest_failed_scheduling(
        kube_client, namespace, "polite", containing="0/1 nodes are available"
    )
    assert message == words.post_filter(
        "0/1 nodes are available: 1 Insufficient cpu.",
        "not eligible due to preemptionPolicy=Never.",
    )
    assert not preemption_steps.terminating(kube_client, namespace)
    assert not _nominated(kube_client, namespace, "polite")
    preemption_steps.release_all(kube_client, namespace)
