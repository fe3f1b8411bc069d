"""What the integration tests share about the clusters they run on: the type of the ``add_node``
fixture, a pod's events of one reason, and the record of the cluster with a real node (with the
iptables rules it is checked against)."""

from __future__ import annotations

import dataclasses
import subprocess
from collections.abc import Callable
from typing import Any

from plumb_dev.cluster.controlplane import lifecycle as controlplane
from plumb_dev.cluster.localnode import nodelifecycle as localnode
from plumb_dev.testing import builders, crds, kube

NodeFactory = Callable[[builders.NodeBuilder], str]


def events_of(client: kube.Kube, namespace: str, name: str, reason: str) -> list[dict[str, Any]]:
    return [e for e in client.events(namespace, name) if e.get("reason") == reason]


@dataclasses.dataclass(frozen=True, kw_only=True)
class NodeCluster:
    """The session's cluster with a real node, and the test image loaded into its containerd."""

    cp: controlplane.ControlPlane
    node: localnode.Node
    client: kube.Kube
    kubectl: crds.Kubectl
    image: str
    # iptables -S of filter FORWARD, OUTPUT and PLUMB-GUARD right after up(), before any pod.
    rules_before_pods: dict[str, list[str]]


def filter_rules(chain: str) -> list[str]:
    result = subprocess.run(
        ["iptables", "-w", "-t", "filter", "-S", chain], capture_output=True, text=True, check=True
    )
    return [line for line in result.stdout.splitlines() if line.startswith("-A ")]
