"""Fixtures for the end-to-end tests: plumb's image built by ``make image``, then installed with
``kubectl apply -k manifests/`` on the local cluster with its real node, as a person would.

The tests that build the image or start the node run only under ``make test-e2e`` (which sets
PLUMB_E2E=1): ``make test`` collects them too, and would otherwise start a second real node
beside the integration suite's, which this machine cannot have (the bridge has a fixed name).
Where the machine cannot run a node, the node fixture skips them and says why. The static
checks of the manifests run in both.
"""

from __future__ import annotations

import calendar
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from plumb_dev.cluster.localnode import images
from plumb_dev.cluster.localnode import nodelifecycle as localnode
from plumb_dev.testing import crds, kube
from tests.integration.conftest import node_cluster
from tests.support.installation import (
    DEPLOYMENT,
    MANIFESTS,
    NAMESPACE,
    REPOSITORY,
    SELECTOR,
    Image,
    Installed,
)
from tests.support.live_cluster import NodeCluster

__all__ = ["Installed", "node_cluster"]

ENABLE = "PLUMB_E2E"
# A first build here takes about 3 minutes (the Python base, the wheels, the kernel compiled).
_IMAGE_TIMEOUT_SECONDS = 900
# Both replicas Ready: the image is local, the kernel comes from the image's cache.
_READY_TIMEOUT_SECONDS = 180


