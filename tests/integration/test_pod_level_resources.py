"""Pod-level resources (``spec.resources``) under plumb and under kube-scheduler v1.34.4: the API
server keeps the field (PodLevelResources is beta and on by default in v1.34), and both
schedulers take a pod's request from it rather than from its containers' sum: the same
placements, the same FailedScheduling messages."""

from __future__ import annotations

from typing import Any

import pytest

from plumb_dev.testing import builders, kube
from tests.support import side_by_side
from tests.support.live_cluster import NodeFactory
from tests.support.side_by_side import scheduler_fixture  # noqa: F401

pytestmark = pytest.mark.integration


def _settle(client: kube.Kube, namespace: str, body: dict[str, Any], nodes: int) -> str | None:
    """Create the pod and wait for its outcome, judged with every node in view."""
    name = str(body["metadata"]["name"])
    client.create_pod(body)
    return side_by_side.wait_settled(client, namespace, [name], cluster_nodes=nodes)[name]


def test_requests_come_from_the_pod_level_under_both_schedulers(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: side_by_side.Runner,
) -> None:
    n1, n2 = (
        add_node(builders.make_node(f"{namespace}-{i}").capacity(cpu="2", memory="4Gi"))
        for i in ("n1", "n2")
    )
    side_by_side.in_view(kube_client, scheduler, namespace, [n1, n2])

    # n1 takes a pod whose container asks 100m but which asks 1500m as a whole; n2 one whose
    # container asks 1 cpu. Each is pinned, so no tie is left to either scheduler's tie-break.
    heavy = (
        scheduler.pod("heavy", namespace)
        .req(cpu="100m", memory="1Gi")
        .node_selector(builders.HOSTNAME_LABEL, n1)
        .pod_resources(requests={"cpu": "1500m", "memory": "1Gi"})
        .obj()
    )
    assert _settle(kube_client, namespace, heavy, 2) == n1
    kept = kube_client.pod(namespace, "heavy")["spec"].get("resources")
    assert kept == {"requests": {"cpu": "1500m", "memory": "1Gi"}}, "the API server dropped it"
    light = (
        scheduler.pod("light", namespace)
        .req(cpu="1", memory="1Gi")
        .node_selector(builders.HOSTNAME_LABEL, n2)
    )
    assert _settle(kube_client, namespace, light.obj(), 2) == n2

    # 400m fits both nodes; n2 is the less used once heavy counts 1500m (100m would make n1).
    assert (
        _settle(kube_client, namespace, scheduler.pod("web", namespace).req(cpu="400m").obj(), 2)
        == n2
    )

    # Its container's 100m would fit either node (n1 has 500m left, n2 600m); the pod's 700m
    # fits neither.
    tight = (
        scheduler.pod("tight", namespace)
        .req(cpu="100m")
        .pod_resources(requests={"cpu": "700m"})
        .obj()
    )
    assert _settle(kube_client, namespace, tight, 2) is None
    # More than any node has, though its container asks 500m.
    big = scheduler.pod("big", namespace).req(cpu="500m").pod_resources(requests={"cpu": "3"}).obj()
    assert _settle(kube_client, namespace, big, 2) is None
    # Preemption could free room for tight (no pod of lower priority is there to evict);
    # for big it could not, whatever it evicted.
    insufficient = "0/2 nodes are available: 2 Insufficient cpu."
    assert side_by_side.failed_scheduling(kube_client, namespace, "tight") == (
        side_by_side.without_victims(insufficient, 2, 2)
    )
    assert side_by_side.failed_scheduling(kube_client, namespace, "big") == (
        side_by_side.without_victims(insufficient, 2, 0)
    )


def test_the_scorers_default_a_container_without_cpu_beside_pod_level_requests(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: side_by_side.Runner,
) -> None:
    # web asks 1Gi at pod level; its containers ask 500m cpu and nothing. Being scheduled,
    # NodeResourcesFit's scorer counts the containers alone, with 100m and 200Mi for what
    # each names not (600m, 400Mi: pod-level requests are left out, among them the 500m cpu
    # v1.37's API server defaults from the containers): n1 (40 + 90) / 2 = 65, n2
    # (46 + 65) / 2 = 55. BalancedAllocation reads 500m and 1Gi: up to v1.35 n1 87, n2 98;
    # from v1.36 n1 68 (100 without web), n2 79 (89 without it). n2 wins by one point in
    # every release; without the default for "log" (500m, 200Mi) n1 would by three.
    n1 = add_node(builders.make_node(f"{namespace}-n1").capacity(cpu="1", memory="4Gi"))
    n2 = add_node(builders.make_node(f"{namespace}-n2").capacity(cpu="8", memory="4Gi"))
    side_by_side.in_view(kube_client, scheduler, namespace, [n1, n2])
    kube_client.create_pod(
        builders.make_pod("filler", namespace).node(n2).req(cpu="3700m", memory="1Gi").obj()
    )
    side_by_side.in_view(kube_client, scheduler, namespace, [n1, n2])  # filler seen too
    web = (
        scheduler.pod("web", namespace)
        .req(cpu="500m")
        .container("log")
        .pod_resources(requests={"memory": "1Gi"})
        .obj()
    )
    assert _settle(kube_client, namespace, web, 2) == n2
