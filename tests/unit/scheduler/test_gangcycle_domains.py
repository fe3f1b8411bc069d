"""A SchedulingPolicy's ``spec.gangs`` through the whole loop with a fake API server: a pod
group kept in one topology domain, the tightest that holds it; a failed trial left with nothing
reserved; a group no domain holds spanning domains on one deviation of the budget, freely under
ScheduleAnyway, and refused naming the policy and its budget once the budget is spent."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from plumb import explain
from plumb import scheduler as scheduler_module
from plumb.backend.queue import Where
from plumb.backend.records import groupobjects
from plumb.observability import trace
from plumb.policy import spec
from plumb_dev.testing.builders import make_node, make_pod
from plumb_dev.testing.groupbuilders import make_group
from tests.support.fakes import FakeApi, ManualClock, make_scheduler
from tests.support.policy_builders import ZONE, make_policy

UPSTREAM = groupobjects.UPSTREAM


def zones(**cpus: Sequence[str]) -> list[dict[str, Any]]:
    """Nodes <zone><i> in each zone, of the cpus given and 4Gi of memory per cpu:
    ``zones(a=("8", "8"), b=("4",))``."""
    return [
        make_node(f"{zone}{i}").zone(zone).capacity(cpu=cpu, memory=f"{4 * int(cpu)}Gi").obj()
        for zone, sizes in cpus.items()
        for i, cpu in enumerate(sizes, 1)
    ]


def member(name: str, group: str, cpu: str = "1") -> dict[str, Any]:
    pod = make_pod(name, "ml").uid(name).scheduler("plumb").req(cpu=cpu).label("app", "train")
    return pod.created("2026-12-01T00:00:00Z").pod_group(group).obj()


def add_group(
    s: scheduler_module.Scheduler, name: str, size: int, cpu: str = "1", *, minimum: int = 0
) -> list[str]:
    """A PodGroup ``name`` (uid ``uid-<name>``) of ``size`` members, all needed unless
    ``minimum`` says otherwise; returns the members' names."""
    group = make_group(name, "ml", minimum or size).uid(f"uid-{name}").obj()
    s.feed.on_pod_group(UPSTREAM, "ADDED", group)
    names = [f"{name}-{i}" for i in range(size)]
    for pod in names:
        s.feed.on_pod("ADDED", member(pod, name, cpu))
    return names


@pytest.fixture
def api() -> FakeApi:
    return FakeApi()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def plumb(api: FakeApi, clock: ManualClock) -> scheduler_module.Scheduler:
    return make_scheduler(api, clock)


async def attempt(s: scheduler_module.Scheduler) -> None:
    await s.schedule_batch(await s.next_batch())
    await s.drain()


def bound(api: FakeApi, names: Sequence[str]) -> dict[str, str]:
    return {name: node for name, node in api.binds if name in names}


def events(api: FakeApi, reason: str) -> dict[str, str]:
    """The last note of each pod's events of ``reason``."""
    return {e["regarding"]["name"]: e["note"] for e in api.events if e["reason"] == reason}


def policy(s: scheduler_module.Scheduler) -> spec.Policy:
    state = s.policies.store.get("ml", "train")
    assert state is not None
    assert state.active is not None
    return state.active


def topology(s: scheduler_module.Scheduler, pod: str) -> trace.GroupDomainRecord:
    line = s.tracer.last(f"ml/{pod}")
    assert line is not None
    assert line.group is not None
    assert line.group.topology is not None
    assert trace.Trace.from_fields(line.fields()) == line  # a line as written reads back
    return line.group.topology


async def test_without_the_rule_the_group_goes_to_the_roomiest_zone(
    plumb: scheduler_module.Scheduler, api: FakeApi
) -> None:
    plumb.feed.resync(zones(a=("8", "8"), b=("4",), c=("2",)), [])
    names = add_group(plumb, "train", 3)
    await attempt(plumb)
    assert set(bound(api, names).values()) <= {"a1", "a2"}


