"""CapacityScheduling's PreFilter: a namespace's use within its ElasticQuota's max, the use of
all quotas within the sum of their mins, and a kernel run that cannot overshoot."""

from __future__ import annotations

from typing import Any

from plumb.backend.cache import quotas
from plumb.backend.records import objects, quotaobjects
from plumb.framework import cycle, traces
from plumb.framework.plugins import capacityscheduling
from plumb.framework.plugins.capacityscheduling import Admission
from plumb_dev.testing.builders import make_pod

GPU = "nvidia.com/gpu"


def _quota(
    namespace: str,
    *,
    min: dict[str, Any] | None = None,
    max: dict[str, Any] | None = None,
    name: str = "quota",
    created: str = "2026-12-01T00:00:00Z",
) -> quotaobjects.ElasticQuota:
    spec: dict[str, Any] = {}
    if min is not None:
        spec["min"] = min
    if max is not None:
        spec["max"] = max
    body = {
        "metadata": {"namespace": namespace, "name": name, "creationTimestamp": created},
        "spec": spec,
    }
    return quotaobjects.parse_quota(body)


def _pod(name: str, namespace: str, *, priority: int = 0, **requests: str) -> objects.PodInfo:
    body = make_pod(name, namespace).req(**requests).priority(priority).obj()
    body["metadata"]["uid"] = f"uid-{namespace}-{name}"
    return objects.parse_pod(body)


def _store(
    *held: quotaobjects.ElasticQuota, placed: tuple[objects.PodInfo, ...] = ()
) -> quotas.QuotaStore:
    store = quotas.QuotaStore()
    for quota in held:
        store.put(quota)
    for pod in placed:
        store.place(pod)
    return store


def test_a_namespace_without_a_quota_is_not_limited() -> None:
    store = _store(_quota("team-a", max={"cpu": "1"}))
    assert capacityscheduling.admit(_pod("p", "team-b", cpu="64"), store).admission is (
        Admission.ADMITTED
    )


def test_use_plus_the_request_beyond_max_is_refused_in_scheduler_plugins_words() -> None:
    quota = _quota("team-a", min={"cpu": "2", "memory": "4Gi"}, max={"cpu": "4", "memory": "8Gi"})
    idle = _quota("team-b", min={"cpu": "8", "memory": "8Gi"})  # room to borrow below the mins
    store = _store(quota, idle, placed=(_pod("old", "team-a", cpu="3", memory="1Gi"),))
    assert capacityscheduling.admit(_pod("ok", "team-a", cpu="1"), store).admission is (
        Admission.ADMITTED
    )
    verdict = capacityscheduling.admit(_pod("big", "team-a", cpu="1500m"), store)
    assert verdict.admission is Admission.REJECTED
    assert verdict.message == (
        "Pod team-a/big is rejected in PreFilter because ElasticQuota team-a is more than Max"
    )


def test_a_max_that_names_only_cpu_lets_no_memory_in_but_any_gpu() -> None:
    store = _store(
        _quota("team-a", min={"cpu": "10", "memory": "1Gi", GPU: "8"}, max={"cpu": "10"})
    )
    assert capacityscheduling.admit(
        _pod("m", "team-a", cpu="1", memory="1Mi"), store
    ).admission is (Admission.REJECTED)
    body = make_pod("g", "team-a").req(cpu="1", **{GPU: "8"}).obj()
    gpu = objects.parse_pod(body)
    assert capacityscheduling.admit(gpu, store).admission is Admission.ADMITTED


def test_without_min_or_max_the_quota_limits_only_through_the_sum_of_mins() -> None:
    # No max: unlimited. No min: 0, so the sum of mins is 0 and any request is over it.
    store = _store(_quota("team-a"))
    verdict = capacityscheduling.admit(_pod("p", "team-a", cpu="1"), store)
    assert verdict.admission is Admission.REJECTED
    assert verdict.message == (
        "Pod team-a/p is rejected in PreFilter because total ElasticQuota used is more than min"
    )


def test_borrowing_is_allowed_while_the_total_stays_within_the_sum_of_mins() -> None:
    a = _quota("team-a", min={"cpu": "2", "memory": "8Gi"}, max={"cpu": "6", "memory": "8Gi"})
    b = _quota("team-b", min={"cpu": "4", "memory": "8Gi"}, max={"cpu": "6", "memory": "8Gi"})
    store = _store(a, b, placed=(_pod("a1", "team-a", cpu="2"),))
    # team-a is at its min; it borrows team-b's idle 4 cpu, up to the sum of mins (6).
    assert capacityscheduling.admit(_pod("a2", "team-a", cpu="4"), store).admission is (
        Admission.ADMITTED
    )
    assert capacityscheduling.admit(_pod("a3", "team-a", cpu="4500m"), store).admission is (
        Admission.REJECTED
    )


