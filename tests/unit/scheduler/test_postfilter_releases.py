"""Preemption as each kube-scheduler release does it, with a scripted API: the words a preemption
adds to FailedScheduling and PodScheduled (v1.37), victims already being deleted (v1.35), the
budgets spent up to the first violation (v1.37), and the room a gated pod's nomination holds
(v1.37)."""

from __future__ import annotations

from typing import Any

import pytest

from plumb.framework import emulation
from plumb.scheduler import Scheduler
from plumb_dev.testing.builders import make_node, make_pod
from tests.support.fakes import FakeApi, ManualClock, make_scheduler

HIGH = 1000
DIAGNOSIS = "0/2 nodes are available: 2 Insufficient cpu."


def _resident(name: str, node: str, cpu: str, priority: int = 0) -> dict[str, Any]:
    return make_pod(name, "shop").uid(f"u-{name}").node(node).req(cpu=cpu).priority(priority).obj()


def _pending(name: str, cpu: str, priority: int) -> Any:
    return (
        make_pod(name, "shop").uid(f"u-{name}").scheduler("plumb").req(cpu=cpu).priority(priority)
    )


async def _cycle(s: Scheduler) -> None:
    await s.schedule_batch(await s.queue.pop_batch(8))
    await s.drain()


def _notes(api: FakeApi, pod: str) -> list[str]:
    return [
        e["note"]
        for e in api.events
        if e["reason"] == "FailedScheduling" and e["regarding"]["name"] == pod
    ]


def _conditions(api: FakeApi, pod: str) -> list[str]:
    """The messages of the PodScheduled conditions written to the pod."""
    return [
        c["message"]
        for name, patch in api.patches
        if name == pod
        for c in patch["status"].get("conditions") or []
        if c["type"] == "PodScheduled"
    ]


@pytest.mark.parametrize("minor", [34, 36, 37])
async def test_a_preemption_that_finds_a_node_says_so_from_v1_37(minor: int) -> None:
    api, clock = FakeApi(), ManualClock()
    s = make_scheduler(api, clock, kube=emulation.emulate(minor))
    nodes = [make_node("a").capacity(cpu="2").obj(), make_node("b").capacity(cpu="2").obj()]
    s.feed.resync(nodes, [_resident("a-5", "a", "2", 5), _resident("b-0", "b", "2")])
    s.feed.on_pod("ADDED", _pending("vip", "2", HIGH).obj())
    await _cycle(s)
    assert api.deletes == [("b-0", "u-b-0")]
    words = {
        34: "",
        36: "",
        37: " preemption: found a potential placement for pod on node b, preempting 1 victims",
    }[minor]
    assert _notes(api, "vip") == [DIAGNOSIS + words]
    assert _conditions(api, "vip") == [DIAGNOSIS + words]


@pytest.mark.parametrize("minor", [34, 35, 37])
async def test_a_victim_already_being_deleted_is_left_alone_from_v1_35(minor: int) -> None:
    """Node a (2 cpu) holds "old" (priority 0), already being deleted by its owner, and "low"
    (priority 500) is nominated there; node b holds a pod of priority 10. vip (2 cpu) picks a,
    whose only victim is "old". v1.34 preempts it again (condition, deletion, event) and clears
    low's nomination; from v1.35 kube-scheduler makes no call for a victim being deleted, and
    with no victim left to delete it does nothing more: low stays nominated."""
    api, clock = FakeApi(), ManualClock()
    s = make_scheduler(api, clock, kube=emulation.emulate(minor))
    old = make_pod("old", "shop").uid("u-old").node("a").req(cpu="2").terminating()
    nodes = [make_node("a").capacity(cpu="2").obj(), make_node("b").capacity(cpu="2").obj()]
    s.feed.resync(nodes, [old.obj(), _resident("b-10", "b", "2", 10)])
    s.feed.on_pod("ADDED", _pending("low", "2", 500).nominated("a").obj())
    s.queue.delete("u-low")  # it waits elsewhere: only its nomination matters here
    s.feed.on_pod("ADDED", _pending("vip", "2", HIGH).obj())
    await _cycle(s)
    assert s.state.nominations.node_of("u-vip") == "a"
    preempted = [e["regarding"]["name"] for e in api.events if e["reason"] == "Preempted"]
    cleared = [n for n, p in api.patches if p["status"].get("nominatedNodeName", "") is None]
    seen = {
        "deleted": api.deletes,
        "Preempted": preempted,
        "low nominated": s.state.nominations.node_of("u-low"),
        "cleared": cleared,
    }
    if minor == 34:
        assert seen == {
            "deleted": [("old", "u-old")],
            "Preempted": ["old"],
            "low nominated": None,
            "cleared": ["low"],
        }
    else:
        assert seen == {"deleted": [], "Preempted": [], "low nominated": "a", "cleared": []}


