"""Fixtures for tests against the real control plane: one cluster (etcd, kube-apiserver,
kube-controller-manager) per session, a namespace and nodes per test, and ``plumb run`` as a
child process per test; a second cluster with the GenericWorkload feature gate on (``gated_*``
fixtures), started only for the tests that ask for it; a cluster with tracing (``traced_plane``:
Jaeger, with kube-apiserver's and etcd's spans sent to it), likewise; and, where this machine can
run one, a cluster with a real node (containerd, kubelet, kube-proxy), also one per session."""

from __future__ import annotations

import gc
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from plumb_dev.cluster.controlplane import building, featuregates, releases
from plumb_dev.cluster.controlplane import lifecycle as controlplane
from plumb_dev.cluster.localnode import hostrecord, images
from plumb_dev.cluster.localnode import nodelifecycle as localnode
from plumb_dev.testing import builders, crds, kube
from tests.support import side_by_side
from tests.support.live_cluster import NodeCluster, NodeFactory, filter_rules
from tests.support.plumb_process import Plumb, PlumbFactory, launch_plumb, wait_synced


@pytest.fixture(autouse=True)
def _collect_garbage() -> Iterator[None]:
    """Collect cyclic garbage after each test: a connection a test leaves open then fails that
    test (warnings are errors), not whichever later test the collector happens to run in."""
    yield
    gc.collect()


# The gated plane's gates: kube-apiserver serves Workloads and PodGroups
# (scheduling.k8s.io/v1beta1 on v1.37) and keeps pods' spec.schedulingGroup;
# kube-controller-manager takes the podgroup-protection finalizer off unused PodGroups;
# kube-scheduler started on it places a PodGroup's pods together.
GATED_FEATURE_GATES = {featuregates.GENERIC_WORKLOAD: True}


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[controlplane.ControlPlane]:
    """The session's control plane, with the release's default feature gates."""
    yield from _session_plane(tmp_path_factory, "controlplane")


@pytest.fixture(scope="session")
def gated_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[controlplane.ControlPlane]:
    """A second control plane, started by the first test that asks for it and kept for the
    session, whose parts run with ``GATED_FEATURE_GATES`` (``plane.feature_gates``); skipped on
    a release without GenericWorkload. Its fixtures: ``gated_client``, ``gated_namespace``,
    ``gated_add_node``, ``gated_start_plumb``, and side_by_side's ``gated_scheduler``."""
    release = building.chosen_release()
    if release.workload_api is None:
        pytest.skip(reason=f"Kubernetes {release.version} has no GenericWorkload feature gate")
    yield from _session_plane(tmp_path_factory, "gatedplane", GATED_FEATURE_GATES)


@pytest.fixture(scope="session")
def traced_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[controlplane.ControlPlane]:
    """A control plane with tracing, as ``plumb cluster up --tracing`` starts it, started by the
    first test that asks for it and kept for the session: Jaeger (``plane.jaeger``: its OTLP
    endpoints and query URL; built from its Go module the first time, many minutes), with
    kube-apiserver and etcd sending it the spans of requests that carry a sampled traceparent
    from a system:masters caller (the admin token). Tests that take it are marked ``tracing``
    (``make test-tracing``)."""
    jaeger = building.ensure_jaeger()
    yield from _session_plane(tmp_path_factory, "tracedplane", jaeger=jaeger)


def _session_plane(
    tmp_path_factory: pytest.TempPathFactory,
    name: str,
    feature_gates: dict[str, bool] | None = None,
    *,
    jaeger: Path | None = None,
) -> Iterator[controlplane.ControlPlane]:
    bin_dir = building.ensure_binaries()
    directory = tmp_path_factory.mktemp(name)
    plane = controlplane.start(
        directory,
        bin_dir=bin_dir,
        feature_gates=feature_gates,
        parts=controlplane.Parts(jaeger=jaeger),
    )
    try:
        yield plane
    finally:
        controlplane.stop(directory)
    left = [pid for _, pid in plane.processes() if _alive(pid)]
    assert not left, f"control plane processes still running after the session: {left}"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return state != "Z"


