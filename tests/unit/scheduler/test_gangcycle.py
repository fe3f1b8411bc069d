"""Pod groups through the whole loop (feed, queue, kernel, binding) with a fake API server:
all of a group's minimum placed together or none, in kube-scheduler's words for an upstream
PodGroup and scheduler-plugins' for theirs."""

from __future__ import annotations

from typing import Any

import pytest

from plumb import explain
from plumb import scheduler as scheduler_module
from plumb.backend import queue as queue_module
from plumb.backend.cache import clustercache as cache_module
from plumb.backend.queue import Where
from plumb.backend.records import groupobjects
from plumb.k8s import client as k8s_client
from plumb.observability import trace
from plumb_dev.testing.builders import make_node, make_pod
from plumb_dev.testing.groupbuilders import POD_GROUP_LABEL, make_coscheduling_group, make_group
from tests.support.fakes import FakeApi, ManualClock, make_scheduler

UPSTREAM = groupobjects.UPSTREAM
COSCHEDULING = groupobjects.COSCHEDULING
NO_VICTIMS = "pod group preemption: No preemption victims found for incoming preemptor"


class GroupApi(FakeApi):
    """FakeApi that also takes PodGroup status patches."""

    def __init__(self) -> None:
        super().__init__()
        self.group_patches: list[tuple[str, dict[str, Any]]] = []

    async def patch_pod_group_status(
        self, *, namespace: str, name: str, patch: dict[str, Any]
    ) -> k8s_client.ApiResponse:
        self.group_patches.append((name, patch))
        return k8s_client.ApiResponse(status=200, body={})


def nodes(*cpus: int) -> list[dict[str, Any]]:
    return [make_node(f"n{i}").capacity(cpu=str(cpu)).obj() for i, cpu in enumerate(cpus, 1)]


def member(name: str, group: str, cpu: str = "2") -> dict[str, Any]:
    pod = make_pod(name, "ml").uid(name).scheduler("plumb").req(cpu=cpu)
    return pod.created("2026-12-01T00:00:00Z").pod_group(group).obj()


def labelled(name: str, group: str, cpu: str = "2") -> dict[str, Any]:
    pod = make_pod(name, "ml").uid(name).scheduler("plumb").req(cpu=cpu)
    return pod.created("2026-12-01T00:00:00Z").label(POD_GROUP_LABEL, group).obj()


@pytest.fixture
def api() -> GroupApi:
    return GroupApi()


@pytest.fixture
def plumb(api: GroupApi) -> scheduler_module.Scheduler:
    return make_scheduler(api, ManualClock(), group_api=api)


async def attempt(s: scheduler_module.Scheduler) -> None:
    await s.schedule_batch(await s.next_batch())
    await s.drain()


def messages(api: FakeApi) -> dict[str, str]:
    """The last FailedScheduling note per pod."""
    found = {}
    for event in api.events:
        if event["reason"] == "FailedScheduling":
            found[event["regarding"]["name"]] = event["note"]
    return found


def conditions(api: GroupApi) -> list[tuple[str, str, str]]:
    out = []
    for _name, patch in api.group_patches:
        (condition,) = patch["status"]["conditions"]
        out.append((condition["status"], condition["reason"], condition["message"]))
    return out


async def test_a_gang_that_fits_is_bound_together(
    plumb: scheduler_module.Scheduler, api: GroupApi
) -> None:
    plumb.feed.on_pod_group(UPSTREAM, "ADDED", make_group("train", "ml", 3).uid("g").obj())
    plumb.feed.resync(nodes(4, 4), [member(f"w{i}", "train") for i in range(3)])
    await attempt(plumb)
    assert sorted(name for name, _ in api.binds) == ["w0", "w1", "w2"]
    assert conditions(api) == [("True", "Scheduled", "")]


async def test_a_gang_that_does_not_fit_binds_nothing_and_says_why(
    plumb: scheduler_module.Scheduler, api: GroupApi
) -> None:
    plumb.feed.on_pod_group(UPSTREAM, "ADDED", make_group("train", "ml", 3).uid("g").obj())
    plumb.feed.resync(nodes(2, 2), [member(f"w{i}", "train") for i in range(3)])
    await attempt(plumb)
    assert api.binds == []
    assert plumb.cache.assumed_count() == 0
    group = f"minCount (3) cannot be satisfied: 2 scheduled, 0 remaining, {NO_VICTIMS}"
    assert messages(api) == {
        "w0": f"pod group is unschedulable, {group}",
        "w1": f"pod group is unschedulable, {group}",
        "w2": "0/2 nodes are available: 2 Insufficient cpu.",
    }
    assert conditions(api) == [("False", "Unschedulable", group)]
    # Retried after a backoff, as a group (kube-scheduler's group backoff, not a cluster event).
    assert {plumb.queue.where(f"w{i}") for i in range(3)} == {Where.BACKOFF}


