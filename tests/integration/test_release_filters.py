"""What changed between kube-scheduler v1.34 and v1.37 for pods that need a node feature or
mount an image, under plumb and under the real kube-scheduler on the same control plane:
NodeDeclaredFeatures (a default filter from v1.36, its API fields gated) and ImageLocality's
image volumes (counted from v1.36, in the bound too from v1.37).

The nodes are plain API objects: their status.declaredFeatures and status.images are written
through the status subresource as a kubelet would report them. Each expectation is per release
(keyed by minor), so the same test passes against v1.34.4 and v1.37.2 and shows where they
differ; the arithmetic that makes every placement free of ties is in each test.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from kubernetes import client as k8s

from plumb.backend.records import objects
from plumb.framework.plugins import nodeaffinity, nodedeclaredfeatures
from plumb_dev.testing import builders, kube
from tests.support import side_by_side
from tests.support.live_cluster import NodeFactory
from tests.support.side_by_side import scheduler_fixture  # noqa: F401

pytestmark = pytest.mark.integration

MB = 1024 * 1024
RESTART_ALL = objects.RESTART_ALL_CONTAINERS
# A feature of the v1.36 and v1.37 registries no pod needs for scheduling (an update-only one).
POD_LEVEL_RESIZE = "InPlacePodLevelResourcesVerticalScaling"


def _declare(client: kube.Kube, node: str, *features: str) -> list[str] | None:
    """Writes status.declaredFeatures as a kubelet does; returns what the API server kept."""
    client.core.patch_node_status(node, {"status": {"declaredFeatures": sorted(features)}})
    stored = next(n for n in client.nodes() if n["metadata"]["name"] == node)
    kept = stored["status"].get("declaredFeatures")
    return None if kept is None else list(kept)


def _assert_waits_with(
    client: kube.Kube, namespace: str, pod: str, histogram: str, full: str
) -> None:
    message = side_by_side.failed_scheduling(client, namespace, pod)
    assert message is not None, f"{pod} has no FailedScheduling event"
    assert message.startswith(f"{histogram} "), message  # the filters' verdicts first
    assert message == full


def test_a_pod_that_restarts_all_its_containers_goes_where_a_node_declares_it(
    kube_minor: int,
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: side_by_side.Runner,
) -> None:
    minor = kube_minor
    # "roomy" is the emptier node for every pod here (1 cpu, 1Gi: LeastAllocated 92 against
    # 85, BalancedAllocation 95 against 89, or from v1.36 72 against 69): a scheduler that
    # ignores the declared features prefers it.
    roomy = add_node(builders.make_node(f"{namespace}-roomy").capacity(cpu="8", memory="32Gi"))
    declaring = add_node(
        builders.make_node(f"{namespace}-declaring").capacity(cpu="4", memory="32Gi")
    )
    kept = {
        roomy: _declare(kube_client, roomy, POD_LEVEL_RESIZE),
        declaring: _declare(kube_client, declaring, RESTART_ALL),
    }
    # v1.34 has no such field. From v1.35 the status subresource keeps it, even with v1.35's
    # gate off (only a write of the node itself drops it: registry/core/node/strategy.go).
    if minor >= 35:
        assert kept == {roomy: [POD_LEVEL_RESIZE], declaring: [RESTART_ALL]}
    else:
        assert kept == {roomy: None, declaring: None}
    nodes = [roomy, declaring]
    # Once a scheduler has judged a probe against both nodes, it has seen the status writes
    # before them (the node watch is one ordered stream).
    side_by_side.in_view(kube_client, scheduler, namespace, nodes)

    restarting = scheduler.pod("restarting", namespace).req(cpu="1", memory="1Gi")
    if minor == 35:
        # The action RestartAllContainers needs RestartAllContainersOnContainerExits (alpha,
        # off in v1.35: validation.go validateContainerRestartPolicy): no such pod exists.
        with pytest.raises(k8s.ApiException) as refused:
            kube_client.create_pod(restarting.restart_all_on_exit().obj())
        assert refused.value.status == 422
        return
    kube_client.create_pod(restarting.restart_all_on_exit().obj())
    stored = kube_client.pod(namespace, "restarting")["spec"]["containers"][0]
    # v1.34 drops the restart rules with its ContainerRestartRules gate off (v1.35 on).
    assert ("restartPolicyRules" in stored) == (minor >= 35)
    placed = side_by_side.wait_settled(kube_client, namespace, ["restarting"], cluster_nodes=2)
    # From v1.36 the filter runs (v1.35: alpha, off): only "declaring" declares the feature.
    assert placed == {"restarting": {34: roomy, 36: declaring, 37: declaring}[minor]}

    # Pinned by a node selector to "roomy", which lacks the feature: NodeAffinity rejects
    # "declaring" first; both verdicts are unresolvable, so preemption looks at no node.
    pinned = (
        scheduler.pod("pinned", namespace)
        .req(cpu="1", memory="1Gi")
        .node_selector("kubernetes.io/hostname", roomy)
        .restart_all_on_exit()
    )
    kube_client.create_pod(pinned.obj())
    placed = side_by_side.wait_settled(kube_client, namespace, ["pinned"], cluster_nodes=2)
    if minor < 36:
        assert placed == {"pinned": roomy}
    else:
        assert placed == {"pinned": None}
        histogram = (
            f"0/2 nodes are available: 1 {nodeaffinity.MISMATCH}, "
            f"1 {nodedeclaredfeatures.UNSATISFIED}."
        )
        full = side_by_side.without_victims(minor=minor, histogram=histogram, total=2, searched=0)
        _assert_waits_with(kube_client, namespace, "pinned", histogram, full)

    # Too big for "declaring" (4 cpu, 1 taken), fits "roomy": NodeResourcesFit rejects
    # "declaring" before this filter could; "roomy" lacks the feature. Evicting pods could make
    # room on "declaring", so preemption looks there (and finds no pod of lower priority).
    big = scheduler.pod("big", namespace).req(cpu="4", memory="1Gi").restart_all_on_exit()
    kube_client.create_pod(big.obj())
    placed = side_by_side.wait_settled(kube_client, namespace, ["big"], cluster_nodes=2)
    if minor < 36:
        assert placed == {"big": roomy}
    else:
        assert placed == {"big": None}
        histogram = (
            f"0/2 nodes are available: 1 Insufficient cpu, 1 {nodedeclaredfeatures.UNSATISFIED}."
        )
        full = side_by_side.without_victims(minor=minor, histogram=histogram, total=2, searched=1)
        _assert_waits_with(kube_client, namespace, "big", histogram, full)
    assert side_by_side.overcommitted(kube_client, namespace, nodes) == []


def _report_images(client: kube.Kube, node: str, *images: tuple[str, int]) -> None:
    status = {"images": [{"names": [name], "sizeBytes": size} for name, size in images]}
    client.core.patch_node_status(node, {"status": status})


def test_an_image_volume_held_by_a_node_draws_the_pod_from_v1_36(
    kube_minor: int,
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: side_by_side.Runner,
) -> None:
    minor = kube_minor
    app = "registry.plumb.test/reader/app:v1"
    weights = "registry.plumb.test/reader/weights:v1"
    # Three alike nodes: "x" holds the image volume's image (500 MiB), "y" the container's
    # (200 MiB), "w" neither. Every other score ties, so ImageLocality alone decides:
    # - up to v1.35 the volume is not counted: x 0, y 100 * (int(209715200 / 3) - 23 MiB)
    #   // (1000 MiB - 23 MiB) = 4578781800 // 1024458752 = 4: y;
    # - v1.36: x 100 * (174762666 - 24117248) // 1024458752 = 14, y 4: x;
    # - v1.37: the volume counts in the bound too (2000 MiB): x 15064541800 // 2073034752 = 7,
    #   y 4578781800 // 2073034752 = 2: x.
    w = add_node(builders.make_node(f"{namespace}-w"))
    x = add_node(builders.make_node(f"{namespace}-x"))
    _report_images(kube_client, x, (weights, 500 * MB))
    # Created last: once a scheduler has seen it, it has seen the status writes before it.
    y = add_node(builders.make_node(f"{namespace}-y"))
    _report_images(kube_client, y, (app, 200 * MB))
    nodes = [w, x, y]
    side_by_side.in_view(kube_client, scheduler, namespace, nodes)

    reader = (
        scheduler.pod("reader", namespace)
        .images(app)
        .image_volume("weights", weights)
        .req(cpu="100m", memory="128Mi")
    )
    reader._spec["containers"][0]["volumeMounts"] = [{"name": "weights", "mountPath": "/w"}]
    kube_client.create_pod(reader.obj())
    volumes = kube_client.pod(namespace, "reader")["spec"].get("volumes") or []
    # v1.34 drops image volumes with its ImageVolume gate off (beta, on from v1.35).
    assert [v["name"] for v in volumes if "image" in v] == ([] if minor < 35 else ["weights"])
    placed = side_by_side.wait_settled(kube_client, namespace, ["reader"], cluster_nodes=3)
    expected: Mapping[int, str] = {34: y, 35: y, 36: x, 37: x}
    assert placed == {"reader": expected[minor]}
