"""What happens to a pod around its binding: the outcomes the API server can give, and a node
that vanishes while the kernel decides. In every case the pod ends bound once or requeued,
never lost, and the cache counts it at most once."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from plumb import events
from plumb import scheduler as scheduler_module
from plumb.backend import queue as queue_module
from plumb.backend.cache import clustercache as cache_module
from plumb.backend.records import objects
from plumb.k8s import client as k8s_client
from plumb.kernel import contract, reference
from plumb.observability import logs
from plumb_dev.testing.builders import make_node, make_pod
from tests.support.fakes import Answer, FakeApi, ManualClock, make_scheduler

# The pod these tests bind, pending, and as the watch shows it bound to n1 or to n2.
WEB = (
    make_pod("web", "ns")
    .uid("uid-web")
    .created("2026-11-30T00:00:00Z")
    .scheduler("plumb")
    .req(cpu="500m")
)
WEB_ON_N1 = WEB.copy().node("n1")
WEB_ON_N2 = WEB.copy().node("n2")
NODES = [make_node("n1").capacity(cpu="4").obj(), make_node("n2").capacity(cpu="2").obj()]


async def _attempt(s: scheduler_module.Scheduler) -> None:
    entries = await s.queue.pop_batch(8)
    await s.schedule_batch(entries)
    await s.drain()


def _pods_on(c: cache_module.Cache, node: str) -> int:
    return c.nodes.requested(node)["pods"]


def _reasons(api: FakeApi) -> list[str]:
    return [e["reason"] for e in api.events]


async def test_bound_pod_stays_assumed_until_the_watch_confirms_it_once() -> None:
    api, clock = FakeApi(), ManualClock()
    s = make_scheduler(api, clock)
    s.feed.resync(NODES, [WEB.obj()])
    await _attempt(s)
    assert api.binds == [("web", "n1")]
    assert s.cache.state("uid-web") is cache_module.PodState.ASSUMED
    s.feed.on_pod("MODIFIED", WEB_ON_N1.obj())
    assert s.cache.state("uid-web") is cache_module.PodState.ADDED
    assert _pods_on(s.cache, "n1") == 1
    assert _reasons(api) == ["Scheduled"]
    assert "uid-web" not in s.queue


async def test_conflict_forgets_and_counts_the_winner_once() -> None:
    conflict = k8s_client.ApiResponse(status=409, body={"message": "already assigned"})
    api, clock = FakeApi(conflict), ManualClock()
    s = make_scheduler(api, clock)
    s.feed.resync(NODES, [WEB.obj()])
    await _attempt(s)
    assert s.cache.state("uid-web") is None
    # Retried after a backoff unless the watch settles it first, as kube-scheduler does.
    assert s.queue.where("uid-web") is queue_module.Where.BACKOFF
    assert _pods_on(s.cache, "n1") == 0
    s.feed.on_pod("MODIFIED", WEB_ON_N2.obj())  # another scheduler had it
    assert "uid-web" not in s.queue
    assert (_pods_on(s.cache, "n1"), _pods_on(s.cache, "n2")) == (0, 1)
    assert api.binds == [("web", "n1")]
    assert "Scheduled" not in _reasons(api)


async def test_a_conflict_the_watch_never_confirms_is_retried_and_binds() -> None:
    # A 409 from something between plumb and the API server (a proxy, a webhook) with the pod
    # still pending: left alone it would stay pending for ever.
    conflict = k8s_client.ApiResponse(status=409, body={"message": "injected"})
    api, clock = FakeApi(conflict), ManualClock()
    s = make_scheduler(api, clock)
    s.feed.resync(NODES, [WEB.obj()])
    await _attempt(s)
    clock.now += queue_module.INITIAL_BACKOFF
    await _attempt(s)
    assert api.binds == [("web", "n1"), ("web", "n1")]
    s.feed.on_pod("MODIFIED", WEB_ON_N1.obj())
    assert _reasons(api).count("Scheduled") == 1


async def test_gone_pod_is_dropped() -> None:
    api, clock = (
        FakeApi(k8s_client.ApiResponse(status=404, body={"message": "not found"})),
        ManualClock(),
    )
    s = make_scheduler(api, clock)
    s.feed.resync(NODES, [WEB.obj()])
    await _attempt(s)
    assert s.cache.state("uid-web") is None
    assert "uid-web" not in s.queue
    assert _pods_on(s.cache, "n1") == 0


@pytest.mark.parametrize(
    "failure",
    [
        k8s_client.ApiResponse(status=500, body={"message": "etcd leader changed"}),
        k8s_client.TransportError("POST binding: TimeoutError"),
    ],
    ids=["server-error", "timeout"],
)
async def test_error_mid_bind_requeues_with_backoff_then_binds_once(failure: Answer) -> None:
    api, clock = FakeApi(failure), ManualClock()
    s = make_scheduler(api, clock)
    s.feed.resync(NODES, [WEB.obj()])
    await _attempt(s)
    assert s.cache.state("uid-web") is None
    assert _pods_on(s.cache, "n1") == 0
    assert s.queue.where("uid-web") is queue_module.Where.BACKOFF
    clock.now += queue_module.INITIAL_BACKOFF
    await _attempt(s)
    assert api.binds == [("web", "n1"), ("web", "n1")]
    s.feed.on_pod("MODIFIED", WEB_ON_N1.obj())
    assert _pods_on(s.cache, "n1") == 1
    assert _reasons(api).count("Scheduled") == 1


async def test_throttled_bind_waits_and_retries_while_assumed() -> None:
    throttled = k8s_client.ApiResponse(status=429, body={}, retry_after=0.01)
    api, clock = FakeApi(throttled), ManualClock()
    s = make_scheduler(api, clock)
    s.feed.resync(NODES, [WEB.obj()])
    await _attempt(s)
    assert api.binds == [("web", "n1"), ("web", "n1")]
    assert s.cache.state("uid-web") is cache_module.PodState.ASSUMED


async def test_node_deleted_while_the_kernel_decides_requeues_the_pod() -> None:
    api, clock = FakeApi(), ManualClock()

    async def kernel(cluster: contract.Cluster, batch: contract.Batch) -> contract.Result:
        result = reference.run(cluster, batch)
        s.feed.on_node("DELETED", NODES[0])  # the watch reports it while the kernel runs
        return result

    s = make_scheduler(api, clock, kernel=kernel)
    s.feed.resync(NODES, [WEB.obj()])
    await _attempt(s)
    assert api.binds == []
    assert s.cache.state("uid-web") is None
    assert s.queue.where("uid-web") is queue_module.Where.ACTIVE
    await _attempt(s)  # decided again without the vanished node
    assert api.binds == [("web", "n2")]


async def test_pod_deleted_while_the_kernel_decides_is_not_bound() -> None:
    api, clock = FakeApi(), ManualClock()

    async def kernel(cluster: contract.Cluster, batch: contract.Batch) -> contract.Result:
        result = reference.run(cluster, batch)
        s.feed.on_pod("DELETED", WEB.obj())
        return result

    s = make_scheduler(api, clock, kernel=kernel)
    s.feed.resync(NODES, [WEB.obj()])
    await _attempt(s)
    assert api.binds == []
    assert s.cache.state("uid-web") is None
    assert "uid-web" not in s.queue


async def test_failed_scheduling_events_at_most_once_per_backoff_step() -> None:
    api, clock = FakeApi(), ManualClock()
    recorder = events.Recorder(api, instance="test", clock=clock)
    info = objects.parse_pod(make_pod("waits", "ns").uid("uid-waits").obj())
    message = "0/3 nodes are available: 3 Insufficient cpu."
    recorder.failed_scheduling(info, message, step=1.0)
    recorder.failed_scheduling(info, message, step=1.0)  # same step: suppressed
    clock.now += 0.5
    recorder.failed_scheduling(info, "0/4 nodes are available: 4 Insufficient cpu.", step=1.0)
    clock.now += 1.0
    recorder.failed_scheduling(info, "0/4 nodes are available: 4 Insufficient cpu.", step=2.0)
    clock.now += 2.0  # the second step is 2 s
    recorder.failed_scheduling(info, "0/4 nodes are available: 4 Insufficient cpu.", step=2.0)
    await recorder.drain()
    notes = [e["note"] for e in api.events]
    assert notes == [message] + ["0/4 nodes are available: 4 Insufficient cpu."] * 2
    assert {e["reportingController"] for e in api.events} == {"plumb"}
    assert {e["apiVersion"] for e in api.events} == {"events.k8s.io/v1"}


class _SettledMidBind(FakeApi):
    """A binding whose answer is an error, while the watch reports ``event`` for the pod
    before the answer arrives (the bind committed and its response lost, or the pod deleted)."""

    def __init__(self, failure: Answer, event: tuple[str, dict[str, Any]]) -> None:
        super().__init__(failure)
        self.event = event
        self.scheduler: scheduler_module.Scheduler | None = None

    async def bind(
        self, *, namespace: str, name: str, uid: str, node: str, traceparent: str | None = None
    ) -> k8s_client.ApiResponse:
        assert self.scheduler is not None
        self.scheduler.feed.on_pod(*self.event)
        return await super().bind(namespace=namespace, name=name, uid=uid, node=node)


@pytest.mark.parametrize(
    "failure",
    [
        k8s_client.ApiResponse(status=500, body={"message": "etcdserver: request timed out"}),
        k8s_client.TransportError("POST binding: TimeoutError"),
    ],
    ids=["server-error", "timeout"],
)
async def test_a_bind_the_watch_saw_committed_is_not_retried(failure: Answer) -> None:
    clock = ManualClock()
    api = _SettledMidBind(failure, ("MODIFIED", WEB_ON_N1.obj()))
    s = make_scheduler(api, clock)
    api.scheduler = s
    s.feed.resync(NODES, [WEB.obj()])
    await _attempt(s)
    assert s.cache.state("uid-web") is cache_module.PodState.ADDED
    assert _pods_on(s.cache, "n1") == 1
    assert "uid-web" not in s.queue  # nothing to retry: it is bound
    clock.now += 60
    assert s.queue.counts()[queue_module.Where.ACTIVE] == 0
    assert api.binds == [("web", "n1")]
    assert "FailedScheduling" not in _reasons(api)
    # The watch shows it where plumb put it: the binding was committed, and said so.
    await s.drain()
    assert _reasons(api) == ["Scheduled"]


async def test_a_bind_whose_answer_was_lost_is_reported_when_the_watch_shows_it_committed() -> None:
    # The answer lost before the watch said anything: retried after a backoff, until the watch
    # shows the pod on the node plumb chose. Then it was our binding: Scheduled, once.
    api, clock = (
        FakeApi(k8s_client.TransportError("POST binding: ServerDisconnectedError")),
        ManualClock(),
    )
    s = make_scheduler(api, clock)
    s.feed.resync(NODES, [WEB.obj()])
    await _attempt(s)
    assert s.queue.where("uid-web") is queue_module.Where.BACKOFF
    s.feed.on_pod("MODIFIED", WEB_ON_N1.obj())
    await s.drain()
    assert "uid-web" not in s.queue
    assert _reasons(api) == ["Scheduled"]
    s.feed.on_pod("MODIFIED", WEB_ON_N1.obj())
    await s.drain()
    assert _reasons(api) == ["Scheduled"]


async def test_a_bind_that_fails_after_the_pod_was_deleted_is_not_retried() -> None:
    clock = ManualClock()
    failure = k8s_client.ApiResponse(status=500, body={"message": "internal error"})
    api = _SettledMidBind(failure, ("DELETED", WEB.obj()))
    s = make_scheduler(api, clock)
    api.scheduler = s
    s.feed.resync(NODES, [WEB.obj()])
    await _attempt(s)
    assert s.cache.state("uid-web") is None
    assert _pods_on(s.cache, "n1") == 0
    assert "uid-web" not in s.queue  # deleted: never retried, nothing posted for it
    assert "FailedScheduling" not in _reasons(api)
    assert not api.patches


async def test_a_replica_that_stood_down_reports_none_of_its_lost_answers() -> None:
    # Its binding's answer lost, then the lease lost: the next leader binds the pod to the same
    # node. The watch shows it there; the replica that no longer leads reports nothing of it
    # (the binding was the new leader's, as far as anyone can tell).
    api, clock = (
        FakeApi(k8s_client.TransportError("POST binding: ServerDisconnectedError")),
        ManualClock(),
    )
    s = make_scheduler(api, clock)
    s.feed.resync(NODES, [WEB.obj()])
    await _attempt(s)
    await s.stand_down()
    s.feed.on_pod("MODIFIED", WEB_ON_N1.obj())
    await s.drain()
    assert "Scheduled" not in _reasons(api)


async def test_a_replica_that_lost_its_lease_reports_no_lost_answer_before_it_stands_down(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Stalled past its lease: the watch shows the pod where its try went before the loop has
    # stood down. It may not act any more, so it reports nothing (the next leader bound it):
    # no trace line says the binding's answer was lost.
    api, clock = (
        FakeApi(k8s_client.TransportError("POST binding: ServerDisconnectedError")),
        ManualClock(),
    )
    s = make_scheduler(api, clock, log=logging.getLogger("test.trace"))
    s.feed.resync(NODES, [WEB.obj()])
    await _attempt(s)
    leading = False
    s.state.recorder.writes._gate = lambda: leading
    with caplog.at_level(logging.INFO, logger="test.trace"):
        s.feed.on_pod("MODIFIED", WEB_ON_N1.obj())
        await s.drain()
    lines = [getattr(r, logs.FIELDS, {}) for r in caplog.records]
    assert lines  # the trace lines are captured: the attempt's own is there
    assert not [line for line in lines if "answer was lost" in str(line.get("message"))]
    assert "Scheduled" not in _reasons(api)
