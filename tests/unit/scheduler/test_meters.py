"""What the scheduler's metrics page says after it has worked: attempts by result and their
latency, the SLI from first queueing to bound, kernel runs, bindings by result, pending pods by
queue and the cache's size, each equal to what the scheduler did, with no pod in a label."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import parser

from plumb import scheduler as scheduler_module
from plumb.app import runtime
from plumb.backend import queue as queue_module
from plumb.k8s import client as k8s_client
from plumb.kernel import contract
from plumb.observability import metrics
from plumb_dev.testing.builders import make_node, make_pod
from tests.support.fakes import Answer, FakeApi, ManualClock, make_scheduler, reference_kernel

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _scheduler(
    api: FakeApi, clock: ManualClock, kernel: contract.KernelRunner = reference_kernel
) -> scheduler_module.Scheduler:
    s = make_scheduler(api, clock, kernel=kernel, metrics=metrics.Metrics())
    runtime.register_metrics(s.metrics, s)
    return s


NODES = [make_node(f"n{i}").capacity(cpu="2").obj() for i in range(3)]
# plumb's pods: two that fit (and as the watch shows them once bound) and one that fits nowhere.
WEB_0 = (
    make_pod("web-0", "ns")
    .uid("uid-web-0")
    .created("2026-11-30T00:00:00Z")
    .scheduler("plumb")
    .req(cpu="1")
)
WEB_1 = (
    make_pod("web-1", "ns")
    .uid("uid-web-1")
    .created("2026-11-30T00:00:00Z")
    .scheduler("plumb")
    .req(cpu="1")
)
HUGE = (
    make_pod("huge", "ns")
    .uid("uid-huge")
    .created("2026-11-30T00:00:00Z")
    .scheduler("plumb")
    .req(cpu="64")
)
WEB_0_ON_N0 = WEB_0.copy().node("n0")
WEB_1_ON_N1 = WEB_1.copy().node("n1")


def _scrape(s: scheduler_module.Scheduler) -> Samples:
    page = s.metrics.render().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in parser.text_string_to_metric_families(page)
        for sample in family.samples
    }


def _value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def _attempts(samples: Samples) -> dict[str, float]:
    return {r: _value(samples, metrics.SCHEDULE_ATTEMPTS, result=r) for r in metrics.RESULTS}


def _counts(samples: Samples, name: str, label: str, values: tuple[str, ...]) -> dict[str, float]:
    return {v: _value(samples, f"{name}_count", **{label: v}) for v in values}


def _gauge(samples: Samples, name: str, label: str, values: tuple[str, ...]) -> dict[str, float]:
    return {v: _value(samples, name, **{label: v}) for v in values}


async def _attempt(s: scheduler_module.Scheduler) -> None:
    await s.schedule_batch(await s.queue.pop_batch(8))
    await s.drain()


async def test_the_page_counts_what_the_scheduler_did() -> None:
    api, clock = FakeApi(), ManualClock()
    s = _scheduler(api, clock)
    s.feed.resync(NODES, [WEB_0.obj(), WEB_1.obj(), HUGE.obj()])
    clock.now += 2.0  # two seconds in the queue before the pop
    await _attempt(s)

    samples = _scrape(s)
    assert _attempts(samples) == {"scheduled": 2, "unschedulable": 1, "error": 0}
    durations = _counts(samples, metrics.ATTEMPT_DURATION, "result", metrics.RESULTS)
    assert durations == {"scheduled": 2, "unschedulable": 1, "error": 0}
    # The SLI runs from the first queueing (2 s before the pop on this clock) to bound.
    assert _value(samples, f"{metrics.SLI_DURATION}_count", attempts="1") == 2
    assert _value(samples, f"{metrics.SLI_DURATION}_sum", attempts="1") == 4.0
    assert _value(samples, f"{metrics.KERNEL_DURATION}_count") == 1  # one batch, one run
    bindings = _counts(samples, metrics.BINDING_DURATION, "result", metrics.BIND_RESULTS)
    assert bindings == {"bound": 2, "conflict": 0, "gone": 0, "error": 0}
    pending = _gauge(samples, metrics.PENDING_PODS, "queue", metrics.QUEUES)
    assert pending == {"active": 0, "backoff": 0, "unschedulable": 1, "gated": 0}
    cache = _gauge(samples, metrics.CACHE_SIZE, "type", metrics.CACHE_TYPES)
    assert cache == {"nodes": 3, "pods": 2, "assumed_pods": 2}

    # The watch confirms both bindings: still two pods, none assumed.
    s.feed.on_pod("MODIFIED", WEB_0_ON_N0.obj())
    s.feed.on_pod("MODIFIED", WEB_1_ON_N1.obj())
    cache = _gauge(_scrape(s), metrics.CACHE_SIZE, "type", metrics.CACHE_TYPES)
    assert cache == {"nodes": 3, "pods": 2, "assumed_pods": 0}


async def test_no_label_carries_a_pod() -> None:
    api, clock = FakeApi(k8s_client.ApiResponse(status=500, body={})), ManualClock()
    s = _scheduler(api, clock)
    pods = [WEB_0.obj(), WEB_1.obj(), HUGE.obj()]
    s.feed.resync(NODES, pods)
    await _attempt(s)
    clock.now += queue_module.MAX_BACKOFF
    await _attempt(s)
    samples = _scrape(s)
    assert _attempts(samples)["scheduled"] == 2  # every kind of sample is on the page
    allowed = {label for labels in metrics.LABELS.values() for label in labels} | {"le"}
    names = {p["metadata"]["name"] for p in pods} | {p["metadata"]["uid"] for p in pods}
    for name, labels in samples:
        assert name in metrics.SERIES, name
        assert {label for label, _ in labels} <= allowed, (name, labels)
        for _, value in labels:
            assert not any(pod in value for pod in names), (name, labels)


@pytest.mark.parametrize(
    ("answer", "bind_result"),
    [
        (k8s_client.ApiResponse(status=500, body={"message": "etcd leader changed"}), "error"),
        (k8s_client.TransportError("POST binding: TimeoutError"), "error"),
        (k8s_client.ApiResponse(status=409, body={"message": "already bound"}), "conflict"),
        (k8s_client.ApiResponse(status=404, body={"message": "not found"}), "gone"),
    ],
    ids=["server-error", "timeout", "conflict", "gone"],
)
async def test_a_refused_binding_is_an_error_attempt(answer: Answer, bind_result: str) -> None:
    api, clock = FakeApi(answer), ManualClock()
    s = _scheduler(api, clock)
    s.feed.resync(NODES, [WEB_0.obj()])
    await _attempt(s)
    samples = _scrape(s)
    assert _attempts(samples) == {"scheduled": 0, "unschedulable": 0, "error": 1}
    assert _value(samples, f"{metrics.ATTEMPT_DURATION}_count", result="error") == 1
    bindings = _counts(samples, metrics.BINDING_DURATION, "result", metrics.BIND_RESULTS)
    assert bindings == {r: float(r == bind_result) for r in metrics.BIND_RESULTS}
    assert _value(samples, f"{metrics.SLI_DURATION}_count", attempts="1") == 0


async def test_a_pod_bound_at_its_second_attempt_counts_both_and_its_whole_wait() -> None:
    api, clock = FakeApi(k8s_client.ApiResponse(status=500, body={})), ManualClock()
    s = _scheduler(api, clock)
    s.feed.resync(NODES, [WEB_0.obj()])
    await _attempt(s)
    pending = _gauge(_scrape(s), metrics.PENDING_PODS, "queue", metrics.QUEUES)
    assert pending == {"active": 0, "backoff": 1, "unschedulable": 0, "gated": 0}
    clock.now += queue_module.INITIAL_BACKOFF
    await _attempt(s)
    samples = _scrape(s)
    assert _attempts(samples) == {"scheduled": 1, "unschedulable": 0, "error": 1}
    assert _value(samples, f"{metrics.SLI_DURATION}_count", attempts="2") == 1
    assert _value(samples, f"{metrics.SLI_DURATION}_sum", attempts="2") == 1.0  # the backoff
    assert _value(samples, f"{metrics.BINDING_DURATION}_count", result="bound") == 1
    assert _value(samples, f"{metrics.BINDING_DURATION}_count", result="error") == 1


async def test_a_batch_that_fails_counts_an_error_per_pod_and_leadership_follows_the_loop() -> None:
    async def broken(cluster: contract.Cluster, batch: contract.Batch) -> contract.Result:
        raise RuntimeError("kernel exploded")

    api, clock = FakeApi(), ManualClock()
    s = _scheduler(api, clock, kernel=broken)
    assert _value(_scrape(s), metrics.LEADER) == 0
    s.feed.resync(NODES, [WEB_0.obj(), WEB_1.obj()])
    loop = asyncio.create_task(s.run())
    for _ in range(100):
        await asyncio.sleep(0)
        if _attempts(_scrape(s))["error"]:
            break
    samples = _scrape(s)
    assert _attempts(samples) == {"scheduled": 0, "unschedulable": 0, "error": 2}
    assert _value(samples, f"{metrics.KERNEL_DURATION}_count") == 0  # no run completed
    assert _value(samples, metrics.LEADER) == 1
    pending = _gauge(samples, metrics.PENDING_PODS, "queue", metrics.QUEUES)
    assert pending == {"active": 0, "backoff": 2, "unschedulable": 0, "gated": 0}
    loop.cancel()
    with pytest.raises(asyncio.CancelledError):
        await loop
    assert _value(_scrape(s), metrics.LEADER) == 0