async def test_members_after_the_minimum_became_unreachable_are_not_tried(
    plumb: scheduler_module.Scheduler, api: GroupApi
) -> None:
    plumb.feed.on_pod_group(UPSTREAM, "ADDED", make_group("train", "ml", 3).uid("g").obj())
    plumb.feed.resync(nodes(1), [member(f"w{i}", "train") for i in range(3)])
    await attempt(plumb)
    assert messages(api) == {
        "w0": "0/1 nodes are available: 1 Insufficient cpu.",
        "w1": "minCount (3) cannot be satisfied: 0 scheduled, 2 remaining",
        "w2": "minCount (3) cannot be satisfied: 0 scheduled, 2 remaining",
    }


async def test_a_min_count_below_the_group_size_places_what_fits(
    plumb: scheduler_module.Scheduler, api: GroupApi
) -> None:
    plumb.feed.on_pod_group(UPSTREAM, "ADDED", make_group("train", "ml", 2).uid("g").obj())
    plumb.feed.resync(nodes(2, 2), [member(f"w{i}", "train") for i in range(3)])
    await attempt(plumb)
    assert sorted(name for name, _ in api.binds) == ["w0", "w1"]
    assert messages(api) == {"w2": "0/2 nodes are available: 2 Insufficient cpu."}


async def test_members_wait_unseen_until_the_group_and_its_minimum_exist(
    plumb: scheduler_module.Scheduler, api: GroupApi
) -> None:
    plumb.feed.resync(nodes(4, 4), [member("w0", "train"), member("w1", "train")])
    assert plumb.queue.where("w0") is Where.GATED  # no PodGroup yet
    plumb.feed.on_pod_group(UPSTREAM, "ADDED", make_group("train", "ml", 3).uid("g").obj())
    assert plumb.queue.where("w0") is Where.GATED  # two of three
    plumb.feed.on_pod("ADDED", member("w2", "train"))
    assert {plumb.queue.where(f"w{i}") for i in range(3)} == {Where.ACTIVE}
    await attempt(plumb)
    assert sorted(name for name, _ in api.binds) == ["w0", "w1", "w2"]
    assert messages(api) == {}  # waiting in PreEnqueue writes no event


async def test_a_lowered_min_count_lets_the_members_in(
    plumb: scheduler_module.Scheduler, api: GroupApi
) -> None:
    plumb.feed.resync(nodes(4, 4), [member("w0", "train"), member("w1", "train")])
    plumb.feed.on_pod_group(UPSTREAM, "ADDED", make_group("train", "ml", 3).uid("g").obj())
    plumb.feed.on_pod_group(UPSTREAM, "MODIFIED", make_group("train", "ml", 2).uid("g").obj())
    assert plumb.queue.where("w0") is Where.ACTIVE
    await attempt(plumb)
    assert sorted(name for name, _ in api.binds) == ["w0", "w1"]


async def test_a_group_and_single_pods_are_decided_apart(
    plumb: scheduler_module.Scheduler, api: GroupApi
) -> None:
    plumb.feed.on_pod_group(UPSTREAM, "ADDED", make_group("train", "ml", 2).uid("g").obj())
    single = make_pod("solo", "ml").uid("solo").scheduler("plumb").req(cpu="1").obj()
    plumb.feed.resync(nodes(5), [single, member("w0", "train"), member("w1", "train")])
    first = await plumb.next_batch()
    assert {e.pod.uid for e in first} == {"solo"}  # the first in line, alone
    await plumb.schedule_batch(first)
    second = await plumb.next_batch()
    assert {e.pod.uid for e in second} == {"w0", "w1"}
    await plumb.schedule_batch(second)
    await plumb.drain()
    assert sorted(name for name, _ in api.binds) == ["solo", "w0", "w1"]


async def test_members_placed_before_count_towards_the_minimum(
    plumb: scheduler_module.Scheduler, api: GroupApi
) -> None:
    plumb.feed.on_pod_group(UPSTREAM, "ADDED", make_group("train", "ml", 3).uid("g").obj())
    bound = make_pod("w0", "ml").uid("w0").scheduler("plumb").req(cpu="2").pod_group("train")
    plumb.feed.resync(
        nodes(4, 2),
        [bound.node("n2").obj(), member("w1", "train"), member("w2", "train")],
    )
    await attempt(plumb)
    assert sorted(name for name, _ in api.binds) == ["w1", "w2"]
    assert plumb.cache.state("w1") is cache_module.PodState.ASSUMED


