"""Workloads that really run: plumb places a Job's pods on the local cluster's real node, where
the kubelet runs them to completion, and reuses the room each finished pod frees."""

from __future__ import annotations

from typing import Any

import pytest

from plumb import DEFAULT_SCHEDULER_NAME
from plumb.k8s import quantities
from plumb_dev.testing import kube
from tests.support.live_cluster import NodeCluster, events_of
from tests.support.plumb_process import Plumb

pytestmark = [pytest.mark.integration, pytest.mark.long]  # ~30 s of a real Job: make test-long

COMPLETIONS = 20
PARALLELISM = 5
AT_ONCE = 3
SCRIPT = "import time; time.sleep(1); print('done')"


def _job(namespace: str, image: str, node: str, cpu_milli: int) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "count", "namespace": namespace},
        "spec": {
            "completions": COMPLETIONS,
            "parallelism": PARALLELISM,
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "schedulerName": DEFAULT_SCHEDULER_NAME,
                    "restartPolicy": "Never",
                    "nodeSelector": {"kubernetes.io/hostname": node},
                    "tolerations": [{"operator": "Exists"}],
                    "terminationGracePeriodSeconds": 1,
                    "containers": [
                        {
                            "name": "count",
                            "image": image,
                            "imagePullPolicy": "Never",
                            "command": [
                                "python3",
                                "-c",
                                "import time; time.sleep(1); print('done')",
                            ],
                            "resources": {"requests": {"cpu": f"{cpu_milli}m"}},
                        }
                    ],
                }
            },
        },
    }


def test_a_job_runs_to_completion_on_the_real_node_reusing_freed_room(
    node_cluster: NodeCluster, node_namespace: str, node_plumb: Plumb
) -> None:
    client = node_cluster.client
    node = client.core.read_node(node_cluster.node.name).to_dict()
    allocatable = quantities.milli_value(node["status"]["allocatable"]["cpu"])
    # Three pods fit at once and a fourth does not, so the Job's other two wait for room.
    cpu = allocatable // AT_ONCE
    client.create_job(_job(node_namespace, node_cluster.image, node_cluster.node.name, cpu))

    def complete() -> dict[str, Any] | None:
        status = client.job(node_namespace, "count").get("status") or {}
        assert not status.get("failed"), f"a pod of the Job failed: {status}"
        return status if status.get("succeeded") == COMPLETIONS else None

    kube.wait_for("the Job's 20 completions", complete, timeout=300, interval=0.5)
    pods = client.pods(node_namespace)
    assert len(pods) == COMPLETIONS
    assert {p["spec"]["nodeName"] for p in pods} == {node_cluster.node.name}
    assert all(p["status"]["phase"] == "Succeeded" for p in pods)
    waited = 0
    for pod in pods:
        name = pod["metadata"]["name"]
        scheduled = events_of(client, node_namespace, name, "Scheduled")
        assert scheduled, f"{name} has no Scheduled event"
        assert scheduled[0].get("reportingComponent") == "plumb"
        failed = events_of(client, node_namespace, name, "FailedScheduling")
        if failed:
            waited += 1
            assert "Insufficient cpu" in (failed[0].get("message") or ""), failed[0]
    # What the containers printed comes back through the API server from the kubelet.
    first = pods[0]["metadata"]["name"]
    assert node_cluster.kubectl.check("logs", "-n", node_namespace, first).strip() == "done"
    # Some pods found the node full and were placed later, in room that finished pods freed.
    assert waited > 0, "no pod ever waited: the test did not fill the node"
