"""A pod with a ResourceClaim really runs on the real node: Kubernetes' DRA test driver publishes
the node's devices and prepares them, the scheduler (kube-scheduler, then plumb) allocates one
and reserves it for the pod, the kubelet has the driver prepare it, and containerd injects the
driver's CDI edits (environment variables) into the container; deleting the pod frees the device
and the driver removes its CDI spec (docs/dra.md, "On the real node")."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from plumb import DEFAULT_SCHEDULER_NAME
from plumb_dev.cluster.localnode import dratestdriver, layout
from plumb_dev.testing import draclient, kube
from tests.support.live_cluster import NodeCluster, events_of

pytestmark = pytest.mark.integration

CLASS = "plumb-dra-test-driver"
TEMPLATE = "one-device"
REQUEST = "dev"
DEVICES = 4
# The class's opaque parameters reach the container as admin_<key>, the claim's as user_<key>.
CLASS_PARAMETERS = {"site": "plumb"}
CLAIM_PARAMETERS = {"greeting": "hello"}
KUBE_SCHEDULER = "default-scheduler"
SELECTOR = f'device.driver == "{dratestdriver.DRIVER}"'


def _opaque(parameters: dict[str, str]) -> dict[str, Any]:
    return {"opaque": {"driver": dratestdriver.DRIVER, "parameters": parameters}}


def _raw(response: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(response.data)
    return data


@pytest.fixture(scope="module")
def resource_api(node_cluster: NodeCluster) -> k8s.ResourceV1Api:
    return k8s.ResourceV1Api(node_cluster.client.api)


@pytest.fixture(scope="module")
def driver(node_cluster: NodeCluster, resource_api: k8s.ResourceV1Api) -> Iterator[Path]:
    """The test driver running for the real node (its slice published, the kubelet registered
    it) and a DeviceClass selecting its devices; yields the node's CDI directory. Stopped at
    the end with its slices, leaving no CDI spec behind."""
    binary = dratestdriver.ensure_binary(node_cluster.cp.kube_version)
    directory = node_cluster.node.directory
    dratestdriver.start(
        node_cluster.cp, directory, binary=binary, node=node_cluster.node.name, devices=DEVICES
    )
    draclient.Dra(node_cluster.client).create_class(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": CLASS},
            "spec": {
                "selectors": [{"cel": {"expression": SELECTOR}}],
                "config": [_opaque(CLASS_PARAMETERS)],
            },
        }
    )
    cdi_dir = layout.NodeLayout(directory=directory).cdi_dir
    try:
        yield cdi_dir
    finally:
        resource_api.delete_device_class(CLASS)
        problems = dratestdriver.stop(node_cluster.cp, directory)
        assert problems == []
        assert dratestdriver.slice_devices(node_cluster.cp, node_cluster.node.name) == []
        assert sorted(p.name for p in cdi_dir.iterdir()) == []


def _pod(namespace: str, image: str, scheduler: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "with-device", "namespace": namespace},
        "spec": {
            "schedulerName": scheduler,
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "app",
                    "image": image,
                    "imagePullPolicy": "Never",
                    "command": ["sh", "-c", "env | sort; exec sleep 3600"],
                    "resources": {"claims": [{"name": "device"}]},
                }
            ],
            "resourceClaims": [{"name": "device", "resourceClaimTemplateName": TEMPLATE}],
        },
    }


@pytest.mark.parametrize("scheduler", [KUBE_SCHEDULER, DEFAULT_SCHEDULER_NAME])
def test_a_pod_with_a_claim_runs_with_the_drivers_device_on_the_real_node(
    request: pytest.FixtureRequest,
    node_cluster: NodeCluster,
    node_namespace: str,
    resource_api: k8s.ResourceV1Api,
    driver: Path,
    scheduler: str,
) -> None:
    if scheduler == DEFAULT_SCHEDULER_NAME:
        request.getfixturevalue("node_plumb")
    client, node = node_cluster.client, node_cluster.node.name
    draclient.Dra(client).create_template(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": TEMPLATE, "namespace": node_namespace},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [{"name": REQUEST, "exactly": {"deviceClassName": CLASS}}],
                        "config": [_opaque(CLAIM_PARAMETERS)],
                    }
                }
            },
        },
    )
    client.create_pod(_pod(node_namespace, node_cluster.image, scheduler))

    def claim_of(pod: dict[str, Any]) -> dict[str, Any]:
        statuses = (pod.get("status") or {}).get("resourceClaimStatuses") or []
        assert statuses, f"the bound pod has no claim: {pod.get('status')}"
        name = statuses[0]["resourceClaimName"]
        return _raw(
            resource_api.read_namespaced_resource_claim(
                name, node_namespace, _preload_content=False
            )
        )

    def bound() -> dict[str, Any] | None:
        pod = client.pod(node_namespace, "with-device")
        return pod if pod["spec"].get("nodeName") else None

    pod = kube.wait_for("the pod to be bound", bound, timeout=60, interval=0.2)
    # The scheduler writes the allocation before it binds: a bound pod's claim is allocated.
    claim = claim_of(pod)
    allocation = (claim.get("status") or {}).get("allocation")
    assert allocation, f"{scheduler} bound the pod to {node} without allocating its claim"

    def running() -> dict[str, Any] | None:
        current = client.pod(node_namespace, "with-device")
        phase = current["status"].get("phase")
        assert phase in ("Pending", "Running"), f"the pod ended: {current['status']}"
        return current if phase == "Running" else None

    pod = kube.wait_for("the pod to run", running, timeout=90, interval=0.2)
    assert pod["spec"]["nodeName"] == node
    scheduled = events_of(client, node_namespace, "with-device", "Scheduled")
    assert [e.get("reportingComponent") for e in scheduled] == [scheduler]

    claim = claim_of(pod)
    status = claim["status"]
    results = [
        {k: r.get(k) for k in ("request", "driver", "pool", "device")}
        for r in status["allocation"]["devices"]["results"]
    ]
    assert len(results) == 1
    device = results[0]["device"]
    assert results == [
        {"request": REQUEST, "driver": dratestdriver.DRIVER, "pool": node, "device": device}
    ]
    assert device in dratestdriver.slice_devices(node_cluster.cp, node)
    terms = status["allocation"]["nodeSelector"]["nodeSelectorTerms"]
    assert terms == [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    ]
    assert status["reservedFor"] == [
        {"resource": "pods", "name": "with-device", "uid": pod["metadata"]["uid"]}
    ]

    # The driver's CDI edits, applied by containerd: the class's and the claim's parameters and
    # the variable naming the claim's request.
    claim_variable = re.sub(r"[^a-zA-Z0-9]", "_", f"claim_{claim['metadata']['name']}_{REQUEST}")
    expected = {
        *(f"admin_{k}={v}" for k, v in CLASS_PARAMETERS.items()),
        *(f"user_{k}={v}" for k, v in CLAIM_PARAMETERS.items()),
        f"{claim_variable}=true",
    }

    def printed() -> set[str] | None:
        logs = node_cluster.kubectl.run("logs", "-n", node_namespace, "with-device")
        found = set(logs.stdout.splitlines()) & expected
        return found if found == expected else None

    kube.wait_for(f"the container to print {sorted(expected)}", printed, timeout=30)
    specs = [json.loads(p.read_text()) for p in driver.iterdir()]
    assert [s["kind"] for s in specs] == [f"{dratestdriver.DRIVER}/test"]

    # Deleting the pod frees the device: the claim made from the template goes, and the driver
    # unprepares it (its CDI spec removed).
    client.core.delete_namespaced_pod("with-device", node_namespace, grace_period_seconds=1)
    claim_name = claim["metadata"]["name"]

    def freed() -> bool:
        claims = _raw(
            resource_api.list_namespaced_resource_claim(node_namespace, _preload_content=False)
        )
        left = [c["metadata"]["name"] for c in claims["items"]]
        return claim_name not in left and not any(driver.iterdir())

    kube.wait_for("the claim to be deleted and its CDI spec removed", freed, timeout=60)
