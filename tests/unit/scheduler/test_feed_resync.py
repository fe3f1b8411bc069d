"""The periodic re-list: what was deleted while a watch was down is forgotten; what changed
after the list began is kept."""

from __future__ import annotations

from typing import Any

from plumb.backend import cache as cache_module
from plumb.testing.builders import make_node, make_pod
from tests.support.fakes import Clock, FakeApi, make_scheduler


def _pod(name: str, node: str = "") -> dict[str, Any]:
    body = make_pod(name, "ns").scheduler("plumb").req(cpu="1").obj()
    body["metadata"]["uid"] = name
    body["metadata"]["creationTimestamp"] = "2026-11-30T00:00:00Z"
    if node:
        body["spec"]["nodeName"] = node
    return body


def test_sweep_forgets_what_the_list_lacks_but_keeps_later_writes() -> None:
    clock = Clock()
    s = make_scheduler(FakeApi(), clock)
    nodes = [make_node("n1").obj(), make_node("n2").obj()]
    s.feed.resync(nodes, [_pod("kept", "n1"), _pod("ghost", "n1"), _pod("pending-ghost")])
    assert s.cache.state("ghost") is cache_module.PodState.ADDED
    assert "pending-ghost" in s.queue

    clock.now += 1
    mark = s.feed.mark()
    # While the list is in flight, the watch reports a new bound pod and a new node.
    s.feed.on_pod("ADDED", _pod("late", "n1"))
    s.feed.on_node("ADDED", make_node("n3").obj())
    listed_nodes = [make_node("n1").obj()]  # n2 was deleted while the watch was down
    listed_pods = [_pod("kept", "n1")]  # ghost and pending-ghost were deleted too
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
    clock = Clock()
    s = make_scheduler(FakeApi(), clock)
    s.feed.resync(
        [make_node("n1").obj(), make_node("n2").obj()], [_pod("kept", "n1"), _pod("gone", "n2")]
    )
    clock.now += 1
    swept = s.feed.sweep(s.feed.mark(), None, [_pod("kept", "n1")])

    assert swept == 1
    assert s.cache.nodes.names() == ["n1", "n2"]
    assert s.cache.state("gone") is None
    assert s.cache.nodes.requested("n2")["pods"] == 0


def test_a_namespace_relist_forgets_namespaces_the_list_lacks() -> None:
    s = make_scheduler(FakeApi(), Clock())
    s.feed.on_namespace("ADDED", {"metadata": {"name": "kept", "labels": {"team": "a"}}})
    s.feed.on_namespace("ADDED", {"metadata": {"name": "gone", "labels": {"team": "b"}}})
    s.feed.relist_namespaces([{"metadata": {"name": "kept", "labels": {"team": "c"}}}])
    assert s.cache.rows.namespace_labels == {"kept": {"team": "c"}}