async def test_the_group_lands_whole_in_the_tightest_zone_that_holds_it(
    plumb: scheduler_module.Scheduler, api: FakeApi
) -> None:
    plumb.feed.resync(zones(a=("8", "8"), b=("4",), c=("2",)), [])
    plumb.feed.on_policy("ADDED", make_policy("train", "ml").gangs().obj())
    names = add_group(plumb, "train", 3)
    await attempt(plumb)
    # b is left with 1 cpu, a would be left with 13; c cannot hold 3.
    assert bound(api, names) == dict.fromkeys(names, "b1")
    found = topology(plumb, names[0])
    assert (found.key, found.domain, found.tried, found.spans) == (ZONE, "b", ("b",), False)
    line = plumb.tracer.last(f"ml/{names[0]}")
    assert line is not None
    assert line.deviation is False
    shown = explain.render(line)
    assert f"domain:   all in {ZONE}=b\n" in shown
    assert "the tightest fit of the 2 domains whose free room holds its minimum: b" in shown


async def test_a_trial_that_fails_in_a_zone_leaves_nothing_reserved_there(
    plumb: scheduler_module.Scheduler, api: FakeApi
) -> None:
    # Zone b's room (3 x 1 cpu) adds up to the group's 2 x 1.5 cpu but no node holds one
    # member: tried first as the tightest, refused, then a.
    plumb.feed.resync(zones(a=("8",), b=("1", "1", "1")), [])
    plumb.feed.on_policy("ADDED", make_policy("train", "ml").gangs().obj())
    names = add_group(plumb, "train", 2, "1500m")
    await attempt(plumb)
    assert bound(api, names) == dict.fromkeys(names, "a1")
    assert topology(plumb, names[0]).tried == ("b", "a")
    assert plumb.cache.assumed_count() == 2  # the members on a1, nothing left on b
    for node in ("b1", "b2", "b3"):
        assert plumb.cache.nodes.requested(node)["cpu"] == 0
    assert events(api, "FailedScheduling") == {}


async def test_members_placed_before_keep_the_rest_in_their_zone(
    plumb: scheduler_module.Scheduler, api: FakeApi
) -> None:
    first = make_pod("train-0", "ml").uid("train-0").scheduler("plumb").req(cpu="1")
    first = first.label("app", "train").pod_group("train").node("b1")
    plumb.feed.resync(zones(a=("8",), b=("4",)), [first.obj()])
    plumb.feed.on_policy("ADDED", make_policy("train", "ml").gangs().obj())
    plumb.feed.on_pod_group(UPSTREAM, "ADDED", make_group("train", "ml", 3).uid("g").obj())
    for name in ("train-1", "train-2"):
        plumb.feed.on_pod("ADDED", member(name, "train"))
    await attempt(plumb)
    assert bound(api, ["train-1", "train-2"]) == {"train-1": "b1", "train-2": "b1"}
    assert topology(plumb, "train-1").text == "where its members placed before are"


