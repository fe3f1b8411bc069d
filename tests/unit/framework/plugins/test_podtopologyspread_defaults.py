"""kube-scheduler's system defaults: pods of a Service or controller, with no spread constraints
of their own, are spread softly by hostname (maxSkew 3) and zone (maxSkew 5)."""

from __future__ import annotations

from typing import Any

from plumb.backend.cache import clustercache as cache_module
from plumb.backend.cache import controllers
from plumb.backend.records import objects
from plumb.framework import cycle
from plumb_dev.testing.builders import expr, make_node, make_pod

# A pod of app=web with no spread constraints of its own.
INCOMING = objects.parse_pod(
    make_pod("new", "shop").uid("new").label("app", "web").req(cpu="100m").obj()
)


def _cluster() -> cache_module.Cache:
    c = cache_module.Cache()
    for name, zone in (("a1", "a"), ("b1", "b")):
        c.upsert_node(objects.parse_node(make_node(name).zone(zone).obj()))
    for i in range(3):
        old = (
            make_pod(f"old-{i}", "shop")
            .uid(f"old-{i}")
            .label("app", "web")
            .node("a1")
            .req(cpu="100m")
        )
        c.add_pod(objects.parse_pod(old.obj()))
    # b1 is emptier for LeastAllocated too; make a1 the roomier node so that only spreading
    # can prefer b1.
    c.upsert_node(objects.parse_node(make_node("a1").zone("a").capacity(cpu="64").obj()))
    return c


def _service(selector: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"namespace": "shop", "name": "web"}, "spec": {"selector": selector}}


def test_a_service_pod_is_spread_away_from_its_siblings() -> None:
    c = _cluster()
    assert cycle.schedule(INCOMING, c.snapshot(), c).node == "a1"  # no service: roomier node
    c.workloads.on_event(controllers.SERVICE, "ADDED", _service({"app": "web"}))
    decision = cycle.schedule(INCOMING, c.snapshot(), c)
    assert decision.node == "b1"
    assert decision.candidates[0].scores[4] == 100  # PodTopologySpread's normalised score


def test_a_service_that_does_not_select_the_pod_changes_nothing() -> None:
    c = _cluster()
    c.workloads.on_event(controllers.SERVICE, "ADDED", _service({"app": "db"}))
    assert cycle.schedule(INCOMING, c.snapshot(), c).node == "a1"


def test_a_pod_pinned_by_node_name_reports_the_other_nodes_as_prefiltered() -> None:
    c = _cluster()
    daemon = (
        make_pod("daemon", "shop")
        .uid("daemon")
        .req(cpu="100")
        .node_affinity(fields=[expr("metadata.name", "In", "b1")])
    )
    decision = cycle.schedule(objects.parse_pod(daemon.obj()), c.snapshot(), c)
    assert decision.message == (
        "0/2 nodes are available: 1 Insufficient cpu, "
        "1 node(s) didn't satisfy plugin(s) [NodeAffinity]."
    )


def test_a_relist_forgets_a_service_deleted_while_the_watch_was_down() -> None:
    c = _cluster()
    c.workloads.on_event(controllers.SERVICE, "ADDED", _service({"app": "web"}))
    c.workloads.replace(controllers.SERVICE, [])  # the list no longer has the service
    assert cycle.schedule(INCOMING, c.snapshot(), c).node == "a1"
    c.workloads.replace(controllers.SERVICE, [_service({"app": "web"})])
    assert cycle.schedule(INCOMING, c.snapshot(), c).node == "b1"
