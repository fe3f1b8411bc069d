"""What changed between kube-scheduler v1.34 and v1.37 in how nodes are scored and pods
counted, under plumb and under the real kube-scheduler on the same control plane:
NodeResourcesBalancedAllocation's score (the change in balance the pod brings, from v1.36),
InterPodAffinity's namespaceSelector (from v1.37 only the namespaces it matches) and a pod
being resized in place (from v1.37 the largest of its totals).

Each expectation is keyed by the session's release (``kube_minor``), so the same test passes
against every release and shows where they differ; the arithmetic that makes every placement
free of ties is in each test. docs/versions.md has the worked example.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from plumb_dev.testing import builders, kube
from tests.support import side_by_side
from tests.support.live_cluster import NodeFactory
from tests.support.plumb_process import PlumbFactory
from tests.support.side_by_side import scheduler_fixture  # noqa: F401

pytestmark = pytest.mark.integration

ZONE = "topology.kubernetes.io/zone"


def _balance_nodes(
    kube_client: kube.Kube, namespace: str, add_node: NodeFactory
) -> tuple[str, str]:
    """Two nodes of 4 cpu and 8Gi: "even" holds 2 cpu and 4Gi, "heavy" 2.5 cpu and 512Mi
    (pods bound at creation, which no scheduler decides)."""
    even = add_node(builders.make_node(f"{namespace}-even").capacity(cpu="4", memory="8Gi"))
    heavy = add_node(builders.make_node(f"{namespace}-heavy").capacity(cpu="4", memory="8Gi"))
    for name, node, cpu, memory in (("half", even, "2", "4Gi"), ("cpu", heavy, "2500m", "512Mi")):
        resident = builders.make_pod(name, namespace).req(cpu=cpu, memory=memory).node(node)
        kube_client.create_pod(resident.obj())
    return even, heavy


def _balance_expected(minor: int, even: str, heavy: str) -> str:
    """Where a pod of 1 cpu and 2Gi goes on ``_balance_nodes``. LeastAllocated: even
    (25 + 25) / 2 = 25, heavy (12 + 68) / 2 = 40. BalancedAllocation up to v1.35, the balance
    with the pod: even .75 and .75, 100; heavy .875 and .3125, 71: even 125, heavy 111.
    From v1.36 the change it brings: even 100 without it too, heavy 71 too: 75 both; even
    100, heavy 115. (Every other score is alike on both nodes.)"""
    return even if minor < 36 else heavy


def test_balanced_allocation_picks_the_node_of_its_release(
    kube_minor: int,
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: side_by_side.Runner,
) -> None:
    even, heavy = _balance_nodes(kube_client, namespace, add_node)
    side_by_side.in_view(kube_client, scheduler, namespace, [even, heavy])
    kube_client.create_pod(scheduler.pod("web", namespace).req(cpu="1", memory="2Gi").obj())
    placed = side_by_side.wait_settled(kube_client, namespace, ["web"], cluster_nodes=2)
    assert placed == {"web": _balance_expected(kube_minor, even, heavy)}


def test_the_emulated_version_scores_as_the_release_it_pins(
    kube_minor: int,
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    start_plumb: PlumbFactory,
) -> None:
    # The release of the other formula: v1.34 on a v1.36+ cluster, v1.37 on an older one.
    pinned = 34 if kube_minor >= 36 else 37
    plumb = start_plumb("--scheduler-name", "plumb", "--emulated-version", f"1.{pinned}")
    runner = side_by_side.Runner(name=side_by_side.PLUMB, scheduler_name="plumb", log=plumb.log)
    even, heavy = _balance_nodes(kube_client, namespace, add_node)
    side_by_side.in_view(kube_client, runner, namespace, [even, heavy])
    kube_client.create_pod(runner.pod("web", namespace).req(cpu="1", memory="2Gi").obj())
    placed = side_by_side.wait_settled(kube_client, namespace, ["web"], cluster_nodes=2)
    assert placed == {"web": _balance_expected(pinned, even, heavy)}
    assert _balance_expected(pinned, even, heavy) != _balance_expected(kube_minor, even, heavy)
    assert f"deciding as kube-scheduler v1.{pinned} (pinned by --emulated-version)" in (
        plumb.output()
    )


@pytest.fixture
def prod_namespace(kube_client: kube.Kube, namespace: str) -> Iterator[str]:
    """A namespace labelled env=prod beside the test's own, labelled env=dev."""
    name = f"{namespace}-prod"
    kube_client.create_namespace(name)
    kube_client.core.patch_namespace(name, {"metadata": {"labels": {"env": "prod"}}})
    kube_client.core.patch_namespace(namespace, {"metadata": {"labels": {"env": "dev"}}})
    yield name
    kube_client.delete_namespace(name)


