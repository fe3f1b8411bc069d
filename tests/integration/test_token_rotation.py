"""plumb in-cluster style, with a real ServiceAccount token from the TokenRequest API: it
schedules with it, and when the token file is rotated and the old token revoked, it keeps
scheduling with the new one."""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from plumb.k8s import credentials as credentials_module
from plumb_dev.cluster.controlplane import lifecycle as controlplane
from plumb_dev.testing import builders, crds, kube
from tests.support.live_cluster import NodeFactory

pytestmark = [pytest.mark.integration, pytest.mark.long]  # ~11 s: make test-long

ACCOUNT = "plumb"


def _token(client: kube.Kube, namespace: str, secret: str) -> str:
    """A real token of the ServiceAccount, bound to a Secret: deleting the Secret revokes it."""
    created = client.core.create_namespaced_secret(
        namespace, {"metadata": {"name": secret}, "type": "Opaque"}
    )
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {
            "expirationSeconds": 600,
            "boundObjectRef": {
                "apiVersion": "v1",
                "kind": "Secret",
                "name": secret,
                "uid": created.metadata.uid,
            },
        },
    }
    response = client.core.create_namespaced_service_account_token(
        ACCOUNT, namespace, request, _preload_content=False
    )
    return str(json.loads(response.data)["status"]["token"])


def _status_with(cp: controlplane.ControlPlane, token: str) -> int:
    """What the API server answers a request made with ``token``."""
    context = ssl.create_default_context(cafile=str(cp.ca_file))
    request = urllib.request.Request(
        f"{cp.server}/api/v1/nodes?limit=1", headers={"Authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


@pytest.fixture
def account(kube_client: kube.Kube, namespace: str) -> Iterator[str]:
    """The ServiceAccount, bound to cluster-admin for this test (least privilege is tested
    with the manifests' ClusterRole elsewhere)."""
    kube_client.core.create_namespaced_service_account(namespace, {"metadata": {"name": ACCOUNT}})
    rbac = k8s.RbacAuthorizationV1Api(kube_client.api)
    binding = f"{namespace}-plumb"
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": binding},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "cluster-admin",
            },
            "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": namespace}],
        }
    )
    yield ACCOUNT
    rbac.delete_cluster_role_binding(binding)


def _write(path: Path, text: str) -> None:
    # As the kubelet does: a new file renamed over the old, never a half-written token.
    staged = path.with_suffix(".new")
    staged.write_text(text)
    staged.replace(path)


def test_in_cluster_plumb_schedules_with_a_real_token_and_follows_its_rotation(
    control_plane: controlplane.ControlPlane,
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    account: str,
    policy_crd: crds.Kubectl,
    tmp_path: Path,
) -> None:
    add_node(builders.make_node(f"{namespace}-n").capacity(cpu="8"))
    mount = tmp_path / "serviceaccount"
    mount.mkdir()
    first = _token(kube_client, namespace, "token-1")
    _write(mount / "token", first)
    shutil.copy(control_plane.ca_file, mount / "ca.crt")
    (mount / "namespace").write_text(namespace)
    host, port = control_plane.server.removeprefix("https://").rsplit(":", 1)
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}  # nothing to fall back on
    env.update(
        {
            "KUBERNETES_SERVICE_HOST": host,
            "KUBERNETES_SERVICE_PORT": port,
            credentials_module.SERVICE_ACCOUNT_ENV: str(mount),
            "PYTHONUNBUFFERED": "1",
        }
    )
    log = tmp_path / "plumb.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "plumb", "run", "--metrics-port", "0", "--debug-port", "0"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    try:
        kube.wait_for(
            "plumb to sync",
            lambda: "synced" in log.read_text() or process.poll() is not None,
            timeout=180,
        )
        assert process.poll() is None, log.read_text()
        assert f"on {control_plane.server}" in log.read_text()  # the in-cluster address

        def schedule(name: str) -> dict[str, Any]:
            kube_client.create_pod(
                builders.make_pod(name, namespace).scheduler("plumb").req(cpu="100m").obj()
            )
            return kube.wait_for(
                f"{name} bound",
                lambda: (pod := kube_client.pod(namespace, name))["spec"].get("nodeName") and pod,
                timeout=30,
            )

        schedule("before")

        # Rotate: a new token in the file, the old one revoked with the object it is bound to.
        second = _token(kube_client, namespace, "token-2")
        _write(mount / "token", second)
        kube_client.core.delete_namespaced_secret("token-1", namespace)
        kube.wait_for(
            "the old token to be refused", lambda: _status_with(control_plane, first) == 401
        )
        assert _status_with(control_plane, second) == 200

        after = schedule("after")
        assert after["spec"]["nodeName"] == f"{namespace}-n"

        # The Scheduled event is posted after the binding: wait for it, then make sure it is
        # the only one.
        def scheduled() -> list[dict[str, Any]]:
            return [
                e for e in kube_client.events(namespace, "after") if e.get("reason") == "Scheduled"
            ]

        kube.wait_for("the Scheduled event of after", lambda: scheduled() or None, timeout=30)
        assert len(scheduled()) == 1
        output = log.read_text()
        assert f"the token in {mount / 'token'} changed" in output
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=30)
        print(log.read_text()[-4000:])
    assert process.returncode == 0
    assert "Traceback" not in log.read_text()
