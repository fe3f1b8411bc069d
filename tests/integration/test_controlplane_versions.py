"""The local cluster on a release other than the default: v1.37.2 built once into the cache, its
control plane started with the flags that release accepts (its kube-controller-manager refuses
the v1.34 list), kube-scheduler v1.37.2 binding pods, both as the cluster's default scheduler and
as the side-by-side suites run it, and nothing left running after stop.

Marked long: the first run builds v1.37.2 from its Go modules (10 to 15 minutes on 2 cores).
"""

from __future__ import annotations

import http.client
import json
import ssl
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from plumb_dev.cluster.controlplane import building, lifecycle
from plumb_dev.testing import builders, kube, kubescheduler
from tests.support.live_cluster import events_of

pytestmark = [pytest.mark.integration, pytest.mark.long]

VERSION = "v1.37.2"
PARTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[lifecycle.ControlPlane]:
    bin_dir = building.ensure_binaries(VERSION)
    directory = tmp_path_factory.mktemp("cluster-v1.37")
    cp = lifecycle.start(directory, bin_dir=bin_dir, parts=lifecycle.Parts(scheduler=True))
    try:
        yield cp
    finally:
        lifecycle.stop(directory)
    left = [f"{name} (pid {pid})" for name, pid in cp.processes() if _alive(pid)]
    assert not left, f"still running after stop: {left}"
    assert lifecycle.load(directory) is None


@pytest.fixture(scope="module")
def client(plane: lifecycle.ControlPlane) -> Iterator[kube.Kube]:
    connection = kube.Kube(plane.kubeconfig)
    yield connection
    connection.close()


def _get(cp: lifecycle.ControlPlane, path: str) -> Any:
    port = int(cp.server.rsplit(":", 1)[1])
    context = ssl.create_default_context(cafile=str(cp.ca_file))
    connection = http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=context)
    try:
        connection.request("GET", path, headers={"Authorization": f"Bearer {cp.token}"})
        response = connection.getresponse()
        assert response.status == 200, f"GET {path}: {response.status}"
        return json.loads(response.read())
    finally:
        connection.close()


def test_the_control_plane_runs_the_release_asked_for(plane: lifecycle.ControlPlane) -> None:
    assert plane.kube_version == VERSION
    assert _get(plane, "/version")["gitVersion"] == VERSION
    recorded = lifecycle.load(plane.directory)
    assert recorded is not None
    assert recorded.kube_version == VERSION
    # kube-controller-manager v1.37.2 exits at once on a controller name it does not know.
    assert lifecycle.status(plane) == dict.fromkeys(PARTS, True)
    for binary in ("kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy"):
        assert _run(plane.bin_dir / binary, "--version") == f"Kubernetes {VERSION}\n", binary
    kubectl = json.loads(_run(plane.bin_dir / "kubectl", "version", "--client", "-o", "json"))
    assert kubectl["clientVersion"]["gitVersion"] == VERSION


def _run(binary: Path, *args: str) -> str:
    return subprocess.run(
        [str(binary), *args], capture_output=True, text=True, check=True, timeout=60
    ).stdout


def test_kube_scheduler_v1_37_binds_pods(
    plane: lifecycle.ControlPlane, client: kube.Kube, tmp_path: Path
) -> None:
    namespace = f"versions-{uuid.uuid4().hex[:6]}"
    # Waits for the namespace's default service account: the v1.37.2 controllers run.
    client.create_namespace(namespace)
    node = f"{namespace}-node"
    client.create_node(builders.make_node(node).capacity(cpu="2", pods="10").obj())
    try:
        client.create_pod(builders.make_pod("by-default", namespace).req(cpu="100m").obj())
        with kubescheduler.start(plane, tmp_path / "kube-scheduler") as harness:
            client.create_pod(
                builders.make_pod("by-harness", namespace)
                .scheduler(harness.scheduler_name)
                .req(cpu="100m")
                .obj()
            )
            for name, component in (
                ("by-default", "default-scheduler"),
                ("by-harness", harness.scheduler_name),
            ):
                scheduled = _scheduled_event(client, namespace, name)
                assert scheduled["message"] == f"Successfully assigned {namespace}/{name} to {node}"
                assert scheduled["reportingComponent"] == component
                assert client.pod(namespace, name)["spec"]["nodeName"] == node
    finally:
        client.delete_pods(namespace)
        client.delete_node(node)


def _scheduled_event(client: kube.Kube, namespace: str, name: str) -> dict[str, Any]:
    [event] = kube.wait_for(
        f"a Scheduled event for {namespace}/{name}",
        lambda: events_of(client, namespace, name, "Scheduled"),
    )
    return event