def test_anti_affinity_to_namespaces_not_prod_reaches_prod_up_to_v1_36(
    kube_minor: int,
    kube_client: kube.Kube,
    namespace: str,
    prod_namespace: str,
    add_node: NodeFactory,
    scheduler: side_by_side.Runner,
) -> None:
    # Two zones of their own (no other test's pods share them). "a1" is the roomier node
    # (LeastAllocated 95 against 47; BalancedAllocation 99 / 74 on both): other things equal
    # a pod goes there. A cache pod of namespace prod runs on a1.
    a1 = add_node(
        builders.make_node(f"{namespace}-a1")
        .capacity(cpu="4", memory="8Gi")
        .label(ZONE, f"{namespace}-a")
    )
    b1 = add_node(
        builders.make_node(f"{namespace}-b1")
        .capacity(cpu="4", memory="8Gi")
        .label(ZONE, f"{namespace}-b")
    )
    cache = builders.make_pod("cache", prod_namespace).label("app", "cache").node(a1)
    kube_client.create_pod(cache.obj())
    filler = builders.make_pod("filler", namespace).req(cpu="2", memory="4Gi").node(b1)
    kube_client.create_pod(filler.obj())
    side_by_side.in_view(kube_client, scheduler, namespace, [a1, b1])

    # The incoming pod (namespace dev) keeps away from cache pods of namespaces whose env is
    # not prod. From v1.37 that is not prod: a1 is fine. Up to v1.36 the selector, which an
    # empty label set satisfies, matched the cache pods of every namespace: a1 is out.
    web = scheduler.pod("web", namespace).req(cpu="100m", memory="128Mi")
    web._spec["affinity"] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "topologyKey": ZONE,
                    "labelSelector": {"matchLabels": {"app": "cache"}},
                    "namespaceSelector": {
                        "matchExpressions": [
                            {"key": "env", "operator": "NotIn", "values": ["prod"]}
                        ]
                    },
                }
            ]
        }
    }
    kube_client.create_pod(web.obj())
    placed = side_by_side.wait_settled(kube_client, namespace, ["web"], cluster_nodes=2)
    assert placed == {"web": a1 if kube_minor >= 37 else b1}


def _container_status(name: str, cpu: str) -> dict[str, Any]:
    """A container status as a kubelet reports a container running with, and allocated,
    ``cpu``."""
    return {
        "name": name,
        "image": "registry.k8s.io/pause:3.10",
        "imageID": "",
        "ready": True,
        "restartCount": 0,
        "started": True,
        "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
        "resources": {"requests": {"cpu": cpu}},
        "allocatedResources": {"cpu": cpu},
    }


def test_a_pod_being_resized_counts_its_largest_total_from_v1_37(
    kube_minor: int,
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: side_by_side.Runner,
) -> None:
    # One node of 4 cpu. A pod bound there asks 2 cpu for "main" and 1 for "side"; as its
    # kubelet would report in the middle of an in-place resize, main runs with (and was
    # allocated) 1, side with 2. Up to v1.36 each container counts its largest: 2 + 2 = 4,
    # the node is full. From v1.37 the largest total: 3 (spec, actuated and allocated alike),
    # and a pod of 1 cpu fits.
    node = add_node(builders.make_node(f"{namespace}-n").capacity(cpu="4", memory="8Gi"))
    resized = builders.make_pod("resized", namespace).req(cpu="2").container("side", cpu="1")
    kube_client.create_pod(resized.node(node).obj())
    status = {
        "phase": "Running",
        "containerStatuses": [_container_status("main", "1"), _container_status("side", "2")],
    }
    kube_client.core.patch_namespaced_pod_status("resized", namespace, {"status": status})
    kept = kube_client.pod(namespace, "resized")["status"].get("containerStatuses") or []
    # The API server keeps what the kubelet would write (InPlacePodVerticalScaling is on in
    # every release): a resizing pod needs no kubelet.
    assert [(c["resources"]["requests"]["cpu"], c["allocatedResources"]["cpu"]) for c in kept] == [
        ("1", "1"),
        ("2", "2"),
    ]
    side_by_side.in_view(kube_client, scheduler, namespace, [node])

    kube_client.create_pod(scheduler.pod("web", namespace).req(cpu="1").obj())
    placed = side_by_side.wait_settled(kube_client, namespace, ["web"], cluster_nodes=1)
    if kube_minor >= 37:
        assert placed == {"web": node}
    else:
        assert placed == {"web": None}
        message = side_by_side.failed_scheduling(kube_client, namespace, "web")
        assert message is not None
        assert message.startswith("0/1 nodes are available: 1 Insufficient cpu. "), message
