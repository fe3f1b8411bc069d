"""Workloads, not bare pods: a Deployment opted in to plumb, driven by the real
kube-controller-manager, through scale-up, scale-down, scale-up and a rolling update."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from plumb import DEFAULT_SCHEDULER_NAME
from plumb_dev.testing import builders, kube
from tests.support.live_cluster import NodeFactory
from tests.support.plumb_process import Plumb

pytestmark = pytest.mark.integration

ZONE = builders.ZONE_LABEL
APP = "web"
HASH = "pod-template-hash"


def _deployment(namespace: str, replicas: int) -> dict[str, Any]:
    spread = {
        "topologyKey": ZONE,
        "maxSkew": 1,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": APP}},
        # Each ReplicaSet's pods are spread among themselves, so a rollout is not skewed by the
        # old ReplicaSet's pods it is about to replace.
        "matchLabelKeys": [HASH],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": APP, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": APP}},
            # All new pods at once: the scale nodes have no kubelet, so no pod ever becomes
            # available and a rollout that waits for availability would stop half way.
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": "100%", "maxUnavailable": 0},
            },
            "template": {
                "metadata": {"labels": {"app": APP}},
                "spec": {
                    "schedulerName": DEFAULT_SCHEDULER_NAME,
                    "terminationGracePeriodSeconds": 0,
                    "topologySpreadConstraints": [spread],
                    "containers": [
                        {
                            "name": "web",
                            "image": "registry.invalid/web:1",
                            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                        }
                    ],
                },
            },
        },
    }


def _live(client: kube.Kube, namespace: str) -> list[dict[str, Any]]:
    return [p for p in client.pods(namespace) if not p["metadata"].get("deletionTimestamp")]


def _template_hash(pod: dict[str, Any]) -> str:
    return str(pod["metadata"]["labels"][HASH])


def _zones_of(pods: list[dict[str, Any]], zone_of: dict[str, str]) -> Counter[str]:
    return Counter(zone_of[p["spec"]["nodeName"]] for p in pods)


def _settled(
    client: kube.Kube, namespace: str, count: int, template_hash: str | None = None
) -> list[dict[str, Any]] | None:
    """The live pods (of one template hash, if given) once there are count, all bound."""
    pods = _live(client, namespace)
    if template_hash is not None:
        pods = [p for p in pods if _template_hash(p) == template_hash]
    if len(pods) != count or any(not p["spec"].get("nodeName") for p in pods):
        return None
    return pods


def _wait_settled(
    client: kube.Kube, namespace: str, count: int, template_hash: str | None = None
) -> list[dict[str, Any]]:
    return kube.wait_for(
        f"{count} live pods of the Deployment, each bound to a node",
        lambda: _settled(client, namespace, count, template_hash),
        timeout=60,
        interval=0.2,
    )


def _scheduled_by_plumb(client: kube.Kube, namespace: str, pods: list[dict[str, Any]]) -> None:
    """Each pod was made by a ReplicaSet and has plumb's Scheduled event (posted just after
    the binding, so it may trail the bound pod by a moment)."""
    for pod in pods:
        owner = pod["metadata"]["ownerReferences"][0]
        assert owner["kind"] == "ReplicaSet", f"{pod['metadata']['name']} has owner {owner}"

    def scheduled() -> dict[str, dict[str, Any]] | None:
        by_pod = {
            e["involvedObject"]["name"]: e
            for e in client.events(namespace)
            if e.get("reason") == "Scheduled"
        }
        names = [p["metadata"]["name"] for p in pods]
        return by_pod if all(name in by_pod for name in names) else None

    by_pod = kube.wait_for(f"Scheduled events for {len(pods)} pods", scheduled, timeout=30)
    for pod in pods:
        event = by_pod[pod["metadata"]["name"]]
        assert event.get("reportingComponent") == "plumb", event


def _skew(counts: Counter[str], zones: list[str]) -> int:
    values = [counts.get(zone, 0) for zone in zones]
    return max(values) - min(values)


def test_a_deployment_scaled_and_rolled_stays_spread_by_zone(
    kube_client: kube.Kube, namespace: str, add_node: NodeFactory, plumb: Plumb
) -> None:
    zone_of: dict[str, str] = {}
    for zone in ("a", "b", "c"):
        for i in range(2):
            name = add_node(builders.make_node(f"{namespace}-{zone}{i}").zone(zone))
            zone_of[name] = zone
    zones = ["a", "b", "c"]

    kube_client.create_deployment(_deployment(namespace, 30))
    pods = _wait_settled(kube_client, namespace, 30)
    _scheduled_by_plumb(kube_client, namespace, pods)
    assert _skew(_zones_of(pods, zone_of), zones) <= 1, _zones_of(pods, zone_of)

    kube_client.scale_deployment(namespace, APP, 45)
    pods = _wait_settled(kube_client, namespace, 45)
    assert _zones_of(pods, zone_of) == Counter({"a": 15, "b": 15, "c": 15})

    # The ReplicaSet controller chooses whom to remove, by its own ranking, not by zone.
    kube_client.scale_deployment(namespace, APP, 10)
    kube.wait_for(
        "the scale-down to 10",
        lambda: (
            kube_client.force_delete_terminating(namespace) == 0
            and len(_live(kube_client, namespace)) == 10
        ),
        timeout=60,
        interval=0.2,
    )
    left = _zones_of(_wait_settled(kube_client, namespace, 10), zone_of)
    print(f"the scale-down to 10 left {dict(left)}")
    kube_client.scale_deployment(namespace, APP, 30)
    pods = _wait_settled(kube_client, namespace, 30)
    final = _zones_of(pods, zone_of)
    # Every new pod must go to a least-filled zone (maxSkew 1), so they end exactly even.
    assert final == Counter({"a": 10, "b": 10, "c": 10}), f"after {dict(left)}: {dict(final)}"
    _scheduled_by_plumb(kube_client, namespace, pods)

    # A fourth zone appears, then a new template rolls out. Counting only the new
    # ReplicaSet's pods (matchLabelKeys), the 30 new pods spread evenly over all four zones;
    # counting the old ones too, the empty zone would have to catch up first and take ten.
    for i in range(2):
        name = add_node(builders.make_node(f"{namespace}-d{i}").zone("d"))
        zone_of[name] = "d"
    old_hash = _template_hash(pods[0])
    kube_client.patch_deployment(
        namespace,
        APP,
        {"spec": {"template": {"metadata": {"annotations": {"rollout": "2"}}}}},
    )
    new_hash = kube.wait_for(
        "the rollout's new ReplicaSet",
        lambda: next(
            (
                rs["metadata"]["labels"][HASH]
                for rs in kube_client.replicasets(namespace)
                if rs["metadata"]["labels"][HASH] != old_hash
            ),
            None,
        ),
    )
    new_pods = _wait_settled(kube_client, namespace, 30, new_hash)
    _scheduled_by_plumb(kube_client, namespace, new_pods)
    rolled = _zones_of(new_pods, zone_of)
    print(f"the rollout's 30 new pods: {dict(rolled)}")
    assert _skew(rolled, [*zones, "d"]) <= 1, dict(rolled)
    assert rolled["d"] < 10, f"the old ReplicaSet's pods were counted: {dict(rolled)}"


def test_a_pod_disruption_budget_gets_its_status_from_the_disruption_controller(
    kube_client: kube.Kube, namespace: str, add_node: NodeFactory, plumb: Plumb
) -> None:
    node = add_node(builders.make_node(f"{namespace}-n").zone("a"))
    for i in range(3):
        kube_client.create_pod(
            builders.make_pod(f"db-{i}", namespace)
            .scheduler(DEFAULT_SCHEDULER_NAME)
            .label("app", "db")
            .req(cpu="100m")
            .obj()
        )
    kube_client.create_pdb(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "db", "namespace": namespace},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "db"}}},
        }
    )

    def counted() -> dict[str, Any] | None:
        status = kube_client.pdb(namespace, "db").get("status") or {}
        return status if status.get("expectedPods") == 3 else None

    status = kube.wait_for("the disruption controller to count the pods", counted, timeout=60)
    kube.wait_for(
        "plumb to bind the three pods",
        lambda: all(p["spec"].get("nodeName") == node for p in kube_client.pods(namespace)),
        timeout=60,
    )
    # Pods on a node with no kubelet never become Ready, so none may be disrupted.
    assert status["observedGeneration"] == 1
    assert status["desiredHealthy"] == 2
    assert status["currentHealthy"] == 0
    assert status["disruptionsAllowed"] == 0