@pytest.mark.parametrize("minor", [36, 37])
async def test_a_pod_overdrawing_one_budget_spares_the_next_from_v1_37(minor: int) -> None:
    """One node of 3 cpu with three 1-cpu pods: "both" (priority 3) under budgets "a-none"
    (no disruption allowed) and "b-one" (one allowed), "keep" (2) under none, "second" (1)
    under b-one. vip (1 cpu) needs one gone. Budgets are spent most important pod first, in
    name order: "both" overdraws a-none. Up to v1.36 it spends b-one's disruption too, so
    "second" violates b-one: the violators are reprieved first ("both", then "second"), and
    "keep" goes. From v1.37 "both" stops at a-none, b-one's disruption is left for "second",
    which does not violate: reprieve keeps "both", then "keep" (more important), and
    "second" goes."""
    api, clock = FakeApi(), ManualClock()
    s = make_scheduler(api, clock, kube=emulation.emulate(minor))
    on_n = make_pod("both", "shop").uid("u-both").node("n").req(cpu="1").priority(3)
    pods = [
        on_n.label("a", "x").label("b", "y").obj(),
        _resident("keep", "n", "1", 2),
        make_pod("second", "shop")
        .uid("u-second")
        .node("n")
        .req(cpu="1")
        .priority(1)
        .label("b", "y")
        .obj(),
    ]
    s.feed.resync([make_node("n").capacity(cpu="3").obj()], pods)
    # Fed out of name order: plumb spends them in name order whatever the watch's order.
    for name, key, allowed in (("b-one", "b", 1), ("a-none", "a", 0)):
        s.feed.on_budget(
            "ADDED",
            {
                "metadata": {"name": name, "namespace": "shop"},
                "spec": {"selector": {"matchLabels": {key: "x" if key == "a" else "y"}}},
                "status": {"disruptionsAllowed": allowed},
            },
        )
    s.feed.on_pod("ADDED", _pending("vip", "1", HIGH).obj())
    await _cycle(s)
    assert api.deletes == {36: [("keep", "u-keep")], 37: [("second", "u-second")]}[minor]


@pytest.mark.parametrize("minor", [36, 37])
async def test_a_gated_pod_seen_nominated_holds_its_room_from_v1_37(minor: int) -> None:
    """A gated pod (priority 1000, 4 cpu) first seen with status.nominatedNodeName "a" (a
    restart, or a nomination written before): from v1.37 its room on a is held, so a
    priority-0 pod asking 1 cpu fits nowhere; up to v1.36 kube-scheduler's queue nominated
    only the pods it let in, so the small pod takes a. An update of the gated pod (any: a label
    here) makes the older releases follow its status too."""
    api, clock = FakeApi(), ManualClock()
    s = make_scheduler(api, clock, kube=emulation.emulate(minor))
    s.feed.resync([make_node("a").capacity(cpu="4").obj()], [])
    gated = _pending("gated", "4", HIGH).gate("example.com/wait").nominated("a")
    s.feed.on_pod("ADDED", gated.obj())
    assert s.state.nominations.node_of("u-gated") == {36: None, 37: "a"}[minor]
    s.feed.on_pod("ADDED", _pending("small", "1", 0).obj())
    await _cycle(s)
    assert api.binds == {36: [("small", "a")], 37: []}[minor]
    s.feed.on_pod("MODIFIED", gated.label("touched", "yes").obj())
    assert s.state.nominations.node_of("u-gated") == "a"