@pytest.fixture(scope="session")
def kube_minor(control_plane: controlplane.ControlPlane) -> int:
    """The minor release of the control plane the session runs: 37 for v1.37.2. The side-by-side
    tests key what they expect of kube-scheduler (and of plumb, which follows it) by it."""
    return releases.RELEASES[control_plane.kube_version].minor


@pytest.fixture(scope="session")
def words(kube_minor: int) -> side_by_side.Words:
    """kube-scheduler's FailedScheduling words as the session's release writes them (and plumb,
    which follows the release): the PostFilter part and the preemption sentence."""
    return side_by_side.Words(kube_minor)


@pytest.fixture(scope="session")
def kube_client(control_plane: controlplane.ControlPlane) -> Iterator[kube.Kube]:
    yield from _client(control_plane)


@pytest.fixture(scope="session")
def gated_client(gated_plane: controlplane.ControlPlane) -> Iterator[kube.Kube]:
    """``kube_client`` of the gated plane."""
    yield from _client(gated_plane)


def _client(plane: controlplane.ControlPlane) -> Iterator[kube.Kube]:
    client = kube.Kube(plane.kubeconfig)
    yield client
    client.close()


@pytest.fixture
def namespace(request: pytest.FixtureRequest, kube_client: kube.Kube) -> Iterator[str]:
    yield from _namespace(request, kube_client)


@pytest.fixture
def gated_namespace(request: pytest.FixtureRequest, gated_client: kube.Kube) -> Iterator[str]:
    """``namespace`` on the gated plane."""
    yield from _namespace(request, gated_client)


def _namespace(request: pytest.FixtureRequest, client: kube.Kube) -> Iterator[str]:
    slug = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40]
    name = f"{slug}-{uuid.uuid4().hex[:6]}"
    client.create_namespace(name)
    yield name
    client.delete_workloads(name)


@pytest.fixture
def add_node(kube_client: kube.Kube, namespace: str) -> Iterator[NodeFactory]:
    """Create a node for this test only (deleted afterwards, so tests never share nodes)."""
    yield from _node_factory(kube_client)


@pytest.fixture
def gated_add_node(gated_client: kube.Kube, gated_namespace: str) -> Iterator[NodeFactory]:
    """``add_node`` on the gated plane."""
    yield from _node_factory(gated_client)


def _node_factory(client: kube.Kube) -> Iterator[NodeFactory]:
    created: list[str] = []

    def create(builder: builders.NodeBuilder) -> str:
        body = builder.obj()
        name = body["metadata"]["name"]
        created.append(name)
        client.create_node(body)
        return str(name)

    yield create
    for name in created:
        client.delete_node(name)


@pytest.fixture(scope="session")
def node_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeCluster]:
    """A cluster whose one node is real (one per machine: the bridge has a fixed name), with
    kube-scheduler for the pods that do not ask for plumb. Skipped, saying why, where this
    machine cannot run a node; at the end, down must leave the host as it found it."""
    problem = localnode.preflight()
    if problem is not None:
        pytest.skip(reason=f"this machine cannot run the real node: {problem}")
    bin_dir = building.ensure_binaries()
    # Built before the record, so the image build's traces are not taken for the node's.
    image = images.ensure_test_image()
    directory = tmp_path_factory.mktemp("realnode")
    before = hostrecord.take()
    cp, node = localnode.up(directory, bin_dir=bin_dir, parts=controlplane.Parts(scheduler=True))
    client = kube.Kube(cp.kubeconfig)
    try:
        rules = {chain: filter_rules(chain) for chain in ("FORWARD", "OUTPUT", "PLUMB-GUARD")}
        images.load(image, containerd_address=node.containerd_address)
        kubectl = crds.Kubectl.of(cp, cache_dir=tmp_path_factory.mktemp("node-kubectl-cache"))
        crds.install(kubectl)
        yield NodeCluster(
            cp=cp,
            node=node,
            client=client,
            kubectl=kubectl,
            image=image.ref,
            rules_before_pods=rules,
        )
    finally:
        client.close()
        # What a person types; it runs localnode.nodelifecycle.down.
        down = subprocess.run(
            [sys.executable, "-m", "plumb", "cluster", "down", "--dir", str(directory)],
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        if down.returncode != 0:
            localnode.down(directory)
        assert down.returncode == 0, down.stderr
        assert "the host is as it was" in down.stderr
    left = hostrecord.left_behind(before, hostrecord.take(), cluster=directory.resolve())
    assert left == [], "down left this behind:\n" + "\n".join(left)


@pytest.fixture
def node_namespace(request: pytest.FixtureRequest, node_cluster: NodeCluster) -> Iterator[str]:
    slug = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40]
    name = f"{slug}-{uuid.uuid4().hex[:6]}"
    node_cluster.client.create_namespace(name)
    yield name
    node_cluster.client.delete_workloads(name)


