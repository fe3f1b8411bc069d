"""The periodic re-list: what was deleted while a watch was down is forgotten; what changed
after the list began is kept."""

from __future__ import annotations

from plumb.backend.cache import clustercache as cache_module
from plumb_dev.testing.builders import make_node, make_pod
from tests.support.fakes import FakeApi, ManualClock, make_scheduler

# Pods of plumb's, named by what becomes of them; the uid is the name.
PENDING_GHOST = (
    make_pod("pending-ghost", "ns")
    .uid("pending-ghost")
    .created("2026-11-30T00:00:00Z")
    .scheduler("plumb")
    .req(cpu="1")
)
KEPT = (
    make_pod("kept", "ns")
    .uid("kept")
    .created("2026-11-30T00:00:00Z")
    .scheduler("plumb")
    .req(cpu="1")
    .node("n1")
)
GHOST = (
    make_pod("ghost", "ns")
    .uid("ghost")
    .created("2026-11-30T00:00:00Z")
    .scheduler("plumb")
    .req(cpu="1")
    .node("n1")
)
LATE = (
    make_pod("late", "ns")
    .uid("late")
    .created("2026-11-30T00:00:00Z")
    .scheduler("plumb")
    .req(cpu="1")
    .node("n1")
)
GONE = (
    make_pod("gone", "ns")
    .uid("gone")
    .created("2026-11-30T00:00:00Z")
    .scheduler("plumb")
    .req(cpu="1")
    .node("n2")
)


def test_sweep_forgets_what_the_list_lacks_but_keeps_later_writes() -> None:
    clock = ManualClock()
    s = make_scheduler(FakeApi(), clock)
    nodes = [make_node("n1").obj(), make_node("n2").obj()]
    s.feed.resync(nodes, [KEPT.obj(), GHOST.obj(), PENDING_GHOST.obj()])
    assert s.cache.state("ghost") is cache_module.PodState.ADDED
    assert "pending-ghost" in s.queue

    clock.now += 1
    mark = s.feed.mark()
    # While the list is in flight, the watch reports a new bound pod and a new node.
    s.feed.on_pod("ADDED", LATE.obj())
    s.feed.on_node("ADDED", make_node("n3").obj())
    listed_nodes = [make_node("n1").obj()]  # n2 was deleted while the watch was down
    listed_pods = [KEPT.obj()]  # ghost and pending-ghost were deleted too
    swept = s.feed.sweep(mark, listed_nodes, listed_pods)

    assert swept == 3
    assert s.cache.nodes.names() == ["n1", "n3"]
    assert s.cache.state("ghost") is None
    assert "pending-ghost" not in s.queue
    assert s.cache.state("kept") is cache_module.PodState.ADDED
    assert s.cache.state("late") is cache_module.PodState.ADDED  # newer than the list
    assert s.cache.nodes.requested("n1")["pods"] == 2


def test_a_pods_only_list_sweeps_pods_and_leaves_every_node() -> None:
    # The pod watch re-lists pods alone when its resourceVersion expired; nodes are kopf's.
    clock = ManualClock()
    s = make_scheduler(FakeApi(), clock)
    s.feed.resync([make_node("n1").obj(), make_node("n2").obj()], [KEPT.obj(), GONE.obj()])
    clock.now += 1
    swept = s.feed.sweep(s.feed.mark(), None, [KEPT.obj()])

    assert swept == 1
    assert s.cache.nodes.names() == ["n1", "n2"]
    assert s.cache.state("gone") is None
    assert s.cache.nodes.requested("n2")["pods"] == 0


def test_a_namespace_relist_forgets_namespaces_the_list_lacks() -> None:
    s = make_scheduler(FakeApi(), ManualClock())
    s.feed.on_namespace("ADDED", {"metadata": {"name": "kept", "labels": {"team": "a"}}})
    s.feed.on_namespace("ADDED", {"metadata": {"name": "gone", "labels": {"team": "b"}}})
    s.feed.relist_namespaces([{"metadata": {"name": "kept", "labels": {"team": "c"}}}])
    assert s.cache.rows.namespace_labels == {"kept": {"team": "c"}}
