"""ImageLocality under plumb and under the real kube-scheduler on the same control plane:
nodes alike but for the images their status lists, and each pod lands on the node holding its
images, the same node under both schedulers.

The nodes are plain API objects (no kubelet, nothing is pulled): their status.images is written
through the status subresource as a kubelet would report it. Every other score ties between the
nodes, so ImageLocality alone decides (the arithmetic is in the test).
"""

from __future__ import annotations

import pytest

from plumb_dev.testing import builders, kube
from tests.support import side_by_side
from tests.support.live_cluster import NodeFactory
from tests.support.side_by_side import scheduler_fixture  # noqa: F401

pytestmark = pytest.mark.integration

MB = 1024 * 1024
APP = "registry.plumb.test/shop/app:v1"
TOOLS = "registry.plumb.test/shop/tools"  # no tag: a pod's "tools" is looked up as ":latest"
SETUP = "registry.plumb.test/shop/setup:v3"


def _report_images(client: kube.Kube, node: str, *images: tuple[str, int]) -> None:
    """status.images of ``node`` as a kubelet reports them: (name, sizeBytes) each."""
    status = {"images": [{"names": [name], "sizeBytes": size} for name, size in images]}
    client.core.patch_node_status(node, {"status": status})


def test_each_pod_lands_where_its_images_are(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: side_by_side.Runner,
) -> None:
    n1 = add_node(builders.make_node(f"{namespace}-n1"))
    n2 = add_node(builders.make_node(f"{namespace}-n2"))
    _report_images(kube_client, n1, (SETUP, 2000 * MB))
    _report_images(kube_client, n2, (APP, 800 * MB))
    # Created last: once a scheduler has seen it, it has seen the status updates before it
    # (the node watch is one ordered stream).
    n3 = add_node(builders.make_node(f"{namespace}-n3"))
    _report_images(kube_client, n3, (f"{TOOLS}:latest", 900 * MB))
    nodes = [n1, n2, n3]
    side_by_side.in_view(kube_client, scheduler, namespace, nodes)

    def place(pod: builders.PodBuilder) -> str | None:
        body = pod.req(cpu="100m", memory="128Mi").obj()
        kube_client.create_pod(body)
        name = str(body["metadata"]["name"])
        return side_by_side.wait_settled(kube_client, namespace, [name], cluster_nodes=3)[name]

    def with_image(pod: builders.PodBuilder, image: str) -> builders.PodBuilder:
        pod._spec["containers"][0]["image"] = image  # the builder's pause image otherwise
        return pod

    # APP (800 MiB) is on 1 node of 3: 279620266 bytes scaled; 100 * (that - 23 MiB) //
    # (1000 MiB - 23 MiB) = 24 on n2, 0 elsewhere.
    assert place(with_image(scheduler.pod("app", namespace), APP)) == n2
    # "tools" is normalised to "tools:latest", which n3 holds (900 MiB, 1 of 3: 28). n2 now
    # holds the first pod: a point or two less on the resource scores, and no image.
    assert place(with_image(scheduler.pod("tools", namespace), TOOLS)) == n3
    # An init container's image counts too (and the pod then has two containers): SETUP on n1,
    # 2000 MiB of 1 node in 3: 100 * (699050666 - 24117248) // (2000 MiB - 23 MiB) = 32.
    setup = with_image(scheduler.pod("setup", namespace), "registry.k8s.io/pause:3.10")
    setup._spec["initContainers"] = [{"name": "setup", "image": SETUP}]
    assert place(setup) == n1