async def test_coscheduling_members_too_few_for_min_member_are_refused_in_its_words(
    plumb: scheduler_module.Scheduler, api: GroupApi
) -> None:
    plumb.feed.on_pod_group(
        COSCHEDULING, "ADDED", make_coscheduling_group("train", "ml", 3).uid("g").obj()
    )
    plumb.feed.resync(nodes(4, 4), [labelled("w0", "train"), labelled("w1", "train")])
    await attempt(plumb)
    assert api.binds == []
    note = (
        "0/2 nodes are available: pre-filter pod w0 cannot find enough sibling pods, current "
        "pods number: 2, minMember of group: 3. no new claims to deallocate, preemption: 0/2 "
        "nodes are available: 2 "
        "Preemption is not helpful for scheduling., PodGroup ml/train gets rejected due to "
        "Pod w0 is unschedulable even after PostFilter"
    )
    assert messages(api)["w0"] == note
    assert plumb.queue.where("w0") is Where.UNSCHEDULABLE
    # The missing member arrives: it is tried with the others, and all three are bound.
    plumb.feed.on_pod("ADDED", labelled("w2", "train"))
    await attempt(plumb)
    assert sorted(name for name, _ in api.binds) == ["w0", "w1", "w2"]
    assert api.group_patches == []  # scheduler-plugins' scheduler writes no status


async def test_coscheduling_group_that_fits_is_bound_together(
    plumb: scheduler_module.Scheduler, api: GroupApi
) -> None:
    plumb.feed.on_pod_group(
        COSCHEDULING, "ADDED", make_coscheduling_group("train", "ml", 2).uid("g").obj()
    )
    plumb.feed.resync(nodes(2, 2), [labelled("w0", "train"), labelled("w1", "train")])
    await attempt(plumb)
    assert sorted(name for name, _ in api.binds) == ["w0", "w1"]


async def test_a_member_whose_priority_is_not_the_group_s_fails_the_group_as_an_error(
    plumb: scheduler_module.Scheduler, api: GroupApi
) -> None:
    plumb.feed.on_pod_group(UPSTREAM, "ADDED", make_group("train", "ml", 2).uid("g").obj())
    urgent = make_pod("w1", "ml").uid("w1").scheduler("plumb").req(cpu="2").priority(100)
    plumb.feed.resync(nodes(4, 4), [member("w0", "train"), urgent.pod_group("train").obj()])
    await attempt(plumb)
    assert api.binds == []
    error = (
        "all pods in a single pod group should have the same priority as the pod group's "
        "priority, got 100 and 0"
    )
    assert messages(api) == {"w0": error, "w1": error}
    assert conditions(api) == [("False", "SchedulerError", error)]


def with_port(name: str) -> dict[str, Any]:
    pod = make_pod(name, "ml").uid(name).scheduler("plumb").req(cpu="1").host_port(8080)
    return pod.created("2026-12-01T00:00:00Z").pod_group("train").obj()


async def test_members_that_need_a_run_of_their_own_see_the_members_placed_before_them(
    plumb: scheduler_module.Scheduler, api: GroupApi
) -> None:
    plumb.feed.on_pod_group(UPSTREAM, "ADDED", make_group("train", "ml", 2).uid("g").obj())
    plumb.feed.resync(nodes(4, 4), [with_port("w0"), with_port("w1")])
    await attempt(plumb)
    assert sorted(node for _, node in api.binds) == ["n1", "n2"]  # one port 8080 per node


async def test_a_refused_group_keeps_nothing_reserved(
    plumb: scheduler_module.Scheduler, api: GroupApi
) -> None:
    plumb.feed.on_pod_group(UPSTREAM, "ADDED", make_group("train", "ml", 2).uid("g").obj())
    plumb.feed.resync(nodes(4), [with_port("w0"), with_port("w1")])
    await attempt(plumb)
    assert api.binds == []
    assert plumb.cache.assumed_count() == 0
    assert plumb.cache.nodes.requested("n1")["pods"] == 0
    assert messages(api)["w0"].startswith("pod group is unschedulable, minCount (2) cannot")
    assert messages(api)["w1"] == (
        "0/1 nodes are available: 1 node(s) didn't have free ports for the requested pod ports."
    )


