"""Pods with volumes under plumb and under kube-scheduler (the control plane's release) with
kube-controller-manager's PV controller: a StatefulSet whose claims can bind only where local
PersistentVolumes are, a claim already bound to a pinned volume, and a claim that does not
exist. Both schedulers place the same pods on the same nodes and say the same thing about the
pods they cannot place."""

from __future__ import annotations

from typing import Any

from plumb_dev.testing import builders, kube
from tests.support import side_by_side
from tests.support.live_cluster import NodeFactory
from tests.support.side_by_side import scheduler_fixture  # noqa: F401
from tests.support.storage import Storage, storage_fixture  # noqa: F401
from tests.support.volume_messages import AFTER_PREFILTER, MISSING_CLAIM, NO_PV_LEFT, not_helpful
from tests.support.volume_objects import (
    pv_body,
    pvc_body,
    storage_class_body,
)

NODES = 5
REPLICAS = 3


def _nodes(
    client: kube.Kube, namespace: str, add_node: NodeFactory, scheduler: side_by_side.Runner
) -> list[str]:
    nodes = [
        add_node(builders.make_node(f"{namespace}-n{i}").capacity(cpu="4", memory="8Gi"))
        for i in range(NODES)
    ]
    side_by_side.in_view(client, scheduler, namespace, nodes)
    return nodes


def _stateful_set(namespace: str, scheduler_name: str, storage_class: str) -> dict[str, Any]:
    labels = {"app": "web"}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {
            "replicas": REPLICAS,
            "serviceName": "web",
            # Parallel: the pods of nodes without a kubelet never become Ready, and an
            # OrderedReady set would wait for each before making the next.
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "schedulerName": scheduler_name,
                    "containers": [
                        {
                            "name": "web",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": "100m"}},
                            "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                        }
                    ],
                },
            },
            "volumeClaimTemplates": [
                {
                    "metadata": {"name": "data"},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "storageClassName": storage_class,
                        "resources": {"requests": {"storage": "1Gi"}},
                    },
                }
            ],
        },
    }


def test_a_statefulset_lands_only_where_its_local_volumes_can_bind(
    kube_minor: int,
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    storage: Storage,
    scheduler: side_by_side.Runner,
) -> None:
    nodes = _nodes(kube_client, namespace, add_node, scheduler)
    local = storage.storage_class(storage_class_body(f"local-{namespace}"))
    with_volume = [nodes[1], nodes[3]]
    for node in with_volume:
        storage.pv(pv_body(f"{node}-pv", node=node, storage_class=local, size="5Gi"))
    kube_client.apps.create_namespaced_stateful_set(
        namespace, _stateful_set(namespace, scheduler.scheduler_name, local)
    )
    pods = [f"web-{i}" for i in range(REPLICAS)]
    kube.wait_for(
        "the StatefulSet's pods",
        lambda: {p["metadata"]["name"] for p in kube_client.pods(namespace)} >= set(pods),
    )
    placed = side_by_side.wait_settled(kube_client, namespace, pods, cluster_nodes=NODES)
    bound = {pod: node for pod, node in placed.items() if node is not None}
    assert sorted(bound.values()) == sorted(with_volume), placed
    (waiting,) = [pod for pod, node in placed.items() if node is None]
    assert side_by_side.failed_scheduling(kube_client, namespace, waiting) == (
        NO_PV_LEFT + not_helpful(kube_minor)
    )
    # The PV controller finished each binding the scheduler started: each placed pod's claim
    # is Bound to the volume on its node.
    for pod, node in bound.items():
        claim = storage.wait_bound(f"data-{pod}")
        assert claim["spec"]["volumeName"] == f"{node}-pv"
    assert (storage.claim_body(f"data-{waiting}").get("status") or {}).get("phase") == "Pending"


def test_a_pod_whose_claim_is_bound_goes_to_its_volumes_node(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    storage: Storage,
    scheduler: side_by_side.Runner,
) -> None:
    nodes = _nodes(kube_client, namespace, add_node, scheduler)
    local = storage.storage_class(storage_class_body(f"local-{namespace}"))
    pv = storage.pv(pv_body(f"{namespace}-pinned", node=nodes[2], storage_class=local, size="5Gi"))
    storage.claim(pvc_body("pinned", namespace, storage_class=local, volume=pv))
    storage.wait_bound("pinned")
    kube_client.create_pod(scheduler.pod("user", namespace).req(cpu="100m").claims("pinned").obj())
    placed = side_by_side.wait_settled(kube_client, namespace, ["user"], cluster_nodes=NODES)
    assert placed == {"user": nodes[2]}


def test_a_pod_whose_claim_does_not_exist_waits_with_kube_schedulers_message(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: side_by_side.Runner,
) -> None:
    _nodes(kube_client, namespace, add_node, scheduler)
    kube_client.create_pod(scheduler.pod("lonely", namespace).claims("data-missing").obj())
    placed = side_by_side.wait_settled(kube_client, namespace, ["lonely"], cluster_nodes=NODES)
    assert placed == {"lonely": None}
    assert side_by_side.failed_scheduling(kube_client, namespace, "lonely") == (
        MISSING_CLAIM + AFTER_PREFILTER
    )
