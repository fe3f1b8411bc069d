"""plumb follows the release of the cluster it runs against, or the one --emulated-version pins:
the log says which, every trace line carries it, and plumb_build_info labels it."""

from __future__ import annotations

import urllib.request

import pytest
from prometheus_client import parser

from plumb.observability import metrics
from plumb_dev.cluster.controlplane import lifecycle as controlplane
from plumb_dev.testing import builders, kube
from tests.support.live_cluster import NodeFactory
from tests.support.plumb_process import Plumb, PlumbFactory, free_port, scheduled_traces

pytestmark = pytest.mark.integration


def _build_info(port: int) -> dict[str, str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as page:
        text = page.read().decode()
    (family,) = [
        f for f in parser.text_string_to_metric_families(text) if f.name == metrics.BUILD_INFO
    ]
    (sample,) = family.samples
    assert sample.value == 1
    return dict(sample.labels)


def _decide_one(kube_client: kube.Kube, namespace: str, add_node: NodeFactory, plumb: Plumb) -> str:
    """The release on the trace line of one pod plumb places."""
    add_node(builders.make_node(f"{namespace}-n0").capacity(cpu="4"))
    kube_client.create_pod(builders.make_pod("p", namespace).scheduler("plumb").obj())
    (line,) = scheduled_traces(plumb, {f"{namespace}/p"})
    return line.kube


def _minor(version: str) -> int:
    return int(version.split(".")[1])


def test_plumb_decides_as_the_clusters_kube_scheduler(
    control_plane: controlplane.ControlPlane,
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    start_plumb: PlumbFactory,
) -> None:
    server = control_plane.kube_version  # e.g. v1.37.2
    minor = _minor(server)
    port = free_port()
    plumb = start_plumb("--metrics-port", str(port), "--metrics-address", "127.0.0.1")
    assert _decide_one(kube_client, namespace, add_node, plumb) == f"1.{minor}"
    assert f"deciding as kube-scheduler v1.{minor} (the API server is {server})" in plumb.output()
    info = _build_info(port)
    assert (info["emulated_version"], info["server_version"]) == (f"1.{minor}", server)


def test_the_emulated_version_pins_another_release(
    control_plane: controlplane.ControlPlane,
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    start_plumb: PlumbFactory,
) -> None:
    server = control_plane.kube_version
    pinned = "1.36" if _minor(server) != 36 else "1.34"
    port = free_port()
    plumb = start_plumb(
        "--emulated-version",
        pinned,
        "--metrics-port",
        str(port),
        "--metrics-address",
        "127.0.0.1",
    )
    assert _decide_one(kube_client, namespace, add_node, plumb) == pinned
    assert f"deciding as kube-scheduler v{pinned} (pinned by --emulated-version)" in plumb.output()
    info = _build_info(port)
    assert (info["emulated_version"], info["server_version"]) == (pinned, server)