@pytest.fixture
def start_plumb(
    control_plane: controlplane.ControlPlane, tmp_path: Path, policy_crd: crds.Kubectl
) -> Iterator[PlumbFactory]:
    """Start ``plumb run`` against the control plane (its CRD installed, as a cluster running
    plumb has it) and wait until it has synced."""
    yield from _plumb_factory(control_plane.kubeconfig, tmp_path)


@pytest.fixture
def gated_start_plumb(
    gated_plane: controlplane.ControlPlane, tmp_path: Path, gated_policy_crd: crds.Kubectl
) -> Iterator[PlumbFactory]:
    """``start_plumb`` on the gated plane. plumb is given no gates: it finds the Workload API
    by discovery."""
    yield from _plumb_factory(gated_plane.kubeconfig, tmp_path)


@pytest.fixture
def node_plumb(node_cluster: NodeCluster, tmp_path: Path) -> Iterator[Plumb]:
    """``plumb run`` against the cluster with the real node."""
    for factory in _plumb_factory(node_cluster.cp.kubeconfig, tmp_path):
        yield factory()


def _plumb_factory(kubeconfig: Path, tmp_path: Path) -> Iterator[PlumbFactory]:
    started: list[Plumb] = []

    def start(*extra: str) -> Plumb:
        log = tmp_path / f"plumb-{len(started)}.log"
        # Tests that read metrics or the debug endpoint pass free ports of their own.
        process = launch_plumb(kubeconfig, log, *extra)
        plumb = Plumb(process, log)
        started.append(plumb)
        wait_synced(process, plumb.output)
        return plumb

    yield start
    for plumb in started:
        code = plumb.stop()
        output = plumb.output()
        print(f"--- plumb log ({plumb.log}) ---\n{output[-6000:]}")
        assert code == 0, f"plumb exited with {code}"
        assert "Traceback" not in output, "plumb logged a traceback"


@pytest.fixture
def plumb(start_plumb: PlumbFactory) -> Plumb:
    return start_plumb()


@pytest.fixture(scope="session")
def policy_crd(
    control_plane: controlplane.ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> crds.Kubectl:
    """The SchedulingPolicy CRD (crds/) installed and Established on the session's control plane.

    Returns the control plane's kubectl, with a discovery cache of its own so `spol` resolves.
    """
    return _policy_crd(control_plane, tmp_path_factory.mktemp("kubectl-cache"))


@pytest.fixture(scope="session")
def gated_policy_crd(
    gated_plane: controlplane.ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> crds.Kubectl:
    """``policy_crd`` on the gated plane."""
    return _policy_crd(gated_plane, tmp_path_factory.mktemp("gated-kubectl-cache"))


def _policy_crd(plane: controlplane.ControlPlane, cache_dir: Path) -> crds.Kubectl:
    kubectl = crds.Kubectl.of(plane, cache_dir=cache_dir)
    installed = crds.install(kubectl)
    assert crds.POLICY_CRD in installed, f"crds/ did not install {crds.POLICY_CRD}: {installed}"
    return kubectl


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks ``differential`` every test run side by side: once under plumb and once under the
    real kube-scheduler (it takes side_by_side's ``scheduler`` fixture, directly or through
    another). ``make test-long`` runs them again against the window's oldest release; those on
    the gated plane (``gated_scheduler``) are not marked, since that release has no gate. Marks
    ``tracing`` every test on the traced plane."""
    for item in items:
        if "scheduler" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.differential)
        # Whatever takes the traced plane needs Jaeger: make test-tracing runs it, make test not.
        if "traced_plane" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.tracing)