def test_nominated_pods_of_the_namespace_at_the_pods_priority_or_above_count() -> None:
    store = _store(_quota("team-a", min={"cpu": "8"}, max={"cpu": "4"}))
    pod = _pod("p", "team-a", priority=10, cpu="2")
    higher = _pod("h", "team-a", priority=10, cpu="3")
    lower = _pod("l", "team-a", priority=5, cpu="3")
    assert capacityscheduling.admit(pod, store, [lower]).admission is Admission.ADMITTED
    assert capacityscheduling.admit(pod, store, [higher]).admission is Admission.REJECTED
    assert capacityscheduling.admit(pod, store, [pod]).admission is Admission.ADMITTED


def test_a_pod_over_only_with_the_runs_earlier_pods_is_deferred_not_refused() -> None:
    store = _store(
        _quota("team-a", min={"cpu": "8", "memory": "8Gi"}, max={"cpu": "2", "memory": "8Gi"})
    )
    first, second = _pod("p1", "team-a", cpu="1500m"), _pod("p2", "team-a", cpu="1")
    assert capacityscheduling.admit(first, store).admission is Admission.ADMITTED
    verdict = capacityscheduling.admit(second, store, earlier=[first])
    assert verdict.admission is Admission.DEFERRED
    other = _pod("x", "team-b", cpu="4")
    assert capacityscheduling.admit(second, store, earlier=[other]).admission is (
        Admission.ADMITTED
    )


def test_the_store_counts_placed_pods_and_the_oldest_quota_governs() -> None:
    newer = _quota("team-a", max={"cpu": "1"}, name="b", created="2026-12-02T00:00:00Z")
    older = _quota("team-a", max={"cpu": "9"}, name="z", created="2026-12-01T00:00:00Z")
    pod = _pod("p", "team-a", cpu="500m", memory="1Gi")
    store = _store(newer, older, placed=(pod,))
    assert store.governing("team-a") == older
    assert store.used("team-a") == {"cpu": 500, "memory": 1024**3}
    store.unplace(pod)
    assert store.used("team-a") == {}
    assert store.remove("team-a", "z") == older
    assert store.governing("team-a") == newer
    changes = store.replace([])
    assert changes == [(newer, None)]
    assert not store


def test_bounds_read_missing_names_as_capacity_scheduling_does() -> None:
    given = quotaobjects.Bound.of({"cpu": 4000, GPU: 2}, quotaobjects.UNLIMITED)
    assert (given.get("cpu"), given.get("memory"), given.get(GPU)) == (4000, 0, 2)
    assert given.get("example.com/other") == quotaobjects.UNLIMITED
    absent = quotaobjects.Bound.of(None, quotaobjects.UNLIMITED)
    assert absent.get("memory") == quotaobjects.UNLIMITED
    assert absent.get("pods") == 0
    assert quotaobjects.vector({"cpu": 1, "foo": 3, "hugepages-2Mi": 4}) == {
        "cpu": 1,
        "hugepages-2Mi": 4,
    }


def test_a_refusal_is_traced_under_capacity_scheduling() -> None:
    pod = _pod("p", "team-a", cpu="1")
    decision = cycle.Decision(
        pod=pod,
        node=None,
        feasible=0,
        total=3,
        message="0/3 nodes are available: words.",
        reasons={"words": 3},
        plugins=frozenset({capacityscheduling.NAME}),
        prefiltered=True,
    )
    rejected = traces.rejections(decision, {})
    assert list(rejected) == [capacityscheduling.NAME]
    assert rejected[capacityscheduling.NAME].nodes == 3


def test_a_refusal_says_what_the_namespace_uses_against_which_bound() -> None:
    quota = _quota("team-a", min={"cpu": "2", "memory": "4Gi"}, max={"cpu": "8", "memory": "8Gi"})
    idle = _quota("team-b", min={"cpu": "8", "memory": "8Gi"})
    store = _store(quota, idle, placed=(_pod("old", "team-a", cpu="7500m"),))
    verdict = capacityscheduling.admit(_pod("p", "team-a", cpu="1"), store)
    assert verdict.explained == (
        "namespace team-a uses cpu 7.5 of 8 and asks 1 cpu more; its max is cpu 8"
    )
    lone = _store(_quota("team-a", min={"cpu": "2"}), placed=(_pod("x", "team-a", cpu="1"),))
    verdict = capacityscheduling.admit(_pod("p", "team-a", cpu="1500m"), lone)
    assert verdict.explained.startswith(
        "all quotas together use cpu 1 of the 2 their mins add up to, and this pod asks 1.5 cpu "
        "more"
    )
