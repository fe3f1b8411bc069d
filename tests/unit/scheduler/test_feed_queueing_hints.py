"""Which waiting pods a cluster event sends back to be retried, by what rejected them."""

from __future__ import annotations

from plumb import scheduler as scheduler_module
from plumb.backend import queue as queue_module
from plumb.backend.cache import clustercache as cache_module
from plumb.backend.cache import dra
from plumb.backend.records import objects
from plumb.framework import cycle
from plumb.framework.plugins import nodeaffinity, noderesourcesfit, tainttoleration
from plumb_dev.testing.builders import NodeBuilder, PodBuilder, make_node, make_pod


def _waiting(q: queue_module.SchedulingQueue, name: str, plugins: frozenset[str]) -> str:
    q.add(objects.parse_pod(make_pod(name).uid(name).obj()))
    entry = q._pop_active()
    assert entry is not None
    q.unschedulable(entry.pod.uid, plugins)
    return entry.pod.uid


def test_an_event_moves_only_pods_whose_rejecting_plugin_it_touches() -> None:
    now = [0.0]
    q = queue_module.SchedulingQueue(clock=lambda: now[0])
    cpu = _waiting(q, "needs-cpu", frozenset({noderesourcesfit.NAME}))
    label = _waiting(q, "needs-label", frozenset({nodeaffinity.NAME}))
    unknown = _waiting(q, "unknown", frozenset())
    now[0] += 60  # past any backoff
    q.move_all(frozenset({noderesourcesfit.NAME}))
    assert q.where(cpu) is queue_module.Where.ACTIVE
    assert q.where(label) is queue_module.Where.UNSCHEDULABLE
    assert q.where(unknown) is queue_module.Where.ACTIVE  # no record of why: any event helps
    q.move_all()
    assert q.where(label) is queue_module.Where.ACTIVE


def test_node_changes_name_the_plugins_they_can_help() -> None:
    def node(builder: NodeBuilder) -> objects.NodeInfo:
        return objects.parse_node(builder.obj())

    base = make_node("n").capacity(cpu="2")
    helps = scheduler_module.node_change_helps
    # DynamicResources registers UpdateNodeAllocatable too.
    assert helps(node(base), node(make_node("n").capacity(cpu="4"))) == {
        noderesourcesfit.NAME,
        dra.PLUGIN,
    }
    assert nodeaffinity.NAME in helps(node(base), node(make_node("n").capacity(cpu="2").zone("a")))
    tainted = make_node("n").capacity(cpu="2").taint("dedicated", "gpu", "NoSchedule")
    assert tainttoleration.NAME in helps(node(tainted), node(base))
    assert helps(node(base), node(make_node("n").capacity(cpu="2"))) == frozenset()


def test_an_event_during_the_attempt_retries_the_pod_instead_of_parking_it() -> None:
    now = [0.0]
    q = queue_module.SchedulingQueue(clock=lambda: now[0])
    q.add(objects.parse_pod(make_pod("racer").uid("racer").obj()))
    entry = q._pop_active()
    assert entry is not None
    # A node arrives while the kernel decides on a snapshot without it ...
    q.move_all()
    # ... so the failure it reports must not park the pod until some later event.
    q.unschedulable("racer", frozenset({noderesourcesfit.NAME}))
    assert q.where("racer") is queue_module.Where.BACKOFF


def test_an_unrelated_event_during_the_attempt_still_parks_the_pod() -> None:
    q = queue_module.SchedulingQueue(clock=lambda: 0.0)
    q.add(objects.parse_pod(make_pod("racer").uid("racer").obj()))
    assert q._pop_active() is not None
    q.move_all(frozenset({tainttoleration.NAME}))
    q.unschedulable("racer", frozenset({noderesourcesfit.NAME}))
    assert q.where("racer") is queue_module.Where.UNSCHEDULABLE


def test_a_decision_names_the_plugins_that_rejected_nodes_and_if_preemption_could_help() -> None:
    c = cache_module.Cache()
    c.upsert_node(objects.parse_node(make_node("small").capacity(cpu="2").obj()))
    c.upsert_node(objects.parse_node(make_node("tainted").taint("dedicated", "gpu").obj()))
    c.add_pod(
        objects.parse_pod(make_pod("resident").uid("resident").node("small").req(cpu="1").obj())
    )

    def decide(builder: PodBuilder) -> cycle.Decision:
        return cycle.schedule(objects.parse_pod(builder.obj()), c.snapshot(), c)

    big = decide(make_pod("big").uid("big").req(cpu="2"))
    assert big.plugins == {noderesourcesfit.NAME, tainttoleration.NAME}
    assert not big.unresolvable  # freeing cpu on "small" could make room
    # More cpu than "small" has at all: no eviction helps (kube-scheduler's NodeResourcesFit).
    assert decide(make_pod("huge").uid("huge").req(cpu="3")).unresolvable
    pinned = decide(make_pod("pinned").uid("pinned").node_selector("zone", "nowhere"))
    assert pinned.plugins == {nodeaffinity.NAME, tainttoleration.NAME}
    assert pinned.unresolvable
