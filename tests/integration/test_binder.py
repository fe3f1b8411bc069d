"""The binder against the real API server: the answers its outcome handling relies on."""

from __future__ import annotations

import pytest

from plumb import binder
from plumb.backend.records import objects
from plumb.k8s import client as k8s_client
from plumb.k8s import credentials
from plumb_dev.cluster.controlplane import lifecycle as controlplane
from plumb_dev.testing import builders, kube
from tests.support.live_cluster import NodeFactory

pytestmark = pytest.mark.integration


async def test_binding_outcomes(
    control_plane: controlplane.ControlPlane,
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
) -> None:
    node = add_node(builders.make_node(f"{namespace}-n"))
    other = add_node(builders.make_node(f"{namespace}-m"))
    api = k8s_client.ApiClient(credentials.load(control_plane.kubeconfig))
    bind = binder.Binder(api)
    try:
        first = objects.parse_pod(
            kube_client.create_pod(builders.make_pod("web", namespace).scheduler("nobody").obj())
        )
        assert (await bind.bind(first, node)).outcome is binder.BindOutcome.BOUND
        assert kube_client.pod(namespace, "web")["spec"]["nodeName"] == node

        # Bound already (by us, or by another scheduler first): 409, never a second binding.
        again = await bind.bind(first, other)
        assert again.outcome is binder.BindOutcome.CONFLICT
        assert kube_client.pod(namespace, "web")["spec"]["nodeName"] == node

        # Recreated under the same name: the old uid must not bind the new pod.
        kube_client.core.delete_namespaced_pod("web", namespace, grace_period_seconds=0)
        kube.wait_for(
            "web to be gone",
            lambda: not any(p["metadata"]["name"] == "web" for p in kube_client.pods(namespace)),
        )
        kube_client.create_pod(builders.make_pod("web", namespace).scheduler("nobody").obj())
        stale = await bind.bind(first, node)
        assert stale.outcome is binder.BindOutcome.CONFLICT
        assert "uid" in stale.message.lower()
        assert not kube_client.pod(namespace, "web")["spec"].get("nodeName")

        # Gone: 404.
        ghost = objects.parse_pod(builders.make_pod("ghost", namespace).uid("no-such-uid").obj())
        assert (await bind.bind(ghost, node)).outcome is binder.BindOutcome.GONE
    finally:
        await api.close()
