"""The demo's preemption act: a pod of a higher PriorityClass makes room on a full node."""

from __future__ import annotations

import functools
from typing import Any

from plumb import DEFAULT_SCHEDULER_NAME
from plumb_dev.testing import builders, kube

POOL_LABEL = "demo.plumb.dev/pool"
POOL = "urgent"
NODE = "node-urgent"
CRITICAL = 1000


def _pod(namespace: str, name: str, cpu: str) -> builders.PodBuilder:
    return (
        builders.make_pod(name, namespace)
        .scheduler(DEFAULT_SCHEDULER_NAME)
        .node_selector(POOL_LABEL, POOL)
        .req(cpu=cpu, memory="256Mi")
        .grace(0)  # no kubelet to wait for: a deleted pod is gone at once
    )


def _preempted(client: kube.Kube, namespace: str, name: str) -> str | None:
    """The note of the pod's Preempted event, once there is one."""
    for event in client.events(namespace, name):
        if event.get("reason") == "Preempted":
            return str(event.get("message"))
    return None


def _node_of(pod: dict[str, Any]) -> str:
    return str(pod["spec"].get("nodeName") or "")


def act(client: kube.Kube, namespace: str) -> None:
    """Four 1-cpu pods of priority 0 fill a 4-cpu node; a 2-cpu pod of priority 1000 arrives:
    plumb evicts two of them, the fewest that make room, and places it there."""
    client.create_node(
        builders.make_node(NODE).label(POOL_LABEL, POOL).capacity(cpu="4", memory="16Gi").obj()
    )
    client.create_namespace(namespace)
    fillers = [f"filler-{i}" for i in range(4)]
    for name in fillers:
        client.create_pod(_pod(namespace, name, "1").obj())
    kube.wait_for(
        "the filler pods to be bound",
        lambda: all(_node_of(client.pod(namespace, name)) == NODE for name in fillers) or None,
        timeout=60,
    )
    print(
        f"\n{NODE} (4 cpu, pool {POOL}) is full: 4 pods of priority 0 asking 1 cpu each; now "
        f"pod critical asks 2 cpu with PriorityClass value {CRITICAL}"
    )
    client.create_pod(_pod(namespace, "critical", "2").priority(CRITICAL).obj())
    placed = kube.wait_for(
        "pod critical to be bound",
        lambda: _node_of(client.pod(namespace, "critical")) or None,
        timeout=60,
    )
    left = {str(p["metadata"]["name"]) for p in client.pods(namespace)}
    evicted = [name for name in fillers if name not in left]
    for name in evicted:
        note = kube.wait_for(
            f"the Preempted event of {name}",
            functools.partial(_preempted, client, namespace, name),
            timeout=30,
        )
        print(f"  {namespace}/{name}: Preempted: {note}")
    print(
        f"{namespace}/critical -> {placed}, after {len(evicted)} of {len(fillers)} pods were "
        "preempted (the fewest that make room)"
    )
