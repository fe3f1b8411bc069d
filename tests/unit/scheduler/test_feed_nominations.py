"""Room held for nominated pods follows what the cluster says: the nominated node moves and
clears with the pod's status (kube-scheduler's UpdateNominatedPod), and a nominated pod that a
re-list no longer has holds nothing (a deletion missed by the watch is a deletion)."""

from __future__ import annotations

from typing import Any

from plumb_dev.testing.builders import make_node, make_pod
from tests.support.fakes import FakeApi, ManualClock, make_scheduler

HIGH = 1000
# Waiting pods of plumb's, each asking a whole node's cpu; vip as nominated to node-a or node-b.
SMALL = (
    make_pod("small", "shop")
    .uid("u-small")
    .created("2026-12-01T00:00:00Z")
    .scheduler("plumb")
    .req(cpu="4")
    .priority(0)
)
BIG = (
    make_pod("big", "shop")
    .uid("u-big")
    .created("2026-12-01T00:00:00Z")
    .scheduler("plumb")
    .req(cpu="4")
    .priority(0)
)
VIP = (
    make_pod("vip", "shop")
    .uid("u-vip")
    .created("2026-12-01T00:00:00Z")
    .scheduler("plumb")
    .req(cpu="4")
    .priority(HIGH)
)
VIP_ON_A = VIP.copy().nominated("node-a")
VIP_ON_B = VIP.copy().nominated("node-b")


def _two_nodes() -> list[dict[str, Any]]:
    return [
        make_node("node-a").capacity(cpu="4").obj(),
        make_node("node-b").capacity(cpu="4").obj(),
    ]


async def _schedule_small(s: Any, api: FakeApi) -> list[tuple[str, str]]:
    """A priority-0 pod asking for node-a's whole room or node-b's: where it went."""
    s.feed.on_pod("ADDED", SMALL.obj())
    await s.schedule_batch(await s.queue.pop_batch(8))
    await s.drain()
    return list(api.binds)


async def test_a_standby_follows_the_nominated_node_when_the_leader_moves_it() -> None:
    api, clock = FakeApi(), ManualClock()
    s = make_scheduler(api, clock)
    s.feed.resync(_two_nodes(), [])
    s.feed.on_pod("ADDED", VIP_ON_A.obj())
    s.queue.delete("u-vip")  # the leader decides vip; this replica only holds its room
    # The leader preempted again, on node-b: the status moved.
    s.feed.on_pod("MODIFIED", VIP_ON_B.obj())
    assert s.state.nominations.node_of("u-vip") == "node-b"
    s.queue.delete("u-vip")
    # node-a's room is free for a lower-priority pod; node-b's is held.
    assert await _schedule_small(s, api) == [("small", "node-a")]


async def test_a_nomination_cleared_in_status_holds_no_room() -> None:
    api, clock = FakeApi(), ManualClock()
    s = make_scheduler(api, clock)
    s.feed.resync([make_node("node-a").capacity(cpu="4").obj()], [])
    s.feed.on_pod("ADDED", VIP_ON_A.obj())
    s.feed.on_pod("MODIFIED", VIP.obj())  # the leader cleared it
    assert s.state.nominations.node_of("u-vip") is None
    s.queue.delete("u-vip")
    assert await _schedule_small(s, api) == [("small", "node-a")]


async def test_a_nomination_made_here_stays_while_the_watch_has_not_shown_it() -> None:
    # kube-scheduler keeps the in-memory node only when neither record has a status node.
    api, clock = FakeApi(), ManualClock()
    s = make_scheduler(api, clock)
    s.feed.resync(_two_nodes(), [])
    s.feed.on_pod("ADDED", VIP.obj())
    pod = s.queue.pod("u-vip")
    assert pod is not None
    s.state.nominations.nominate(pod, "node-a")
    s.feed.on_pod("MODIFIED", VIP.obj())  # an update from before the status write
    assert s.state.nominations.node_of("u-vip") == "node-a"


async def test_a_nominated_pod_deleted_while_the_watch_was_down_frees_its_room() -> None:
    api, clock = FakeApi(), ManualClock()
    s = make_scheduler(api, clock)
    s.feed.resync([make_node("node-a").capacity(cpu="4").obj()], [])
    s.feed.on_pod("ADDED", VIP_ON_A.obj())
    assert s.state.nominations.node_of("u-vip") == "node-a"
    clock.now += 1
    # The watch was down while vip was deleted; the re-list no longer has it.
    assert s.feed.sweep(s.feed.mark(), None, []) == 1
    assert s.state.nominations.node_of("u-vip") is None
    assert "u-vip" not in s.queue
    assert await _schedule_small(s, api) == [("small", "node-a")]


async def test_a_pod_being_decided_when_a_relist_misses_it_is_dropped_with_its_attempt() -> None:
    api, clock = FakeApi(), ManualClock()
    s = make_scheduler(api, clock)
    s.feed.resync([make_node("node-a").capacity(cpu="1").obj()], [])
    s.feed.on_pod("ADDED", BIG.obj())
    entries = await s.queue.pop_batch(8)  # being decided
    clock.now += 1
    s.feed.sweep(s.feed.mark(), None, [])  # deleted while the watch was down
    await s.schedule_batch(entries)  # it fits nowhere: it must not wait on as a ghost
    assert "u-big" not in s.queue