# The fixtures that build the image or start the real node; tests without them (the static
# checks of the manifests) run everywhere.
_HEAVY = frozenset({"plumb_image", "node_cluster", "installed"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get(ENABLE) == "1":
        return
    here = Path(__file__).parent
    why = (
        f"end-to-end: run by `make test-e2e` ({ENABLE}=1), which starts the real node "
        f"alone; `make test`'s integration suite has one of its own"
    )
    skip = pytest.mark.skip(reason=why)
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if here in Path(str(item.path)).parents and fixtures & _HEAVY:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def plumb_image() -> Image:
    """``make image``: staged wheels, the Python base and the Dockerfile, built with buildah."""
    # buildah and mmdebstrap come with what the real node needs: without it, skip as it does.
    problem = localnode.preflight()
    if problem is not None:
        pytest.skip(reason=f"this machine cannot run the real node: {problem}")
    started = time.monotonic()
    result = subprocess.run(
        ["make", "--no-print-directory", "image"],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=_IMAGE_TIMEOUT_SECONDS,
        check=False,
    )
    assert result.returncode == 0, f"make image failed:\n{result.stdout}\n{result.stderr}"
    ref, _, archive = result.stdout.strip().splitlines()[-1].partition("\t")
    image = Image(
        archive=images.ImageArchive(ref=ref, archive=Path(archive)),
        seconds=time.monotonic() - started,
    )
    print(f"make image: {ref}, {image.size_mb:.0f} MB, {image.seconds:.0f} s\n{result.stderr}")
    return image


def overlay(directory: Path, *, image: str) -> Path:
    """A kustomization over a copy of manifests/ (and crds/, which it takes the CRD from) that
    only points the image at the local build: kustomize takes a base by a relative path only.
    """
    name, _, tag = image.rpartition(":")
    kustomization: dict[str, Any] = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": ["../manifests"],
        "images": [{"name": "plumb", "newName": name, "newTag": tag}],
    }
    for source in (MANIFESTS, REPOSITORY / "crds"):
        shutil.copytree(source, directory / source.name)
    directory = directory / "overlay"
    directory.mkdir()
    # JSON is YAML: no YAML writer needed.
    (directory / "kustomization.yaml").write_text(json.dumps(kustomization, indent=2) + "\n")
    return directory


def early_pod(namespace: str, image: str) -> dict[str, Any]:
    """A pod for plumb that waits from before the install: its bind time is plumb's first."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "first", "namespace": namespace},
        "spec": {
            "schedulerName": "plumb",
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "main",
                    "image": image,
                    "imagePullPolicy": "Never",
                    "command": ["sleep", "infinity"],
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                }
            ],
        },
    }


def _timestamp(text: str) -> float:
    return float(calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ")))


def _condition_time(pod: dict[str, Any], kind: str) -> str | None:
    for condition in pod.get("status", {}).get("conditions", []):
        if condition.get("type") == kind and condition.get("status") == "True":
            return str(condition["lastTransitionTime"])
    return None


@pytest.fixture(scope="session")
def installed(
    plumb_image: Image,
    node_cluster: NodeCluster,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Installed]:
    """plumb from manifests/ (image pinned to the local build), every replica Ready."""
    cluster = node_cluster
    images.load(plumb_image.archive, containerd_address=cluster.node.containerd_address)
    kubectl = cluster.kubectl
    directory = overlay(tmp_path_factory.mktemp("overlay"), image=plumb_image.archive.ref)
    waiting = "e2e-first"
    cluster.client.create_namespace(waiting)
    kubectl.check("apply", "-f", "-", stdin=json.dumps(early_pod(waiting, cluster.image)))
    # The optional components first, as a cluster whose training operators use scheduler-plugins'
    # PodGroups and whose tenants its ElasticQuotas installs them: plumb reads the PodGroups and
    # ElasticQuotas of CRDs that exist when it starts.
    crds.install(kubectl, crds.PODGROUPS_DIR)
    crds.install(kubectl, crds.ELASTICQUOTAS_DIR)
    kubectl.check("apply", "-k", str(directory), timeout=120)
    replicas = 2  # manifests/deployment.yaml
    try:
        kubectl.check(
            "rollout",
            "status",
            f"deployment/{DEPLOYMENT}",
            "-n",
            NAMESPACE,
            f"--timeout={_READY_TIMEOUT_SECONDS}s",
            timeout=_READY_TIMEOUT_SECONDS + 10,
        )
        installation = Installed(
            cluster=cluster,
            image=plumb_image,
            kubectl=kubectl,
            overlay=directory,
            replicas=replicas,
            early_pod=f"{waiting}/first",
            first_pod_seconds=_first_pod_seconds(kubectl, waiting),
        )
    except BaseException:
        print(kubectl.run("describe", "pods", "-n", NAMESPACE).stdout[-6000:])
        print(kubectl.run("logs", "-n", NAMESPACE, "-l", SELECTOR, "--tail=80").stdout)
        raise
    yield installation
    for pod in installation.plumb_pods():
        name = pod["metadata"]["name"]
        print(f"--- {name} ---\n{kubectl.run('logs', '-n', NAMESPACE, name).stdout[-4000:]}")
    kubectl.run("delete", "-k", str(directory), "--wait=true", "--timeout=60s", timeout=90)
    cluster.client.delete_namespace(waiting)


def _first_pod_seconds(kubectl: crds.Kubectl, namespace: str) -> float:
    """From the leader's container start to plumb's first binding (the early pod's)."""

    def bound() -> dict[str, Any] | None:
        pod: dict[str, Any] = json.loads(
            kubectl.check("get", "pod", "first", "-n", namespace, "-o", "json")
        )
        return pod if _condition_time(pod, "PodScheduled") else None

    pod = kube.wait_for("plumb to bind the pod waiting before the install", bound, timeout=60)
    scheduled = _timestamp(str(_condition_time(pod, "PodScheduled")))
    # The replica that bound it: its Scheduled event's reporting instance is plumb-<pod name>.
    events = json.loads(kubectl.check("get", "events.events.k8s.io", "-n", namespace, "-o", "json"))
    instances = {
        event["reportingInstance"]
        for event in events["items"]
        if event.get("reason") == "Scheduled" and event["regarding"]["name"] == "first"
    }
    assert len(instances) == 1, f"expected one Scheduled event for {namespace}/first: {events}"
    replica = instances.pop().removeprefix("plumb-")
    status = json.loads(kubectl.check("get", "pod", replica, "-n", NAMESPACE, "-o", "json"))
    (container,) = status["status"]["containerStatuses"]
    return scheduled - _timestamp(container["state"]["running"]["startedAt"])
