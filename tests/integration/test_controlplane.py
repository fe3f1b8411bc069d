"""The local control plane against the real etcd and kube-apiserver binaries."""

from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from plumb_dev.cluster.controlplane import building, lifecycle
from plumb_dev.testing import builders

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def bin_dir() -> Path:
    return building.ensure_binaries()


@pytest.fixture(scope="module")
def control_plane(
    bin_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[lifecycle.ControlPlane]:
    directory = tmp_path_factory.mktemp("cluster")
    cp = lifecycle.start(directory, bin_dir=bin_dir)
    try:
        yield cp
    finally:
        lifecycle.stop(directory)


def kubectl(cp: lifecycle.ControlPlane, *args: str, stdin: str | None = None) -> str:
    result = subprocess.run(
        [str(cp.bin_dir / "kubectl"), "--kubeconfig", str(cp.kubeconfig), *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        # Keeps kubectl's discovery cache out of the user's home directory.
        env={**os.environ, "KUBECACHEDIR": str(cp.directory / "kubectl-cache")},
    )
    assert result.returncode == 0, f"kubectl {' '.join(args)} failed: {result.stderr}"
    return result.stdout


def get(cp: lifecycle.ControlPlane, path: str, token: str) -> tuple[int, bytes]:
    port = int(cp.server.rsplit(":", 1)[1])
    context = ssl.create_default_context(cafile=str(cp.ca_file))
    connection = http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=context)
    try:
        connection.request("GET", path, headers={"Authorization": f"Bearer {token}"})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def test_readyz_answers_with_verified_tls(control_plane: lifecycle.ControlPlane) -> None:
    assert get(control_plane, "/readyz", control_plane.token) == (200, b"ok")
    assert control_plane.server.startswith("https://127.0.0.1:")
    assert lifecycle.is_running(control_plane)


def test_wrong_token_is_rejected(control_plane: lifecycle.ControlPlane) -> None:
    status, _ = get(control_plane, "/api/v1/namespaces", "not-" + control_plane.token)
    assert status == 401


def test_kubectl_works_with_the_kubeconfig(control_plane: lifecycle.ControlPlane) -> None:
    version = json.loads(kubectl(control_plane, "version", "-o", "json"))
    # The release chosen (PLUMB_KUBE_VERSION, else the default), built with its own version.
    assert version["clientVersion"]["gitVersion"] == control_plane.kube_version
    assert version["serverVersion"]["gitVersion"] == control_plane.kube_version
    assert control_plane.kube_version == building.chosen_release().version
    assert kubectl(control_plane, "get", "--raw", "/readyz").strip() == "ok"
    assert kubectl(control_plane, "auth", "can-i", "*", "*").strip() == "yes"
    assert kubectl(control_plane, "config", "current-context").strip() == "plumb-local"


def test_state_file_round_trips(control_plane: lifecycle.ControlPlane) -> None:
    assert lifecycle.load(control_plane.directory) == control_plane
    assert control_plane.kubeconfig == control_plane.directory / "kubeconfig"
    assert (control_plane.directory / "etcd.log").is_file()
    assert (control_plane.directory / "kube-apiserver.log").is_file()


def test_env_lines_point_a_shell_at_the_cluster(control_plane: lifecycle.ControlPlane) -> None:
    script = "\n".join([*lifecycle.env_lines(control_plane), "kubectl get --raw /readyz"])
    result = subprocess.run(
        ["bash", "-c", script],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env={
            "PATH": "/usr/bin:/bin",
            "HOME": str(control_plane.directory),
            "KUBECACHEDIR": str(control_plane.directory / "kubectl-cache"),
        },
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_node_round_trips_without_taints(control_plane: lifecycle.ControlPlane) -> None:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "fake-node-1", "labels": {"plumb.test/fake": "true"}},
        "status": {
            "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "allocatable": {"cpu": "3500m", "memory": "7Gi", "pods": "110"},
        },
    }
    kubectl(control_plane, "create", "-f", "-", stdin=json.dumps(node))
    got = json.loads(kubectl(control_plane, "get", "node", "fake-node-1", "-o", "json"))
    assert got["status"]["allocatable"] == {"cpu": "3500m", "memory": "7Gi", "pods": "110"}
    assert not got["spec"].get("taints")


