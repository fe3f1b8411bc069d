"""plumb's image carries the scheduler alone: no development tooling (plumb_dev) and no Python
kubernetes client in its layers, and ``plumb bench`` run in it says in one line how to get the
tooling instead of failing with a traceback."""

from __future__ import annotations

import json
import tarfile
from collections.abc import Iterator
from typing import Any

import pytest

from plumb_dev.testing import kube
from tests.support.installation import Image, Installed

HINT = "plumb bench is development tooling, not part of the scheduler"


def _site_packages(image: Image) -> set[str]:
    """The top-level names under every site-packages directory of the image's layers."""
    names: set[str] = set()
    with tarfile.open(image.archive.archive) as archive:
        manifest = json.load(_extract(archive, "manifest.json"))
        for layer_name in manifest[0]["Layers"]:
            with tarfile.open(fileobj=_extract(archive, layer_name)) as layer:
                for member in layer.getnames():
                    _, found, rest = member.partition("site-packages/")
                    if found and rest:
                        names.add(rest.split("/")[0])
    return names


def _extract(archive: tarfile.TarFile, name: str) -> Any:
    handle = archive.extractfile(name)
    assert handle is not None, f"{name} is not a file in the image archive"
    return handle


def test_the_image_holds_plumb_and_no_tooling(plumb_image: Image) -> None:
    packages = _site_packages(plumb_image)
    assert "plumb" in packages, sorted(packages)  # the scan sees the installed packages
    assert "kopf" in packages
    for tooling in ("plumb_dev", "kubernetes", "matplotlib"):
        assert tooling not in packages, f"{tooling} is in the image"


@pytest.fixture
def bench_pod(installed: Installed) -> Iterator[tuple[str, str]]:
    namespace = "e2e-bench-hint"
    installed.cluster.client.create_namespace(namespace)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "bench", "namespace": namespace},
        "spec": {
            "nodeName": installed.cluster.node.name,
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "plumb",
                    "image": installed.image.archive.ref,
                    "imagePullPolicy": "Never",
                    "args": ["bench", "--quick"],
                    "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}},
                }
            ],
        },
    }
    installed.kubectl.check("apply", "-f", "-", stdin=json.dumps(pod))
    yield namespace, "bench"
    installed.cluster.client.delete_namespace(namespace)


def test_plumb_bench_in_the_image_says_how_to_get_the_tooling(
    installed: Installed, bench_pod: tuple[str, str]
) -> None:
    namespace, name = bench_pod

    def terminated() -> dict[str, Any] | None:
        pod = json.loads(installed.kubectl.check("get", "pod", name, "-n", namespace, "-o", "json"))
        for status in pod.get("status", {}).get("containerStatuses", []):
            state: dict[str, Any] | None = status.get("state", {}).get("terminated")
            if state:
                return state
        return None

    state = kube.wait_for("the bench container to exit", terminated, timeout=60)
    log = installed.kubectl.check("logs", "-n", namespace, name, timeout=60)
    print(log)
    assert state["exitCode"] == 2
    assert HINT in log
    assert "Traceback" not in log
