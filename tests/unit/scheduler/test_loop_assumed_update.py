"""A pod updated while assumed (placed, its binding in flight): the decision stands and the cache
keeps the version it assumed, as kube-scheduler's does; but if the binding fails, the retry
decides the newest version the watch delivered, as kube-scheduler's failure handler requeues
the pod as its informer last saw it, not the version the failed attempt decided."""

from __future__ import annotations

from typing import Any

from plumb import scheduler as scheduler_module
from plumb.backend import queue as queue_module
from plumb.backend.cache import clustercache as cache_module
from plumb.backend.records import objects
from plumb.k8s import client as k8s_client
from plumb_dev.testing.builders import PodBuilder, make_node, make_pod
from tests.support.fakes import FakeApi, ManualClock, make_scheduler

UID = "uid-web"
REFUSED = k8s_client.ApiResponse(status=500, body={"message": "etcdserver: request timed out"})
# "trap" has a PreferNoSchedule taint the pod does not tolerate; "safe" a NoSchedule one. The
# pod as created fits trap only; once it tolerates dedicated=safe, safe scores higher.
NODES = [
    make_node("trap").taint("avoid", "yes", "PreferNoSchedule").obj(),
    make_node("safe").taint("dedicated", "safe").obj(),
]


def _web() -> PodBuilder:
    return make_pod("web", "ns").scheduler("plumb").req(cpu="500m").label("v", "1")


def _body(builder: PodBuilder, version: str) -> dict[str, Any]:
    body = builder.obj()
    body["metadata"] |= {
        "uid": UID,
        "creationTimestamp": "2026-11-30T00:00:00Z",
        "resourceVersion": version,
    }
    return body


CREATED = _body(_web(), "1")
TOLERATING = _body(_web().label("v", "2").toleration("dedicated", value="safe"), "2")


class _UpdatedMidBind(FakeApi):
    """Bindings answered from the script; before the first answer the watch delivers
    ``events`` for the pod (an update made while the pod was being bound)."""

    def __init__(self, *events: tuple[str, dict[str, Any]]) -> None:
        super().__init__(REFUSED)
        self.events_mid_bind = list(events)
        self.scheduler: scheduler_module.Scheduler | None = None

    async def bind(
        self, *, namespace: str, name: str, uid: str, node: str, traceparent: str | None = None
    ) -> k8s_client.ApiResponse:
        assert self.scheduler is not None
        while self.events_mid_bind:
            self.scheduler.feed.on_pod(*self.events_mid_bind.pop(0))
        return await super().bind(namespace=namespace, name=name, uid=uid, node=node)


async def _attempt(s: scheduler_module.Scheduler) -> None:
    entries = await s.queue.pop_batch(8)
    await s.schedule_batch(entries)
    await s.drain()


def _scheduler(
    *events: tuple[str, dict[str, Any]],
) -> tuple[scheduler_module.Scheduler, _UpdatedMidBind, ManualClock]:
    clock = ManualClock()
    api = _UpdatedMidBind(*events)
    s = make_scheduler(api, clock)
    api.scheduler = s
    s.feed.resync(NODES, [CREATED])
    return s, api, clock


def _assumed(s: scheduler_module.Scheduler, node: str) -> objects.PodInfo:
    (placed,) = s.cache.pods_on(node)
    assert placed.state is cache_module.PodState.ASSUMED
    return placed.pod


async def test_the_retry_after_a_failed_bind_decides_the_newest_spec() -> None:
    s, api, clock = _scheduler(("MODIFIED", TOLERATING))
    await _attempt(s)
    assert api.binds == [("web", "trap")]
    assert s.queue.where(UID) is queue_module.Where.BACKOFF
    clock.now += queue_module.INITIAL_BACKOFF
    await _attempt(s)
    # The retry tolerates dedicated=safe, so safe (no untolerated taint at all) wins; the
    # version the failed attempt decided would have gone back to trap.
    assert api.binds == [("web", "trap"), ("web", "safe")]
    assert _assumed(s, "safe").labels == {"v": "2"}


async def test_the_assumed_record_keeps_the_version_decided_until_the_watch_confirms() -> None:
    # kube-scheduler ignores updates of assumed pods (updatePodInSchedulingQueue): the cache
    # holds what it assumed until the watch shows the pod bound, then that version.
    s, api, _ = _scheduler()
    api.script.clear()  # the binding succeeds
    entries = await s.queue.pop_batch(8)
    await s.schedule_batch(entries)
    s.feed.on_pod("MODIFIED", TOLERATING)
    assert _assumed(s, "trap").labels == {"v": "1"}
    await s.drain()
    bound = _body(_web().label("v", "2").toleration("dedicated", value="safe").node("trap"), "3")
    s.feed.on_pod("MODIFIED", bound)
    (placed,) = s.cache.pods_on("trap")
    assert placed.state is cache_module.PodState.ADDED
    assert placed.pod.labels == {"v": "2"}
    assert UID not in s.queue


async def test_a_pod_deleted_while_being_bound_is_not_retried() -> None:
    terminating = _body(_web().terminating(), "2")
    s, _, clock = _scheduler(("MODIFIED", terminating))
    await _attempt(s)
    assert s.cache.state(UID) is None
    assert UID not in s.queue
    clock.now += 60
    assert s.queue.counts()[queue_module.Where.ACTIVE] == 0


async def test_a_status_only_update_mid_bind_changes_nothing() -> None:
    condition = _body(_web(), "2")
    condition["status"] = {"conditions": [{"type": "PodScheduled", "status": "False"}]}
    s, _, clock = _scheduler(("MODIFIED", condition))
    await _attempt(s)
    clock.now += queue_module.INITIAL_BACKOFF
    await _attempt(s)
    assert _assumed(s, "trap") == objects.parse_pod(CREATED)


# The queue on its own -------------------------------------------------------------------------


async def test_the_queue_forgets_an_assumed_update_once_the_pod_is_deleted_or_listed_gone() -> None:
    clock = ManualClock()
    q = queue_module.SchedulingQueue(clock=clock)
    created, tolerating = objects.parse_pod(CREATED), objects.parse_pod(TOLERATING)
    for forget in (lambda: q.delete(UID), lambda: q.sweep(set(), clock.now)):
        q.add(created)
        entry = await q.pop()
        q.done(UID)  # assumed: it left the queue
        q.update_assumed(tolerating)
        forget()
        q.retry(entry)
        assert entry.pod == created  # nothing newer is held once the pod is gone
        q.delete(UID)
