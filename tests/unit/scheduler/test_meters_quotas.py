"""The tenant quota metrics on the scheduler's page after it has worked: each quota namespace's use
(its pods bound or assumed), min and max, and the pods CapacityScheduling's PreFilter refused, by
namespace and rule, once per attempt; a pod a quota does not refuse counts nothing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prometheus_client import parser

from plumb import scheduler as scheduler_module
from plumb.app import runtime
from plumb.backend import queue as queue_module
from plumb.backend.records import groupobjects
from plumb.observability import metrics
from plumb_dev.testing import quotaclient
from plumb_dev.testing.builders import make_node, make_pod
from plumb_dev.testing.groupbuilders import make_group
from tests.support.fakes import FakeApi, ManualClock, make_scheduler

Series = dict[tuple[str, ...], float]
NODES = [make_node("n0").capacity(cpu="8", memory="32Gi").obj()]


def _scheduler(clock: ManualClock) -> scheduler_module.Scheduler:
    s = make_scheduler(FakeApi(), clock, metrics=metrics.Metrics())
    runtime.register_metrics(s.metrics, s)
    return s


def _quota(
    s: scheduler_module.Scheduler,
    namespace: str,
    minimum: Mapping[str, str],
    maximum: Mapping[str, str],
) -> None:
    body = quotaclient.elastic_quota(namespace, minimum=minimum, maximum=maximum)
    body["metadata"]["uid"] = f"quota-{namespace}"
    s.feed.on_quota("ADDED", body)


def _pod(name: str, namespace: str, cpu: str) -> dict[str, Any]:
    pod = make_pod(name, namespace).uid(name).created("2026-12-01T00:00:00Z")
    return pod.scheduler("plumb").req(cpu=cpu).obj()


def _family(s: scheduler_module.Scheduler, name: str) -> Series:
    for family in parser.text_string_to_metric_families(s.metrics.render().decode()):
        if family.name == name.removesuffix("_total"):
            labels = metrics.LABELS[name]
            return {tuple(x.labels[label] for label in labels): x.value for x in family.samples}
    raise AssertionError(f"{name} is not on the page")


def _cpu(s: scheduler_module.Scheduler, name: str) -> dict[str, float]:
    return {ns: value for (ns, resource), value in _family(s, name).items() if resource == "cpu"}


async def _attempt(s: scheduler_module.Scheduler) -> None:
    await s.schedule_batch(await s.queue.pop_batch(8))
    await s.drain()


async def test_use_and_bounds_follow_placements_and_refusals_count_by_rule() -> None:
    clock = ManualClock()
    s = _scheduler(clock)
    s.feed.resync(NODES, [])
    _quota(s, "team-a", {"cpu": "2"}, {"cpu": "3"})
    _quota(s, "team-b", {"cpu": "1"}, {"cpu": "4"})
    assert _cpu(s, metrics.QUOTA_USED) == {"team-a": 0.0, "team-b": 0.0}
    assert _cpu(s, metrics.QUOTA_MIN) == {"team-a": 2.0, "team-b": 1.0}
    assert _cpu(s, metrics.QUOTA_MAX) == {"team-a": 3.0, "team-b": 4.0}
    # Every quota namespace has its refusal series from 0.
    assert set(_family(s, metrics.QUOTA_REFUSALS).values()) == {0.0}

    for pod in (_pod("a-0", "team-a", "1"), _pod("a-1", "team-a", "1500m")):
        s.feed.on_pod("ADDED", pod)
    s.feed.on_pod("ADDED", _pod("b-0", "team-b", "500m"))
    s.feed.on_pod("ADDED", _pod("free", "elsewhere", "64"))  # fits no node; no quota
    await _attempt(s)
    # Assumed pods count as soon as they are placed.
    assert _cpu(s, metrics.QUOTA_USED) == {"team-a": 2.5, "team-b": 0.5}

    # a-2 would take team-a past its max (2.5 + 1 > 3); b-1, within team-b's max, would take
    # all quotas past the sum of their mins (3 + 0.5 > 2 + 1).
    s.feed.on_pod("ADDED", _pod("a-2", "team-a", "1"))
    s.feed.on_pod("ADDED", _pod("b-1", "team-b", "500m"))
    await _attempt(s)
    assert _family(s, metrics.QUOTA_REFUSALS) == {
        ("team-a", "max"): 1.0,
        ("team-a", "min"): 0.0,
        ("team-b", "max"): 0.0,
        ("team-b", "min"): 1.0,
    }
    attempts = _family(s, metrics.SCHEDULE_ATTEMPTS)
    assert attempts[("unschedulable",)] == 3.0  # free, a-2 and b-1: each attempt once

    # A quota event wakes them; each new attempt is refused, and counted, once more.
    _quota(s, "team-b", {"cpu": "1"}, {"cpu": "5"})
    clock.now += queue_module.MAX_BACKOFF
    await _attempt(s)
    refusals = _family(s, metrics.QUOTA_REFUSALS)
    assert (refusals[("team-a", "max")], refusals[("team-b", "min")]) == (2.0, 2.0)
    assert _cpu(s, metrics.QUOTA_MAX) == {"team-a": 3.0, "team-b": 5.0}
    assert _cpu(s, metrics.QUOTA_USED) == {"team-a": 2.5, "team-b": 0.5}

    # Deleting a quota drops its gauges; its refusal counts stay, as counters do.
    s.feed.on_quota("DELETED", quotaclient.elastic_quota("team-a"))
    assert _cpu(s, metrics.QUOTA_USED) == {"team-b": 0.5}
    assert _family(s, metrics.QUOTA_REFUSALS)[("team-a", "max")] == 2.0


async def test_a_gang_member_a_quota_refuses_counts_once() -> None:
    clock = ManualClock()
    s = _scheduler(clock)
    group = make_group("train", "ml", 2).uid("g").obj()
    s.feed.on_pod_group(groupobjects.UPSTREAM, "ADDED", group)
    _quota(s, "ml", {"cpu": "4"}, {"cpu": "4"})
    members = []
    for i in range(3):
        pod = make_pod(f"w{i}", "ml").uid(f"w{i}").created("2026-12-01T00:00:00Z")
        members.append(pod.scheduler("plumb").req(cpu="2").pod_group("train").obj())
    s.feed.resync(NODES, members)
    await s.schedule_batch(await s.next_batch())
    await s.drain()
    # The group's minimum (2) is placed; the third member would pass the max.
    assert _cpu(s, metrics.QUOTA_USED) == {"ml": 4.0}
    assert _family(s, metrics.QUOTA_REFUSALS) == {("ml", "max"): 1.0, ("ml", "min"): 0.0}
