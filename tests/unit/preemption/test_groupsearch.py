"""Workload-aware preemption decided over a cache the feed filled: which lower-priority units
a pod group evicts (the fewest, the least important first), and its words when none would do."""

from __future__ import annotations

from typing import Any

from plumb import scheduler as scheduler_module
from plumb.backend.records import groupobjects
from plumb.framework import scoring
from plumb.kernel import reference
from plumb.preemption import groupsearch
from plumb_dev.testing.builders import make_node, make_pod
from plumb_dev.testing.groupbuilders import make_group
from tests.support.fakes import FakeApi, ManualClock, make_scheduler

UPSTREAM = groupobjects.UPSTREAM


def nodes() -> list[dict[str, Any]]:
    return [make_node(name).capacity(cpu="4").obj() for name in ("a", "b")]


def low(name: str, node: str, priority: int = 0, group: str = "") -> dict[str, Any]:
    pod = make_pod(name, "ml").uid(name).req(cpu="2").node(node).priority(priority)
    pod = pod.created("2026-12-01T00:00:00Z")
    return (pod.pod_group(group) if group else pod).obj()


def member(name: str) -> dict[str, Any]:
    pod = make_pod(name, "ml").uid(name).scheduler("plumb").req(cpu="2").priority(1000)
    return pod.created("2026-12-01T00:00:01Z").pod_group("urgent").obj()


def urgent(plumb: scheduler_module.Scheduler, minimum: int) -> groupobjects.PodGroup:
    body = make_group("urgent", "ml", minimum).uid("urgent-uid").obj()
    body["spec"]["priority"] = 1000
    plumb.feed.on_pod_group(UPSTREAM, "ADDED", body)
    group = plumb.cache.groups.get(groupobjects.GroupRef(UPSTREAM, "ml", "urgent"))
    assert group is not None
    return group


def decide(
    plumb: scheduler_module.Scheduler, group: groupobjects.PodGroup, count: int
) -> groupsearch.GroupPreemption:
    members = [plumb.queue.pod(f"u{i}") for i in range(count)]
    pods = [pod for pod in members if pod is not None]
    found = groupsearch.prepare(
        pods, group, plumb.cache.snapshot(), plumb.cache, profile=scoring.DEFAULT
    )
    if isinstance(found, groupsearch.GroupPreemption):
        return found
    return found.decide(reference.run)


def test_the_fewest_units_go_and_each_member_is_nominated() -> None:
    plumb = make_scheduler(FakeApi(), ManualClock())
    group = urgent(plumb, 3)
    pending = [member(f"u{i}") for i in range(3)]
    plumb.feed.resync(nodes(), [low("a0", "a"), low("a1", "a"), low("b0", "b"), low("b1", "b")])
    for body in pending:
        plumb.feed.on_pod("ADDED", body)
    outcome = decide(plumb, group, 3)
    assert len(outcome.victims) == 3  # one of the four stays
    assert (
        outcome.words
        == "pod group preemption: found a placement for podgroup, preempting 3 victims"
    )
    assert sorted(outcome.nominated) == ["u0", "u1", "u2"]
    assert sorted(outcome.nominated.values()) in (["a", "a", "b"], ["a", "b", "b"])


def test_a_group_that_disrupts_as_a_whole_goes_whole() -> None:
    plumb = make_scheduler(FakeApi(), ManualClock())
    group = urgent(plumb, 1)
    whole = make_group("batch", "ml", 2).uid("batch-uid").disrupt_all().obj()
    plumb.feed.on_pod_group(UPSTREAM, "ADDED", whole)
    plumb.feed.resync(
        nodes(),
        [
            low("w0", "a", group="batch"),
            low("w1", "a", group="batch"),
            low("w2", "b", group="batch"),
            low("w3", "b", group="batch"),
        ],
    )
    plumb.feed.on_pod("ADDED", member("u0"))
    outcome = decide(plumb, group, 1)
    # One member needs 2 cpu; the batch group goes as a whole, all four of its pods.
    assert sorted(p.name for p in outcome.victims) == ["w0", "w1", "w2", "w3"]


def test_no_unit_of_lower_priority_means_no_victims() -> None:
    plumb = make_scheduler(FakeApi(), ManualClock())
    group = urgent(plumb, 3)
    plumb.feed.resync(nodes(), [low("a0", "a", priority=1000)])
    for i in range(3):
        plumb.feed.on_pod("ADDED", member(f"u{i}"))
    outcome = decide(plumb, group, 3)
    assert outcome == groupsearch.GroupPreemption(
        words="pod group preemption: No preemption victims found for incoming preemptor"
    )


def test_a_group_too_big_even_without_its_victims_evicts_none() -> None:
    plumb = make_scheduler(FakeApi(), ManualClock())
    group = urgent(plumb, 5)
    plumb.feed.resync(nodes(), [low("a0", "a")])
    for i in range(5):
        plumb.feed.on_pod("ADDED", member(f"u{i}"))
    outcome = decide(plumb, group, 5)
    assert outcome.victims == ()
    assert outcome.words == (
        "deallocation and deletion of ResourceClaims completed, pod group preemption: "
        "minCount (5) cannot be satisfied: 4 scheduled, 0 remaining"
    )
