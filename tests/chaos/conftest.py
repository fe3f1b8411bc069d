"""Fixtures of the chaos suite: a control plane of its own (its API server and etcd are
restarted, its etcd compacted, which no other test should see), a namespace and nodes per
scenario, and plumb as a child process a scenario may kill.

The control plane runs etcd and kube-apiserver only, as the benchmark's does, with the API
server's watch cache off: watches are then served by etcd itself, so a watch resumed from a
revision an etcd compaction removed gets 410 Gone, the fault scenario 3 forces.
"""

from __future__ import annotations

import gc
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from plumb_dev.cluster.controlplane import building
from plumb_dev.cluster.controlplane import lifecycle as controlplane
from plumb_dev.testing import crds, kube
from tests.chaos import harness

CHAOS_PARTS = controlplane.Parts(
    controllers=False, service_accounts=False, apiserver_flags=("--watch-cache=false",)
)


@pytest.fixture(autouse=True)
def _collect_garbage() -> Iterator[None]:
    """Collect cyclic garbage after each test: a connection a test leaves open then fails that
    test (warnings are errors), not whichever later test the collector happens to run in."""
    yield
    gc.collect()


@pytest.fixture(scope="session")
def chaos_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[controlplane.ControlPlane]:
    directory = tmp_path_factory.mktemp("chaos-plane")
    plane = controlplane.start(directory, bin_dir=building.ensure_binaries(), parts=CHAOS_PARTS)
    try:
        kubectl = crds.Kubectl.of(plane, cache_dir=tmp_path_factory.mktemp("chaos-kubectl"))
        crds.install(kubectl)
        # scheduler-plugins' PodGroup CRD, before any plumb starts (sigkill-gangs' groups).
        crds.install(kubectl, crds.PODGROUPS_DIR)
        yield plane
    finally:
        controlplane.stop(directory)


@pytest.fixture
def plane(chaos_plane: controlplane.ControlPlane) -> controlplane.ControlPlane:
    """The chaos control plane as now recorded (a restart gives its parts new pids)."""
    current = controlplane.load(chaos_plane.directory)
    assert current is not None, "the chaos plane is not recorded"
    assert controlplane.is_running(current), "the chaos plane is down"
    return current


@pytest.fixture
def client(plane: controlplane.ControlPlane) -> Iterator[kube.Kube]:
    api = kube.Kube(plane.kubeconfig)
    yield api
    api.close()


@pytest.fixture
def namespace(request: pytest.FixtureRequest, client: kube.Kube) -> Iterator[str]:
    slug = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40]
    name = f"{slug}-{uuid.uuid4().hex[:6]}"
    client.create_namespace(name, account=False)
    yield name
    client.delete_pods(name)


@pytest.fixture
def node_prefix(request: pytest.FixtureRequest, client: kube.Kube) -> Iterator[str]:
    """A prefix for this scenario's node names; every node under it is deleted afterwards."""
    prefix = f"chaos-{uuid.uuid4().hex[:6]}"
    yield prefix
    for node in client.nodes():
        if node["metadata"]["name"].startswith(prefix):
            client.delete_node(node["metadata"]["name"])


@pytest.fixture
def start_plumb(
    plane: controlplane.ControlPlane, tmp_path: Path
) -> Iterator[harness.RestartablePlumbFactory]:
    """Starts ``plumb run`` (on the plane's kubeconfig unless given another, e.g. a fault
    proxy's) and, at the end, stops it: it must exit 0 and never have logged a traceback."""
    started: list[harness.RestartablePlumb] = []

    def start(*extra: str, kubeconfig: Path | None = None) -> harness.RestartablePlumb:
        directory = tmp_path / f"plumb{len(started)}"
        directory.mkdir()
        plumb = harness.RestartablePlumb(kubeconfig or plane.kubeconfig, directory, *extra)
        started.append(plumb)  # before start: a start that fails still gets stopped
        plumb.start()
        return plumb

    yield start
    for plumb in started:
        code = plumb.stop()
        output = plumb.output()
        print(f"--- plumb logs ({[str(log) for log in plumb.logs]}) ---\n{output[-6000:]}")
        assert code == 0, f"plumb exited with {code}"
        assert "Traceback" not in output, "plumb logged a traceback"
