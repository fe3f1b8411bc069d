"""Feature gates on the local control plane, against the real binaries: with GenericWorkload on,
kube-apiserver serves PodGroups and Workloads (scheduling.k8s.io/v1beta1) and keeps a pod's
group, kube-controller-manager takes the podgroup-protection finalizer off a PodGroup no pod
uses, and kube-scheduler holds a gang's pods until enough of them exist; the default plane has
none of it; a gate the release does not know is refused before anything starts."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes.client as k8s
import pytest

from plumb_dev.cluster.controlplane import building, featuregates
from plumb_dev.cluster.controlplane import lifecycle as controlplane
from plumb_dev.testing import builders, kube
from tests.support import side_by_side
from tests.support.live_cluster import NodeFactory
from tests.support.side_by_side import gated_scheduler_fixture  # noqa: F401

pytestmark = pytest.mark.integration

GROUP = "scheduling.k8s.io"
VERSION = "v1beta1"
FINALIZER = "scheduling.k8s.io/podgroup-protection"
NOBODY = "nobody"  # a schedulerName no scheduler takes: the pod stays where it was put


@pytest.fixture(autouse=True)
def _v1beta1() -> None:
    release = building.chosen_release()
    if release.workload_api != f"{GROUP}/{VERSION}":
        pytest.skip(reason=f"{release.version} serves Workloads as {release.workload_api}")


def _podgroup(name: str, namespace: str, min_count: int) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
    }


def _member(pod: builders.PodBuilder, group: str) -> dict[str, Any]:
    body = pod.obj()
    body["spec"]["schedulingGroup"] = {"podGroupName": group}
    return body


def _groups(client: kube.Kube) -> k8s.CustomObjectsApi:
    return k8s.CustomObjectsApi(client.api)


def _create_group(client: kube.Kube, namespace: str, name: str, min_count: int) -> Any:
    body = _podgroup(name, namespace, min_count)
    return _groups(client).create_namespaced_custom_object(
        GROUP, VERSION, namespace, "podgroups", body
    )


def _group(client: kube.Kube, namespace: str, name: str) -> Any:
    """The PodGroup, None once it is gone."""
    try:
        return _groups(client).get_namespaced_custom_object(
            GROUP, VERSION, namespace, "podgroups", name
        )
    except k8s.ApiException as error:
        if error.status == 404:
            return None
        raise


def _delete_group(client: kube.Kube, namespace: str, name: str) -> None:
    _groups(client).delete_namespaced_custom_object(GROUP, VERSION, namespace, "podgroups", name)


def test_the_gated_plane_serves_podgroups_and_workloads_and_records_its_gates(
    gated_plane: controlplane.ControlPlane, gated_client: kube.Kube
) -> None:
    assert gated_plane.feature_gates == {featuregates.GENERIC_WORKLOAD: True}
    assert controlplane.load(gated_plane.directory) == gated_plane
    served = k8s.CustomObjectsApi(gated_client.api).get_api_resources(GROUP, VERSION)
    names = {resource.name for resource in served.resources}
    assert {"podgroups", "podgroups/status", "workloads"} <= names


def test_the_default_plane_neither_serves_the_api_nor_keeps_a_pods_group(
    control_plane: controlplane.ControlPlane, kube_client: kube.Kube, namespace: str
) -> None:
    assert control_plane.feature_gates == {}
    with pytest.raises(k8s.ApiException) as raised:
        k8s.CustomObjectsApi(kube_client.api).get_api_resources(GROUP, VERSION)
    assert raised.value.status == 404
    pod = _member(builders.make_pod("member", namespace).scheduler(NOBODY), "gang")
    created = kube_client.create_pod(pod)
    assert "schedulingGroup" not in created["spec"]


def test_a_podgroup_is_protected_while_a_pod_uses_it_and_deleted_after(
    gated_client: kube.Kube, gated_namespace: str
) -> None:
    client, namespace = gated_client, gated_namespace
    used = _create_group(client, namespace, "used", min_count=2)
    unused = _create_group(client, namespace, "unused", min_count=1)
    assert used["spec"]["schedulingPolicy"] == {"gang": {"minCount": 2}}
    assert used["metadata"]["finalizers"] == [FINALIZER]
    assert unused["metadata"]["finalizers"] == [FINALIZER]
    pod = _member(builders.make_pod("member", namespace).scheduler(NOBODY), "used")
    created = client.create_pod(pod)
    assert created["spec"]["schedulingGroup"] == {"podGroupName": "used"}

    _delete_group(client, namespace, "used")
    _delete_group(client, namespace, "unused")
    # kube-controller-manager's podgroup-protection controller lets the unused one go ...
    kube.wait_for(
        "the unused PodGroup to be deleted", lambda: _group(client, namespace, "unused") is None
    )
    # ... and holds the one a pod names until that pod is gone.
    held = _group(client, namespace, "used")
    assert held is not None
    assert held["metadata"].get("deletionTimestamp")
    assert held["metadata"]["finalizers"] == [FINALIZER]
    client.delete_pods(namespace)
    kube.wait_for(
        "the used PodGroup to be deleted", lambda: _group(client, namespace, "used") is None
    )


def test_kube_scheduler_on_the_gated_plane_waits_for_the_gangs_minimum(
    request: pytest.FixtureRequest,
    gated_client: kube.Kube,
    gated_namespace: str,
    gated_add_node: NodeFactory,
) -> None:
    """Its --feature-gates are the plane's: GangScheduling's PreEnqueue holds the first member
    of a group of minCount 2 until the second exists, then both are placed."""
    node = gated_add_node(builders.make_node(f"{gated_namespace}-n").capacity(cpu="4"))
    _create_group(gated_client, gated_namespace, "gang", min_count=2)
    with side_by_side.scheduler_runner(request, side_by_side.KUBE_SCHEDULER, gated=True) as runner:
        first = runner.pod("first", gated_namespace).req(cpu="1")
        gated_client.create_pod(_member(first, "gang"))
        # A probe judged after it proves kube-scheduler has seen the first member.
        side_by_side.in_view(gated_client, runner, gated_namespace, [node])
        assert not gated_client.pod(gated_namespace, "first")["spec"].get("nodeName")
        second = runner.pod("second", gated_namespace).req(cpu="1")
        gated_client.create_pod(_member(second, "gang"))
        placed = side_by_side.wait_settled(gated_client, gated_namespace, ["first", "second"])
    assert placed == {"first": node, "second": node}


def test_both_schedulers_run_on_the_gated_plane_and_place_a_pod_of_no_group(
    gated_scheduler: side_by_side.Runner,
    gated_client: kube.Kube,
    gated_namespace: str,
    gated_add_node: NodeFactory,
) -> None:
    """The fixtures gang tests build on: plumb (which reads no gate) and kube-scheduler side by
    side on the gated plane."""
    node = gated_add_node(builders.make_node(f"{gated_namespace}-n").capacity(cpu="4"))
    side_by_side.in_view(gated_client, gated_scheduler, gated_namespace, [node])
    gated_client.create_pod(gated_scheduler.pod("single", gated_namespace).req(cpu="1").obj())
    placed = side_by_side.wait_settled(gated_client, gated_namespace, ["single"])
    assert placed == {"single": node}


def test_an_unknown_gate_is_refused_before_anything_starts(tmp_path: Path) -> None:
    bin_dir = building.ensure_binaries()
    with pytest.raises(controlplane.ControlPlaneError) as raised:
        controlplane.start(tmp_path, bin_dir=bin_dir, feature_gates={"GenericWorkLoad": True})
    assert str(raised.value).startswith(
        f"unknown feature gate for Kubernetes {building.chosen_release().version}: "
        "'GenericWorkLoad' (did you mean GenericWorkload?); nothing was started."
    )
    assert controlplane.load(tmp_path) is None
    assert not (tmp_path / "etcd.log").exists()


def _plumb(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "plumb", *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def test_plumb_cluster_up_refuses_an_unknown_gate(tmp_path: Path) -> None:
    up = _plumb("cluster", "up", "--dir", str(tmp_path), "--feature-gates", "Nope=true")
    assert up.returncode == 1
    assert "error: unknown feature gate for Kubernetes" in up.stderr
    assert "'Nope'; nothing was started" in up.stderr
    assert controlplane.load(tmp_path) is None


@pytest.fixture
def gated_cluster(tmp_path: Path) -> Iterator[Path]:
    directory = tmp_path / "cluster"
    up = _plumb("cluster", "up", "--dir", str(directory), "--feature-gates", "GenericWorkload=true")
    try:
        assert up.returncode == 0, up.stderr
        version = building.chosen_release().version
        assert f"(Kubernetes {version}, feature gates GenericWorkload=true)" in up.stderr
        yield directory
    finally:
        down = _plumb("cluster", "down", "--dir", str(directory))
        assert down.returncode == 0, down.stderr


@pytest.mark.long
def test_plumb_cluster_up_runs_every_part_with_the_gates(gated_cluster: Path) -> None:
    plane = controlplane.load(gated_cluster)
    assert plane is not None
    assert plane.feature_gates == {featuregates.GENERIC_WORKLOAD: True}
    status = _plumb("cluster", "status", "--dir", str(gated_cluster))
    assert status.returncode == 0, status.stdout + status.stderr
    assert "feature gates GenericWorkload=true" in status.stdout.splitlines()[0]
    for _, pid in plane.processes()[:-1]:  # all but etcd
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        assert b"--feature-gates=GenericWorkload=true" in argv
    kubectl = subprocess.run(
        [
            *(str(plane.bin_dir / "kubectl"), "--kubeconfig", str(plane.kubeconfig)),
            *("api-resources", f"--api-group={GROUP}", "-o", "name"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "KUBECACHEDIR": str(gated_cluster / "kubectl-cache")},
    )
    assert kubectl.returncode == 0, kubectl.stderr
    assert {"podgroups.scheduling.k8s.io", "workloads.scheduling.k8s.io"} <= set(
        kubectl.stdout.split()
    )
