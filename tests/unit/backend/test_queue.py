"""Tests for plumb.backend.queue: pop order, gates, backoff and the unschedulable pool.

Time is a fake clock handed to the queue; the only real waiting is the short timeout that shows
a pop is blocked.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime

import pytest

from plumb.backend import queue as queueing
from plumb.backend.queue import Entry, SchedulingQueue, Where
from plumb.backend.records import objects
from plumb_dev.testing.builders import make_pod
from tests.support.fakes import ManualClock

BLOCKED = 0.02  # seconds a pop must stay waiting for the test to call it blocked


def pending(
    name: str,
    *,
    uid: str | None = None,
    priority: int = 0,
    created: str = "2024-01-01T00:00:00Z",
    gate: str | None = None,
    cpu: str = "1",
    resource_version: str = "1",
) -> objects.PodInfo:
    builder = make_pod(name).uid(uid or f"uid-{name}").created(created)
    builder = builder.resource_version(resource_version).req(cpu=cpu).priority(priority)
    if gate is not None:
        builder = builder.gate(gate)
    return objects.parse_pod(builder.obj())


async def pop_now(q: SchedulingQueue) -> Entry | None:
    """The entry pop returns without waiting, or None when it blocks."""
    try:
        return await asyncio.wait_for(q.pop(), BLOCKED)
    except TimeoutError:
        return None


async def pop_names(q: SchedulingQueue) -> list[str]:
    """Pop until the queue blocks; the names in pop order."""
    names = []
    while (entry := await pop_now(q)) is not None:
        names.append(entry.pod.name)
    return names


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def q(clock: ManualClock) -> SchedulingQueue:
    return SchedulingQueue(clock=clock)


async def fail_unschedulable(q: SchedulingQueue, name: str) -> Entry:
    entry = await pop_now(q)
    assert entry is not None
    assert entry.pod.name == name
    q.unschedulable(entry.pod.uid)
    return entry


# Order ----------------------------------------------------------------------------------------


async def test_pop_order_is_priority_then_age_then_arrival(q: SchedulingQueue) -> None:
    q.add(pending("low", priority=0, created="2024-01-01T00:00:00Z"))
    q.add(pending("negative", priority=-5, created="2023-01-01T00:00:00Z"))
    q.add(pending("high-new", priority=10, created="2024-01-01T00:05:00Z"))
    q.add(pending("mid-b", uid="b", priority=5, created="2024-01-01T00:02:00Z"))
    q.add(pending("high-old", priority=10, created="2024-01-01T00:01:00Z"))
    q.add(pending("mid-a", uid="a", priority=5, created="2024-01-01T00:02:00Z"))
    assert await pop_names(q) == ["high-old", "high-new", "mid-b", "mid-a", "low", "negative"]


async def test_pods_created_within_one_second_pop_in_the_order_they_arrived(
    q: SchedulingQueue,
) -> None:
    # creationTimestamp has whole seconds: a burst shares one. kube-scheduler's queue timestamp
    # is its own clock at the add, so the burst goes in the order the watch delivered it (the
    # order of creation); a uid tie-break would pop it in a random order.
    names = [f"burst-{i}" for i in range(6)]
    for name, uid in zip(names, ["f", "b", "e", "a", "d", "c"], strict=True):
        q.add(pending(name, uid=uid, created="2024-01-01T00:00:00Z"))
    q.add(pending("earlier", uid="z", created="2023-12-31T23:59:59Z"))  # listed late, older
    assert await pop_names(q) == ["earlier", *names]


async def test_an_update_keeps_a_pods_place_in_line(q: SchedulingQueue) -> None:
    q.add(pending("first", uid="b", created="2024-01-01T00:00:00Z"))
    q.add(pending("second", uid="a", created="2024-01-01T00:00:00Z"))
    q.add(pending("first", uid="b", created="2024-01-01T00:00:00Z", cpu="2"))  # in place
    assert await pop_names(q) == ["first", "second"]


async def test_popped_pod_is_in_flight_and_counted(q: SchedulingQueue) -> None:
    q.add(pending("web"))
    entry = await pop_now(q)
    assert entry is not None
    assert entry.attempts == 1
    assert q.where("uid-web") is Where.IN_FLIGHT
    assert q.counts()[Where.IN_FLIGHT] == 1
    q.done("uid-web")
    assert "uid-web" not in q
    assert len(q) == 0


async def test_re_adding_updates_in_place(q: SchedulingQueue) -> None:
    q.add(pending("web", cpu="1"))
    q.add(pending("web", cpu="2"))
    q.add(pending("web", cpu="3"))
    assert len(q) == 1
    entry = await pop_now(q)
    assert entry is not None
    assert dict(entry.pod.requests) == {"cpu": 3000}
    assert await pop_now(q) is None


async def test_raised_priority_moves_a_pod_ahead(q: SchedulingQueue) -> None:
    q.add(pending("old", created="2024-01-01T00:00:00Z"))
    q.add(pending("new", created="2024-01-01T00:01:00Z"))
    q.add(pending("new", created="2024-01-01T00:01:00Z", priority=100))
    assert await pop_names(q) == ["new", "old"]


async def test_lowered_priority_moves_a_pod_back(q: SchedulingQueue) -> None:
    q.add(pending("a", priority=10))
    q.add(pending("b", priority=5))
    q.add(pending("a", priority=0))
    assert await pop_names(q) == ["b", "a"]


# Waiting --------------------------------------------------------------------------------------


async def test_pop_waits_until_a_pod_is_added(q: SchedulingQueue) -> None:
    waiter = asyncio.ensure_future(q.pop())
    done, _ = await asyncio.wait({waiter}, timeout=BLOCKED)
    assert not done
    q.add(pending("web"))
    entry = await asyncio.wait_for(waiter, 0.2)
    assert entry.pod.name == "web"


async def test_gated_pod_waits_until_its_gates_are_removed(q: SchedulingQueue) -> None:
    q.add(pending("web", gate="example.com/quota"))
    assert q.where("uid-web") is Where.GATED
    assert await pop_now(q) is None
    q.add(pending("web", gate="example.com/quota"))  # still gated
    assert await pop_now(q) is None
    waiter = asyncio.ensure_future(q.pop())
    await asyncio.sleep(0)
    q.add(pending("web"))
    entry = await asyncio.wait_for(waiter, 0.2)
    assert entry.pod.name == "web"
    assert not entry.pod.gated


async def test_delete_drops_a_pod(q: SchedulingQueue) -> None:
    q.add(pending("a"))
    q.add(pending("b"))
    q.add(pending("gated", gate="g"))
    q.delete("uid-a")
    q.delete("uid-gated")
    q.delete("uid-never-seen")
    assert await pop_names(q) == ["b"]
    assert len(q) == 1  # b, in flight


async def test_deleted_unschedulable_pod_does_not_come_back(
    q: SchedulingQueue, clock: ManualClock
) -> None:
    q.add(pending("web"))
    await fail_unschedulable(q, "web")
    q.delete("uid-web")
    clock.advance(600)
    q.move_all()
    assert await pop_now(q) is None
    assert len(q) == 0


async def test_delete_then_add_again_gives_one_entry(q: SchedulingQueue) -> None:
    q.add(pending("web"))
    q.delete("uid-web")
    q.add(pending("web"))
    assert await pop_names(q) == ["web"]


# Unschedulable pods and backoff ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("attempts", "seconds"), [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (5, 10.0), (30, 10.0)]
)
def test_backoff_doubles_up_to_ten_seconds(attempts: int, seconds: float) -> None:
    assert SchedulingQueue().backoff_duration(attempts) == seconds
    assert queueing.MAX_BACKOFF == 10.0


async def test_unschedulable_pod_waits_for_a_cluster_event(
    q: SchedulingQueue, clock: ManualClock
) -> None:
    q.add(pending("web"))
    await fail_unschedulable(q, "web")
    assert q.where("uid-web") is Where.UNSCHEDULABLE
    clock.advance(60)  # long past its backoff, but nothing changed in the cluster
    assert await pop_now(q) is None
    q.move_all()
    assert q.where("uid-web") is Where.ACTIVE
    entry = await pop_now(q)
    assert entry is not None
    assert entry.attempts == 2


async def test_a_pod_tried_again_goes_behind_the_pods_that_arrived_before_it_failed(
    clock: ManualClock,
) -> None:
    # kube-scheduler refreshes a pod's queue timestamp on each failure: an old pod that keeps
    # failing cannot jump the line ahead of newer pods for ever.
    epoch = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC).timestamp()
    wall = [epoch + 60]
    q = SchedulingQueue(clock=clock, wall=lambda: wall[0])
    q.add(pending("old", created="2026-12-01T11:00:00Z"))
    await fail_unschedulable(q, "old")  # failed at 12:01
    q.add(pending("new", created="2026-12-01T12:00:30Z"))  # arrived before that failure
    q.add(pending("newest", created="2026-12-01T12:02:00Z"))  # after it
    clock.advance(60)
    q.move_all()
    assert await pop_names(q) == ["new", "old", "newest"]


async def test_a_move_for_one_namespace_leaves_the_others_waiting(
    q: SchedulingQueue, clock: ManualClock
) -> None:
    # A SchedulingPolicy event moves only its namespace's pods: moving every namespace's kept
    # a thousand unschedulable pods cycling ahead of pods that could be placed.
    shop = dataclasses.replace(pending("web"), namespace="shop")
    q.add(shop)
    q.add(pending("db"))
    await fail_unschedulable(q, "web")
    await fail_unschedulable(q, "db")
    clock.advance(60)
    q.move_all(namespace="shop")
    assert q.where("uid-web") is Where.ACTIVE
    assert q.where("uid-db") is Where.UNSCHEDULABLE


async def test_move_all_backs_off_a_pod_that_just_failed(
    q: SchedulingQueue, clock: ManualClock
) -> None:
    q.add(pending("web"))
    await fail_unschedulable(q, "web")  # attempt 1: backoff 1 s from now
    clock.advance(0.5)
    q.move_all()
    assert q.where("uid-web") is Where.BACKOFF
    assert await pop_now(q) is None
    clock.advance(0.5)
    entry = await pop_now(q)
    assert entry is not None
    assert entry.attempts == 2

    q.unschedulable("uid-web")  # attempt 2: backoff 2 s
    clock.advance(1.5)
    q.move_all()
    assert await pop_now(q) is None
    clock.advance(0.25)
    assert await pop_now(q) is None
    clock.advance(0.25)
    assert await pop_names(q) == ["web"]


async def test_backoff_is_capped_at_ten_seconds(q: SchedulingQueue, clock: ManualClock) -> None:
    q.add(pending("web"))
    for _ in range(6):
        entry = await pop_now(q)
        assert entry is not None
        q.backoff(entry.pod.uid)
        clock.advance(10)
    entry = await pop_now(q)
    assert entry is not None
    assert entry.attempts == 7  # uncapped, its backoff would be 64 s
    q.unschedulable("uid-web")
    clock.advance(9.5)
    q.move_all()
    assert await pop_now(q) is None
    clock.advance(0.5)
    assert await pop_names(q) == ["web"]


async def test_unschedulable_pods_come_back_after_five_minutes(
    q: SchedulingQueue, clock: ManualClock
) -> None:
    q.add(pending("first"))
    q.add(pending("second", created="2024-01-02T00:00:00Z"))
    await fail_unschedulable(q, "first")
    clock.advance(60)
    await fail_unschedulable(q, "second")
    clock.advance(239.5)
    assert await pop_now(q) is None
    clock.advance(0.5)  # five minutes since "first" failed, not yet for "second"
    assert await pop_names(q) == ["first"]
    assert q.where("uid-second") is Where.UNSCHEDULABLE
    clock.advance(60)
    assert await pop_names(q) == ["second"]


async def test_update_of_an_unschedulable_pod_retries_it(q: SchedulingQueue) -> None:
    q.add(pending("web", cpu="8"))
    await fail_unschedulable(q, "web")
    q.add(pending("web", cpu="1"))
    entry = await pop_now(q)
    assert entry is not None
    assert dict(entry.pod.requests) == {"cpu": 1000}


async def test_update_in_flight_makes_a_failure_retry(
    q: SchedulingQueue, clock: ManualClock
) -> None:
    q.add(pending("web", cpu="8"))
    entry = await pop_now(q)
    assert entry is not None
    q.add(pending("web", cpu="1"))  # arrives while the attempt is running
    assert q.where("uid-web") is Where.IN_FLIGHT
    assert len(q) == 1
    q.unschedulable("uid-web")
    assert q.where("uid-web") is Where.BACKOFF
    clock.advance(1)
    entry = await pop_now(q)
    assert entry is not None
    assert dict(entry.pod.requests) == {"cpu": 1000}
    # The next failure, with no update in flight, waits for a cluster event again.
    q.unschedulable("uid-web")
    clock.advance(60)
    assert await pop_now(q) is None
    assert q.where("uid-web") is Where.UNSCHEDULABLE


async def test_status_only_change_in_flight_is_not_an_update(
    q: SchedulingQueue, clock: ManualClock
) -> None:
    q.add(pending("web"))
    entry = await pop_now(q)
    assert entry is not None
    # Our own PodScheduled condition patch comes back through the watch: a new resourceVersion,
    # same spec. Retrying at once on it would loop.
    q.add(pending("web", resource_version="2"))
    q.unschedulable("uid-web")
    assert q.where("uid-web") is Where.UNSCHEDULABLE
    clock.advance(60)
    assert await pop_now(q) is None


async def test_failure_of_a_pod_deleted_in_flight_is_ignored(q: SchedulingQueue) -> None:
    q.add(pending("web"))
    await pop_now(q)
    q.delete("uid-web")
    q.unschedulable("uid-web")
    q.backoff("uid-web")
    assert len(q) == 0
    q.move_all()
    assert await pop_now(q) is None


# Retry after a failed bind --------------------------------------------------------------------


async def test_retry_backs_off_and_keeps_attempts(q: SchedulingQueue, clock: ManualClock) -> None:
    q.add(pending("web"))
    entry = await pop_now(q)
    assert entry is not None
    q.backoff(entry.pod.uid)
    clock.advance(1)
    entry = await pop_now(q)
    assert entry is not None
    assert entry.attempts == 2
    q.done(entry.pod.uid)  # assumed; the bind runs in the background and fails
    assert "uid-web" not in q

    q.retry(entry)
    assert q.where("uid-web") is Where.BACKOFF
    clock.advance(1.5)  # attempt 2: backoff 2 s
    assert await pop_now(q) is None
    clock.advance(0.5)
    entry = await pop_now(q)
    assert entry is not None
    assert entry.attempts == 3


async def test_retry_is_ignored_when_the_pod_came_back(q: SchedulingQueue) -> None:
    q.add(pending("web"))
    entry = await pop_now(q)
    assert entry is not None
    q.done(entry.pod.uid)
    q.add(pending("web", cpu="2"))  # the watch saw the pod still pending
    q.retry(entry)
    assert q.where("uid-web") is Where.ACTIVE
    popped = await pop_now(q)
    assert popped is not None
    assert dict(popped.pod.requests) == {"cpu": 2000}
    assert await pop_now(q) is None


async def test_a_batch_ends_where_the_group_changes(q: SchedulingQueue, clock: ManualClock) -> None:
    # Pods governed by different policies are scored with different weights: never one batch.
    for i, name in enumerate(["web-1", "web-2", "db-1", "web-3"]):
        q.add(pending(name, created=f"2024-01-01T00:00:0{i}Z"))

    def group(pod: objects.PodInfo) -> str:
        return pod.name.split("-")[0]

    batches = [[e.pod.name for e in await q.pop_batch(8, group=group)] for _ in range(3)]
    assert batches == [["web-1", "web-2"], ["db-1"], ["web-3"]]


def test_a_configured_backoff_starts_and_stops_where_it_says() -> None:
    q = SchedulingQueue(backoff=queueing.Backoff(initial=0.5, maximum=3.0))
    assert [q.backoff_duration(n) for n in (1, 2, 3, 4, 9)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    q.backoff_policy = queueing.Backoff(initial=2.0, maximum=2.0)  # a reload
    assert q.backoff_duration(5) == 2.0