def test_controllers_make_accounts_tokens_and_the_root_ca(
    control_plane: lifecycle.ControlPlane,
) -> None:
    """kube-controller-manager runs: service accounts, the kube-root-ca.crt ConfigMap, and pods
    admitted with a service-account token volume (ServiceAccount admission is on)."""
    assert lifecycle.status(control_plane) == {
        "etcd": True,
        "kube-apiserver": True,
        "kube-controller-manager": True,
    }
    kubectl(control_plane, "create", "namespace", "accounts")
    account = json.loads(
        _eventually(
            lambda: kubectl(control_plane, "get", "sa", "default", "-n", "accounts", "-o", "json")
        )
    )
    assert account["metadata"]["name"] == "default"
    root_ca = json.loads(
        _eventually(
            lambda: kubectl(
                control_plane,
                "get",
                "configmap",
                "kube-root-ca.crt",
                "-n",
                "accounts",
                "-o",
                "json",
            )
        )
    )
    assert root_ca["data"]["ca.crt"] == control_plane.ca_file.read_text()
    pod = builders.make_pod("p", "accounts").obj()
    created = json.loads(
        kubectl(control_plane, "create", "-o", "json", "-f", "-", stdin=json.dumps(pod))
    )
    projected = [v for v in created["spec"]["volumes"] if v["name"].startswith("kube-api-access-")]
    assert projected, f"no service-account token volume: {created['spec']['volumes']}"
    assert created["spec"]["serviceAccountName"] == "default"


def _eventually(probe: Callable[[], str], timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return probe()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@pytest.mark.long  # ~12 s: in make test-long, so that make test stays within 15 minutes
def test_stop_leaves_nothing_behind_and_is_idempotent(bin_dir: Path, tmp_path: Path) -> None:
    cp = lifecycle.start(tmp_path, bin_dir=bin_dir)
    try:
        with pytest.raises(lifecycle.ControlPlaneError, match="already running"):
            lifecycle.start(tmp_path, bin_dir=bin_dir)
        assert lifecycle.is_running(cp), "a refused start must not disturb the running one"
    finally:
        lifecycle.stop(tmp_path)
    assert [name for name, _ in cp.processes()] == [
        "kube-controller-manager",
        "kube-apiserver",
        "etcd",
    ]
    for _, pid in cp.processes():
        assert not Path(f"/proc/{pid}").exists(), f"pid {pid} is still there after stop"
    assert not lifecycle.is_running(cp)
    assert lifecycle.load(tmp_path) is None
    lifecycle.stop(tmp_path)


def test_missing_binaries_are_named(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    with pytest.raises(
        lifecycle.ControlPlaneError,
        match="etcd, kube-apiserver and kube-controller-manager missing",
    ):
        lifecycle.start(tmp_path / "cluster", bin_dir=empty)
    assert lifecycle.load(tmp_path / "cluster") is None


def test_missing_apiserver_alone_is_named(bin_dir: Path, tmp_path: Path) -> None:
    partial = tmp_path / "bin"
    partial.mkdir()
    (partial / "etcd").symlink_to(bin_dir / "etcd")
    with pytest.raises(lifecycle.ControlPlaneError) as raised:
        lifecycle.start(
            tmp_path / "cluster", bin_dir=partial, parts=lifecycle.Parts(controllers=False)
        )
    assert str(raised.value).startswith("kube-apiserver missing")


def test_a_process_that_dies_during_start_is_reported_with_its_log(
    bin_dir: Path, tmp_path: Path
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port: int = taken.getsockname()[1]
        with pytest.raises(lifecycle.ControlPlaneError) as raised:
            lifecycle.start(tmp_path, bin_dir=bin_dir, etcd_port=port, timeout=30)
    message = str(raised.value)
    assert message.startswith("etcd exited")
    assert "address already in use" in message
    assert lifecycle.load(tmp_path) is None
