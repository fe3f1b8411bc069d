"""The local cluster's real node: pods run, kubectl logs and exec work, the kubelet refuses
strangers, the network guard is in place before any pod, and down leaves the host as it was.

All traffic stays on this machine: loopback and the bridge between the host and the pods. No
test sends anything outward, least of all to check the guard (its rules are read instead).
"""

from __future__ import annotations

import http.client
import json
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from plumb_dev.cluster.localnode import network
from plumb_dev.cluster.localnode import nodelifecycle as localnode
from tests.support.live_cluster import NodeCluster, filter_rules

pytestmark = pytest.mark.integration

GUARD_JUMPS = {"FORWARD": "-A FORWARD -j PLUMB-GUARD", "OUTPUT": "-A OUTPUT -j PLUMB-GUARD"}

Cluster = NodeCluster


@pytest.fixture
def cluster(node_cluster: NodeCluster) -> NodeCluster:
    """The session's cluster with the real node (conftest), which down() checks at the end."""
    return node_cluster


def kubectl(cluster: Cluster, *args: str, stdin: str | None = None) -> str:
    return cluster.kubectl.check(*args, stdin=stdin, timeout=90)


def pod(name: str, image: str, script: str) -> dict[str, Any]:
    """A pod for the real node, left to the default scheduler, running a Python script."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": "plumb-node"},
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "main",
                    "image": image,
                    # Loaded into containerd, never pulled: there is no registry to pull from.
                    "imagePullPolicy": "Never",
                    "command": ["python3", "-c", script],
                }
            ],
        },
    }


def run_pod(cluster: Cluster, body: dict[str, Any]) -> str:
    name = str(body["metadata"]["name"])
    kubectl(cluster, "apply", "-f", "-", stdin=json.dumps(body))
    kubectl(cluster, "wait", "--for=condition=Ready", f"pod/{name}", "--timeout=60s")
    return name


def logs_until(cluster: Cluster, name: str, wanted: str, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while True:
        text = kubectl(cluster, "logs", name)
        if wanted in text or time.monotonic() > deadline:
            return text
        time.sleep(0.5)


# The script sleeps after its work so the pod stays Running while the test reads it; SIGTERM
# ends it at once when down() deletes it.
SLEEP = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\n"
    "time.sleep(3600)\n"
)


def test_a_pod_runs_on_the_real_node_and_kubectl_logs_and_exec_work(cluster: Cluster) -> None:
    node = json.loads(kubectl(cluster, "get", "node", "plumb-node", "-o", "json"))
    ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
    assert ready[0]["status"] == "True"
    assert {"type": "InternalIP", "address": localnode.GATEWAY} in node["status"]["addresses"]

    name = run_pod(
        cluster, pod("hello", cluster.image, "print('hello from plumb-node', flush=True)\n" + SLEEP)
    )
    placed = json.loads(kubectl(cluster, "get", "pod", name, "-o", "json"))
    assert placed["spec"]["nodeName"] == "plumb-node"
    assert placed["status"]["podIP"].startswith("10.88.")
    assert "hello from plumb-node" in logs_until(cluster, name, "hello from plumb-node")
    assert kubectl(cluster, "exec", name, "--", "cat", "/etc/hostname").strip() == name


def test_the_kubelet_refuses_an_unauthenticated_request(cluster: Cluster) -> None:
    # The kubelet's serving certificate is the cluster CA's, valid for the bridge address.
    context = ssl.create_default_context(cafile=str(cluster.cp.ca_file))
    connection = http.client.HTTPSConnection(localnode.GATEWAY, 10250, timeout=10, context=context)
    try:
        connection.request("GET", "/pods")
        response = connection.getresponse()
        assert response.status == 401, response.read()
    finally:
        connection.close()


def test_the_guard_was_first_before_any_pod_and_stays_while_the_node_runs(
    cluster: Cluster,
) -> None:
    guard = [
        "-A PLUMB-GUARD -i cni0 ! -o cni0 -m comment --comment "
        '"plumb: nothing from pods leaves the machine" -j DROP',
        "-A PLUMB-GUARD -d 10.0.0.0/24 -m comment --comment "
        '"plumb: nothing from pods leaves the machine" -j DROP',
    ]
    for rules in (
        cluster.rules_before_pods,
        {c: filter_rules(c) for c in cluster.rules_before_pods},
    ):
        assert rules["FORWARD"][0] == GUARD_JUMPS["FORWARD"]
        assert rules["OUTPUT"][0] == GUARD_JUMPS["OUTPUT"]
        assert rules["PLUMB-GUARD"] == guard
    assert localnode.status(cluster.node.directory)["guard"] == "running"
    assert network.guard_first() == {"FORWARD": True, "OUTPUT": True}


# A GET /api as in-cluster clients do, with nothing but the standard library's ssl and socket
# (the image's python3-minimal has no http.client).
API_CALL = """\
import os, socket, ssl
sa = "/var/run/secrets/kubernetes.io/serviceaccount"
host = os.environ["KUBERNETES_SERVICE_HOST"]
port = int(os.environ["KUBERNETES_SERVICE_PORT"])
context = ssl.create_default_context(cafile=sa + "/ca.crt")
token = open(sa + "/token").read()
request = "GET /api HTTP/1.1\\r\\nHost: %s\\r\\nAuthorization: Bearer %s\\r\\n" % (host, token)
with socket.create_connection((host, port), timeout=10) as raw:
    with context.wrap_socket(raw, server_hostname=host) as tls:
        tls.sendall((request + "Connection: close\\r\\n\\r\\n").encode())
        status = tls.recv(4096).split(b"\\r\\n")[0].decode()
        print("answer from %s:%d: %s" % (host, port, status), flush=True)
"""


def test_a_pod_reaches_the_api_server_through_the_kubernetes_service(cluster: Cluster) -> None:
    name = run_pod(cluster, pod("in-cluster-client", cluster.image, API_CALL + SLEEP))
    text = logs_until(cluster, name, "answer from")
    assert "answer from 10.0.0.1:443: HTTP/1.1 200 OK" in text, text


def test_status_reports_every_part_running(cluster: Cluster) -> None:
    assert localnode.status(cluster.node.directory) == {
        "containerd": "running",
        "kubelet": "running",
        "kube-proxy": "running",
        "guard": "running",
        "bridge": "running",
    }
    assert Path(cluster.node.containerd_address).is_socket()


def test_plumb_cluster_status_and_image_report_on_the_node(cluster: Cluster) -> None:
    """What a person types: `plumb cluster status` lists every part, `plumb cluster image`
    builds (cached) and loads the test image into the node's containerd."""

    def plumb(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "plumb", "cluster", *args, "--dir", str(cluster.cp.directory)],
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )

    status = plumb("status")
    assert status.returncode == 0, status.stdout + status.stderr
    states = dict(line.split(None, 1) for line in status.stdout.splitlines()[1:])
    assert states == {
        "etcd": "running",
        "kube-apiserver": "running",
        "kube-controller-manager": "running",
        "kube-scheduler": "running",
        "containerd": "running",
        "kubelet": "running",
        "kube-proxy": "running",
        "guard": "running",
        "bridge": "running",
    }
    image = plumb("image")
    assert image.returncode == 0, image.stderr
    assert image.stdout.split("\t")[0] == cluster.image
    assert "loaded into plumb-node's containerd" in image.stderr
