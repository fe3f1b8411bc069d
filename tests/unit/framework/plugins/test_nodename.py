"""NodeName: a pending pod that names a node in spec.nodeName may only go to that node."""

from __future__ import annotations

from plumb.backend.records import objects
from plumb.framework.plugins import nodename
from plumb_dev.testing.builders import PodBuilder, make_node, make_pod
from tests.support.small_clusters import statics

CLUSTER = statics(make_node("n1"), make_node("n2"), make_node("n3"))


def failing(pod: PodBuilder) -> list[str]:
    fails = nodename.filter(objects.parse_pod(pod.obj()), CLUSTER)
    return [name for name, failed in zip(CLUSTER.names, fails, strict=True) if failed]


def test_a_pod_without_node_name_may_go_anywhere() -> None:
    assert failing(make_pod("web")) == []


def test_a_pod_naming_a_node_may_only_go_there() -> None:
    assert failing(make_pod("web").node("n2")) == ["n1", "n3"]


def test_a_pod_naming_a_node_that_does_not_exist_fits_nowhere() -> None:
    assert failing(make_pod("web").node("gone")) == ["n1", "n2", "n3"]


def test_reason_and_plugin_name_are_kube_schedulers() -> None:
    assert nodename.NAME == "NodeName"
    assert nodename.MISMATCH == "node(s) didn't match the requested node name"
    assert nodename.UNRESOLVABLE is True