async def test_each_member_s_trace_names_its_group_and_the_group_s_outcome(
    plumb: scheduler_module.Scheduler, api: GroupApi
) -> None:
    plumb.feed.on_pod_group(UPSTREAM, "ADDED", make_group("train", "ml", 3).uid("g").obj())
    plumb.feed.resync(nodes(2, 2), [member(f"w{i}", "train") for i in range(3)])
    await attempt(plumb)
    status = f"minCount (3) cannot be satisfied: 2 scheduled, 0 remaining, {NO_VICTIMS}"
    expected = trace.GroupRecord(
        name="ml/train",
        api=UPSTREAM,
        minimum=3,
        scheduled=2,
        members=3,
        result=trace.UNSCHEDULABLE,
        message=status,
    )
    for name in ("w0", "w1", "w2"):
        line = plumb.tracer.last(f"ml/{name}")
        assert line is not None
        assert line.result == trace.UNSCHEDULABLE
        assert line.group == expected
        # A line as written reads back with its group.
        assert trace.Trace.from_fields(line.fields()) == line


async def test_a_pod_labelled_for_a_missing_coscheduling_group_is_not_bound(
    api: GroupApi,
) -> None:
    clock = ManualClock()
    plumb = make_scheduler(api, clock, group_api=api)
    plumb.feed.resync(nodes(4), [labelled("orphan", "missing")])
    await attempt(plumb)
    assert api.binds == []
    assert messages(api) == {"orphan": "0/1 nodes are available: 1 PodGroup not found."}
    line = plumb.tracer.last("ml/orphan")
    assert line is not None
    assert (line.result, line.node) == (trace.UNSCHEDULABLE, None)
    # Its PodGroup made: it is tried again, and bound.
    plumb.feed.on_pod_group(
        COSCHEDULING, "ADDED", make_coscheduling_group("missing", "ml", 1).uid("g").obj()
    )
    assert plumb.queue.where("orphan") is Where.BACKOFF
    clock.advance(1.0)
    await attempt(plumb)
    assert api.binds == [("orphan", "n1")]


async def test_a_member_whose_binding_fails_is_bound_again_where_its_group_put_it() -> None:
    api = GroupApi()
    api.script = [
        k8s_client.ApiResponse(status=201, body={}),
        k8s_client.ApiResponse(status=500, body={"message": "etcd leader changed"}),
    ]
    plumb = make_scheduler(api, ManualClock(), group_api=api)
    plumb.queue.backoff_policy = queue_module.Backoff(initial=0.01, maximum=0.01)
    plumb.feed.on_pod_group(UPSTREAM, "ADDED", make_group("train", "ml", 2).uid("g").obj())
    plumb.feed.resync(nodes(2, 2), [member("w0", "train"), member("w1", "train")])
    await attempt(plumb)
    # The second binding was refused, then sent again to the same node: the group's room was
    # never given up (a pod of another group could otherwise take it).
    (first, second, third) = api.binds
    assert second == third
    assert {first[1], second[1]} == {"n1", "n2"}
    assert plumb.cache.state(second[0]) is cache_module.PodState.ASSUMED


async def test_plumb_explain_says_which_group_a_member_waits_with_and_why(
    plumb: scheduler_module.Scheduler, api: GroupApi
) -> None:
    plumb.feed.on_pod_group(UPSTREAM, "ADDED", make_group("train", "ml", 3).uid("g").obj())
    plumb.feed.resync(nodes(2, 2), [member(f"w{i}", "train") for i in range(3)])
    await attempt(plumb)
    line = plumb.tracer.last("ml/w0")
    assert line is not None
    text = explain.render(line)
    status = f"minCount (3) cannot be satisfied: 2 scheduled, 0 remaining, {NO_VICTIMS}"
    assert (
        "group:    PodGroup ml/train: 2 of its minimum 3 found a node (3 members tried in this "
        "cycle); not placed: nothing of it stays reserved\n"
        f"  {status}\n"
    ) in text


async def test_a_gang_left_bound_in_part_by_a_crash_is_finished_first(
    plumb: scheduler_module.Scheduler, api: GroupApi
) -> None:
    # A restarted plumb finds b with 2 of its 4 members bound (its other bindings were lost
    # with the crash) and a, listed first, waiting whole. The room left holds b's two, or a
    # part of a: b goes first and is finished; a, which would not fit whole, binds nothing.
    for name in ("a", "b"):
        group = make_coscheduling_group(name, "ml", 4).uid(f"g-{name}").obj()
        plumb.feed.on_pod_group(COSCHEDULING, "ADDED", group)
    bound = []
    for i in range(2):
        body = labelled(f"b-{i}", "b", "1")
        body["spec"]["nodeName"] = "n1"
        bound.append(body)
    pending = [labelled(f"a-{i}", "a", "1") for i in range(4)]
    pending += [labelled(f"b-{i}", "b", "1") for i in range(2, 4)]
    plumb.feed.resync(nodes(4, 2), bound + pending)
    await attempt(plumb)  # b's two
    await attempt(plumb)  # a, whole or not at all
    assert sorted(name for name, _ in api.binds) == ["b-2", "b-3"]
