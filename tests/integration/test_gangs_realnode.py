"""A gang that really runs: an indexed Job of 4 completions whose pods form one
scheduler-plugins PodGroup (minMember 4) runs to completion on the local cluster's real node,
placed by plumb only once all four pods exist, all four at once."""

from __future__ import annotations

from typing import Any

import pytest

from plumb import DEFAULT_SCHEDULER_NAME
from plumb.observability import trace
from plumb_dev.testing import crds, groupclient, kube
from plumb_dev.testing.groupbuilders import POD_GROUP_LABEL, make_coscheduling_group
from tests.support.live_cluster import NodeCluster
from tests.support.plumb_process import Plumb

pytestmark = [pytest.mark.integration, pytest.mark.gangs]

COMPLETIONS = 4


@pytest.fixture
def node_podgroups(node_cluster: NodeCluster) -> list[str]:
    """scheduler-plugins' PodGroup CRD on the node's cluster, before plumb starts."""
    return crds.install(node_cluster.kubectl, crds.PODGROUPS_DIR)


def _job(namespace: str, image: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": namespace},
        "spec": {
            "completionMode": "Indexed",
            "completions": COMPLETIONS,
            "parallelism": COMPLETIONS,
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": {POD_GROUP_LABEL: "train"}},
                "spec": {
                    "schedulerName": DEFAULT_SCHEDULER_NAME,
                    "restartPolicy": "Never",
                    "nodeSelector": {"kubernetes.io/hostname": node},
                    "tolerations": [{"operator": "Exists"}],
                    "terminationGracePeriodSeconds": 1,
                    "containers": [
                        {
                            "name": "worker",
                            "image": image,
                            "imagePullPolicy": "Never",
                            "command": ["python3", "-c", "print('step done')"],
                            "resources": {"requests": {"cpu": "100m"}},
                        }
                    ],
                },
            },
        },
    }


@pytest.mark.long  # in make test-long
def test_an_indexed_job_as_one_gang_runs_to_completion(
    node_cluster: NodeCluster, node_namespace: str, node_podgroups: list[str], node_plumb: Plumb
) -> None:
    client = node_cluster.client
    groupclient.Groups(client).create(
        make_coscheduling_group("train", node_namespace, COMPLETIONS).obj()
    )
    client.create_job(_job(node_namespace, node_cluster.image, node_cluster.node.name))

    def complete() -> dict[str, Any] | None:
        status = client.job(node_namespace, "train").get("status") or {}
        assert not status.get("failed"), f"a pod of the Job failed: {status}"
        return status if status.get("succeeded") == COMPLETIONS else None

    kube.wait_for("the Job's 4 completions", complete, timeout=180, interval=0.5)
    pods = client.pods(node_namespace)
    assert len(pods) == COMPLETIONS
    assert {p["spec"]["nodeName"] for p in pods} == {node_cluster.node.name}
    # Bound together: plumb's trace shows the four placed in one group cycle.
    traced = [trace.from_log_line(line) for line in node_plumb.output().splitlines()]
    lines = [
        line.fields() for line in traced if line is not None and line.result == trace.SCHEDULED
    ]
    groups = {(line["group"]["name"], line["snapshot"]) for line in lines if line.get("group")}
    assert len(lines) == COMPLETIONS
    assert groups == {(f"{node_namespace}/train", lines[0]["snapshot"])}