async def test_a_group_no_zone_holds_spans_on_one_deviation_then_waits_once_it_is_spent(
    plumb: scheduler_module.Scheduler, api: FakeApi, clock: ManualClock
) -> None:
    plumb.feed.resync(zones(a=("6",), b=("6",)), [])
    body = make_policy("train", "ml").gangs().budget(max_violations=1).obj()
    plumb.feed.on_policy("ADDED", body)
    first = add_group(plumb, "first", 4, "2")  # 8 cpu: more than either zone's 6
    await attempt(plumb)
    assert set(bound(api, first).values()) == {"a1", "b1"}
    deviated = events(api, "PolicyDeviation")
    assert sorted(deviated) == first  # one event per member ...
    state = plumb.policies.budget_state(policy(plumb))
    assert state is not None
    assert (state.used, state.charged) == (1, ("uid-first",))  # ... one deviation for the group
    note = deviated[first[0]]
    assert note.startswith(f"Placed on {bound(api, first)[first[0]]} with pod group ml/first ")
    assert f"no single {ZONE} domain holds its minimum 4 (none has the free room)" in note
    assert "SchedulingPolicy ml/train's deviation budget: 1 of 1 used, 0 left" in note
    found = topology(plumb, first[0])
    assert (found.domain, found.spans, found.deviation) == (None, True, True)
    line = plumb.tracer.last(f"ml/{first[0]}")
    assert line is not None
    assert line.deviation is True
    assert line.budget is not None
    assert line.budget.used == 1
    assert "beyond its policy" in explain.render(line)

    # Each zone has 2 cpu left: a second group of 2 x 2 cpu could only span, on no budget.
    second = add_group(plumb, "second", 2, "2")
    await attempt(plumb)
    assert bound(api, second) == {}
    assert plumb.cache.assumed_count() == 4  # the first group's, nothing of the second
    refused = events(api, "FailedScheduling")
    assert sorted(refused) == second
    for name in second:
        assert refused[name].startswith(
            f"pod group is unschedulable, no single {ZONE} domain holds its minimum 2 (none "
            "has the free room); spanning domains needs a deviation. SchedulingPolicy "
            "ml/train's deviation budget: 1 of 1 used, 0 left in the window since "
        )
        assert plumb.queue.where(name) is Where.BACKOFF
    assert sorted(events(api, "PolicyDeviation")) == first  # no more deviations


async def test_schedule_anyway_spans_without_a_deviation(
    plumb: scheduler_module.Scheduler, api: FakeApi
) -> None:
    plumb.feed.resync(zones(a=("6",), b=("6",)), [])
    body = make_policy("train", "ml").gangs(hard=False).budget(max_violations=1).obj()
    plumb.feed.on_policy("ADDED", body)
    names = add_group(plumb, "train", 4, "2")
    await attempt(plumb)
    assert set(bound(api, names).values()) == {"a1", "b1"}
    assert events(api, "PolicyDeviation") == {}
    state = plumb.policies.budget_state(policy(plumb))
    assert state is not None
    assert state.used == 0
    found = topology(plumb, names[0])
    assert (found.spans, found.deviation) == (True, False)
    assert found.text.endswith("(whenUnsatisfiable ScheduleAnyway)")


async def test_without_a_budget_a_group_no_zone_holds_waits_and_says_so(
    plumb: scheduler_module.Scheduler, api: FakeApi
) -> None:
    plumb.feed.resync(zones(a=("6",), b=("6",)), [])
    plumb.feed.on_policy("ADDED", make_policy("train", "ml").gangs().obj())
    names = add_group(plumb, "train", 4, "2")
    await attempt(plumb)
    assert bound(api, names) == {}
    assert plumb.cache.assumed_count() == 0
    for note in events(api, "FailedScheduling").values():
        assert note.endswith("SchedulingPolicy ml/train allows no deviation (no deviationBudget).")


async def test_a_group_that_fits_nowhere_at_all_gets_the_group_s_own_words(
    plumb: scheduler_module.Scheduler, api: FakeApi
) -> None:
    plumb.feed.resync(zones(a=("2",), b=("2",)), [])
    plumb.feed.on_policy("ADDED", make_policy("train", "ml").gangs().budget().obj())
    names = add_group(plumb, "train", 3, "2")
    await attempt(plumb)
    assert bound(api, names) == {}
    refused = events(api, "FailedScheduling")
    assert refused[names[2]] == "0/2 nodes are available: 2 Insufficient cpu."
    assert refused[names[0]].startswith(
        "pod group is unschedulable, minCount (3) cannot be satisfied: 2 scheduled"
    )
    assert topology(plumb, names[0]).text.endswith(", nor do the domains together")
    assert events(api, "PolicyDeviation") == {}
