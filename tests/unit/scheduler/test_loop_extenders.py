"""HTTP extenders in plumb's cycles, with a scripted API and a test extender on 127.0.0.1: what
each verb is asked, the FailedScheduling words their answers give, where the pods go, and the
bodies the feed keeps for them (the side-by-side scenarios: tests/integration/test_extenders.py)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from plumb import scheduler as scheduler_module
from plumb.backend import queue as queue_module
from plumb.backend.records import objects
from plumb.extensions import extenders
from plumb.observability import trace
from plumb_dev.testing.builders import make_node, make_pod
from tests.support.extender_server import ExtenderServer, Reply
from tests.support.fakes import FakeApi, ManualClock, make_scheduler


@pytest.fixture(name="server")
def server_fixture() -> Iterator[ExtenderServer]:
    with ExtenderServer() as server:
        yield server


def _with(s: scheduler_module.Scheduler, *configured: extenders.Extender) -> None:
    s.reconfigure(dataclasses.replace(s.served, extenders=extenders.ordered(configured)))


def _pending(name: str, cpu: str = "1", priority: int = 0, **extra: Any) -> dict[str, Any]:
    pod = make_pod(name, "ns").uid(f"u-{name}").scheduler("plumb").req(cpu=cpu, **extra)
    return (pod.priority(priority) if priority else pod).obj()


def _nodes(*names: str, cpu: str = "4") -> list[dict[str, Any]]:
    return [make_node(name).capacity(cpu=cpu, memory="8Gi").obj() for name in names]


async def _cycle(s: scheduler_module.Scheduler) -> None:
    while s.queue.counts().get(queue_module.Where.ACTIVE):
        await s.schedule_batch(await s.next_batch())
        await s.drain()


def _said(api: FakeApi, name: str) -> list[tuple[str, str]]:
    return [
        (e["reason"], e["note"])
        for e in api.events
        if e["regarding"]["name"] == name and e["reason"] in ("FailedScheduling", "Scheduled")
    ]


async def test_filter_reasons_are_counted_and_silent_drops_add_no_words(
    server: ExtenderServer,
) -> None:
    api, clock = FakeApi(), ManualClock()
    s = make_scheduler(api, clock)
    _with(s, extenders.Extender(url_prefix=server.url, filter_verb="filter"))
    cordoned = make_node("n4").capacity(cpu="4", memory="8Gi").unschedulable().obj()
    s.feed.resync([*_nodes("n1", "n2", "n3"), cordoned], [])

    def filter_(args: Any) -> Any:
        if args["Pod"]["metadata"]["name"] == "p-names":
            return {"NodeNames": ["n1"]}  # not read from a non-cache-capable extender
        return {
            "Nodes": {"items": []},
            "FailedNodes": {"n1": "no licence", "n2": "no licence"},
            "FailedAndUnresolvableNodes": {"n3": "rack retired"},
        }

    server.on("filter", filter_)
    s.feed.on_pod("ADDED", _pending("p-none"))
    await _cycle(s)
    (request,) = server.requests("filter")
    sent = {item["metadata"]["name"] for item in request.body["Nodes"]["items"]}
    assert sent == {"n1", "n2", "n3"}  # the cordoned node is not sent
    ((reason, note),) = _said(api, "p-none")
    assert reason == "FailedScheduling"
    assert note.startswith(
        "0/4 nodes are available: 1 node(s) were unschedulable, 1 rack retired, 2 no licence. "
        "preemption: 0/4 nodes are available: 2 No preemption victims found for incoming pod, "
        "2 Preemption is not helpful for scheduling."
    )
    # The pod waits for any cluster event ("Extender"), and its trace names the extender.
    record = s.tracer.last("ns/p-none")
    assert record is not None
    assert record.rejected[extenders.PLUGIN].reasons == {"no licence": 2, "rack retired": 1}
    assert extenders.PLUGIN in s.served.extension_hints("")

    s.feed.on_pod("ADDED", _pending("p-names"))
    await _cycle(s)
    ((_, note),) = _said(api, "p-names")
    assert note.startswith(
        "0/4 nodes are available: 1 node(s) were unschedulable. preemption: 0/4 nodes are "
        "available: 4 Preemption is not helpful for scheduling."
    )


async def test_prioritize_weighs_scores_by_weight_times_ten_and_errors_give_none(
    server: ExtenderServer,
) -> None:
    api, clock = FakeApi(), ManualClock()
    s = make_scheduler(api, clock)
    _with(
        s,
        extenders.Extender(
            url_prefix=server.url, prioritize_verb="prio", weight=3, node_cache_capable=True
        ),
    )
    s.feed.resync(_nodes("n1", "n2", "n3"), [])
    favours = {"p1": {"n2": 10}, "p2": {"n3": 1}}

    def prioritize(args: Any) -> Any:
        name = args["Pod"]["metadata"]["name"]
        if name not in favours:
            return Reply(status=500, body={})
        return [{"Host": h, "Score": favours[name].get(h, 0)} for h in [*args["NodeNames"], "x"]]

    server.on("prio", prioritize)
    for name in ("p1", "p2", "p3"):
        s.feed.on_pod("ADDED", _pending(name, cpu="100m"))
        await _cycle(s)
    # p1 and p2 go where the extender says; p3's prioritize failed (no FailedScheduling).
    assert api.binds[:2] == [("p1", "n2"), ("p2", "n3")]
    assert [name for name, _node in api.binds] == ["p1", "p2", "p3"]
    assert all(body["Nodes"] is None for body in server.bodies("prio"))


async def test_an_extender_error_ends_the_attempt_without_post_filter(
    server: ExtenderServer,
) -> None:
    api, clock = FakeApi(), ManualClock()
    s = make_scheduler(api, clock)
    _with(s, extenders.Extender(url_prefix=server.url, filter_verb="filter"))
    s.feed.resync(_nodes("n1"), [])
    server.on("filter", lambda args: {"Error": "licence server unreachable"})
    s.feed.on_pod("ADDED", _pending("p"))
    await _cycle(s)
    assert _said(api, "p") == [("FailedScheduling", "licence server unreachable")]
    assert s.queue.where("u-p") is queue_module.Where.BACKOFF
    record = s.tracer.last("ns/p")
    assert record is not None
    assert record.result == trace.SCHEDULER_ERROR


async def test_a_pod_the_extender_manages_nothing_of_is_not_sent(server: ExtenderServer) -> None:
    api, clock = FakeApi(), ManualClock()
    s = make_scheduler(api, clock)
    gpu = "example.com/gpu"
    managed = (extenders.ManagedResource(name=gpu, ignored_by_scheduler=True),)
    _with(
        s,
        extenders.Extender(
            url_prefix=server.url,
            filter_verb="filter",
            node_cache_capable=True,
            managed_resources=managed,
        ),
    )
    s.feed.resync(_nodes("n1", "n2"), [])
    server.on("filter", lambda args: {"NodeNames": ["n2"], "FailedNodes": {"n1": "no gpu"}})
    s.feed.on_pod("ADDED", _pending("plain", cpu="100m"))
    s.feed.on_pod("ADDED", _pending("g", cpu="100m", **{gpu: 0}))  # a key of 0 counts
    await _cycle(s)
    assert [b["Pod"]["metadata"]["name"] for b in server.bodies("filter")] == ["g"]
    assert dict(api.binds)["g"] == "n2"


async def test_nodes_returned_whole_are_scored_as_if_empty(server: ExtenderServer) -> None:
    api, clock = FakeApi(), ManualClock()
    s = make_scheduler(api, clock)
    _with(s, extenders.Extender(url_prefix=server.url, filter_verb="filter"))
    busy = make_pod("busy", "ns").uid("u-busy").node("a").req(cpu="15", memory="30Gi").obj()
    s.feed.resync(
        [
            make_node("a").capacity(cpu="16", memory="32Gi").obj(),
            make_node("b").capacity(cpu="4", memory="8Gi").obj(),
        ],
        [busy],
    )
    server.on("filter", lambda args: {"Nodes": args["Nodes"]})
    s.feed.on_pod("ADDED", _pending("p", cpu="1", memory="2Gi"))
    await _cycle(s)
    assert api.binds == [("p", "a")]  # a's 15 cpus are not counted: 93 + 100 beats 75 + 100


async def test_the_binding_extender_binds_and_its_error_is_retried(server: ExtenderServer) -> None:
    api, clock = FakeApi(), ManualClock()
    s = make_scheduler(api, clock)
    _with(s, extenders.Extender(url_prefix=server.url, bind_verb="bind"))
    s.feed.resync(_nodes("n1"), [])
    answers = [{"Error": "gpu driver not ready"}, {}]
    server.on("bind", lambda args: answers.pop(0))
    s.feed.on_pod("ADDED", _pending("g"))
    await _cycle(s)
    assert api.binds == []  # the extender binds, not plumb
    assert _said(api, "g") == [("FailedScheduling", "gpu driver not ready")]
    assert s.cache.state("u-g") is None
    clock.advance(60)
    await s.schedule_batch(await s.next_batch())
    await s.drain()
    assert [b["PodUID"] for b in server.bodies("bind")] == ["u-g", "u-g"]
    assert _said(api, "g")[-1] == ("Scheduled", "Successfully assigned ns/g to n1")
    assert s.cache.node_of("u-g") == "n1"  # assumed until the watch shows it bound


async def test_the_preempting_extender_chooses_the_victims(server: ExtenderServer) -> None:
    api, clock = FakeApi(), ManualClock()
    s = make_scheduler(api, clock)
    _with(s, extenders.Extender(url_prefix=server.url, preempt_verb="preempt"))
    v1 = make_pod("v1", "ns").uid("u-v1").node("n1").priority(200).req(cpu="2").obj()
    v2 = make_pod("v2", "ns").uid("u-v2").node("n2").priority(100).req(cpu="2").obj()
    s.feed.resync(_nodes("n1", "n2", cpu="2"), [v1, v2])
    server.on(
        "preempt",
        lambda args: {"NodeNameToMetaVictims": {"n1": {"Pods": [{"UID": "u-v1"}]}}},
    )
    s.feed.on_pod("ADDED", _pending("h", cpu="2", priority=1000))
    await _cycle(s)
    (request,) = server.bodies("preempt")
    assert request["NodeNameToMetaVictims"] is None
    assert {
        n: [p["metadata"]["uid"] for p in v["Pods"]]
        for n, v in request["NodeNameToVictims"].items()
    } == {"n1": ["u-v1"], "n2": ["u-v2"]}
    assert api.deletes == [("v1", "u-v1")]
    assert s.state.nominations.node_of("u-h") == "n1"


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        ({"NodeNameToMetaVictims": {}}, "preemption: no candidate node for preemption"),
        (
            {"NodeNameToMetaVictims": {"n1": {"Pods": []}}},
            'preemption: expected at least one victim pod on node "n1"',
        ),
        (
            {"NodeNameToMetaVictims": {"n1": {"Pods": [{"UID": "u-v2"}]}}},
            "preemption: extender: URL claims to preempt pod (UID: &{u-v2}) on node: n1, "
            "but the pod is not found on that node",
        ),
    ],
)
async def test_a_preempting_extender_that_leaves_no_victims(
    server: ExtenderServer, answer: Any, words: str
) -> None:
    api, clock = FakeApi(), ManualClock()
    s = make_scheduler(api, clock)
    _with(
        s,
        extenders.Extender(url_prefix=server.url, preempt_verb="preempt", node_cache_capable=True),
    )
    v1 = make_pod("v1", "ns").uid("u-v1").node("n1").priority(200).req(cpu="2").obj()
    v2 = make_pod("v2", "ns").uid("u-v2").node("n2").priority(100).req(cpu="2").obj()
    s.feed.resync(_nodes("n1", "n2", cpu="2"), [v1, v2])
    server.on("preempt", lambda args: answer)
    s.feed.on_pod("ADDED", _pending("h", cpu="2", priority=1000))
    await _cycle(s)
    ((_, note),) = _said(api, "h")
    assert note == "0/2 nodes are available: 2 Insufficient cpu. " + words.replace(
        "URL", server.url
    )
    assert api.deletes == []
    assert server.bodies("preempt")[0]["NodeNameToVictims"] is None


def test_the_feed_keeps_the_bodies_extenders_are_sent_only_while_they_are() -> None:
    api, clock = FakeApi(), ManualClock()
    s = make_scheduler(api, clock)
    s.feed.resync(_nodes("n1"), [_pending("p")])
    assert len(s.state.bodies) == 0  # no extender: nothing kept
    assert s.shares_batch(objects.parse_pod(_pending("q")))
    _with(s, extenders.Extender(url_prefix="http://127.0.0.1:1", filter_verb="f"))
    s.feed.resync(_nodes("n1"), [_pending("p")])
    assert s.state.bodies.pod("u-p") is not None
    assert s.state.bodies.node("n1") is not None
    assert not s.shares_batch(objects.parse_pod(_pending("q")))  # decided alone
    s.feed.on_pod("MODIFIED", make_pod("p", "ns").uid("u-p").scheduler("plumb").node("n1").obj())
    assert s.state.bodies.pod("u-p") is None  # bound: no preempt verb wants it
    s.feed.on_node("DELETED", _nodes("n1")[0])
    assert s.state.bodies.node("n1") is None
    s.feed.on_node("ADDED", _nodes("n2")[0])
    s.reconfigure(dataclasses.replace(s.served, extenders=()))
    assert len(s.state.bodies) == 0  # none needed any more
