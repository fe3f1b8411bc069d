"""Preemption in the scheduling loop, with a scripted API: the nomination is written before any
victim is touched, the victims are preempted, the room is held for the nominated pod, the trace
line tells it, and replay makes the same search again."""

from __future__ import annotations

import io
import json
import logging

from plumb import replay, runs
from plumb.backend import queue as queue_module
from plumb.backend.records import objects
from plumb.kernel import reference
from plumb.observability import trace
from plumb_dev.testing.builders import make_node, make_pod
from tests.support.fakes import FakeApi, ManualClock, make_scheduler
from tests.support.log_capture import Lines

HIGH = 1000


def _resident(name: str, node: str, cpu: str, priority: int = 0) -> dict[str, object]:
    pod = make_pod(name, "shop").uid(f"u-{name}").node(node).req(cpu=cpu)
    return (pod.priority(priority) if priority else pod).obj()


def _pending(name: str, cpu: str, priority: int) -> dict[str, object]:
    pod = make_pod(name, "shop").uid(f"u-{name}").scheduler("plumb").req(cpu=cpu)
    return (pod.priority(priority) if priority else pod).obj()


async def _cycle(s: object) -> None:
    from plumb.scheduler import Scheduler

    assert isinstance(s, Scheduler)
    while s.queue.counts().get(queue_module.Where.ACTIVE):
        await s.schedule_batch(await s.queue.pop_batch(8))
        await s.drain()


async def test_a_preemptor_is_nominated_before_its_victims_are_deleted_and_replays(
    json_lines: tuple[logging.Logger, Lines],
) -> None:
    log, handler = json_lines
    api, clock = FakeApi(), ManualClock()
    s = make_scheduler(api, clock, log=log)
    s.feed.resync(
        [make_node("a").capacity(cpu="4").obj(), make_node("b").capacity(cpu="4").obj()],
        [
            *(_resident(f"a{i}", "a", "1") for i in range(4)),
            _resident("b-big", "b", "2"),
            _resident("b-mid1", "b", "1", priority=5),
            _resident("b-mid2", "b", "1", priority=5),
        ],
    )
    vip = _pending("vip", "2", HIGH)
    s.feed.on_pod("ADDED", vip)
    await _cycle(s)

    # The nomination first, then the victim's condition, its deletion: nothing else.
    writes = [(name, str(patch)) for name, patch in api.patches]
    nominate = next(i for i, (name, text) in enumerate(writes) if "nominatedNodeName" in text)
    condition = next(i for i, (name, text) in enumerate(writes) if "DisruptionTarget" in text)
    assert api.patches[nominate][0] == "vip"
    assert api.patches[nominate][1]["status"]["nominatedNodeName"] == "b"
    assert api.patches[condition][0] == "b-big"
    assert nominate < condition
    assert api.deletes == [("b-big", "u-b-big")]
    assert [e["reason"] for e in api.events if e["reason"] == "Preempted"] == ["Preempted"]
    assert s.state.nominations.node_of("u-vip") == "b"

    lines = [r for r in map(trace.from_log_line, handler.lines) if r is not None]
    (line,) = [r for r in lines if r.uid == "u-vip"]
    assert line.result == trace.UNSCHEDULABLE
    assert line.preemption is not None
    assert line.preemption.node == "b"
    assert [v.pod for v in line.preemption.victims] == ["shop/b-big"]
    assert line.preemption.candidates == 2
    assert s.metrics.registry.get_sample_value("plumb_preemption_attempts_total") == 1

    # Replay: the search made again from the dump names the same node and victims.
    document = runs.load(json.loads(json.dumps(s.dump())))
    decided = objects.parse_pod(vip)
    (outcome,) = replay.replay_pods(document, [decided], reference.run)
    assert outcome.preemption is not None
    assert (outcome.preemption.node, outcome.preemption.victims) == ("b", ("shop/b-big",))
    assert "preemption: nominated to b, evicting shop/b-big" in outcome.line()
    out = io.StringIO()
    assert replay.check_log(document, [decided], [line], reference.run, out) == 0

    # The victim leaves: after its backoff, vip goes to its nominated node.
    s.feed.on_pod("DELETED", _resident("b-big", "b", "2"))
    clock.now += 60
    await s.schedule_batch(await s.queue.pop_batch(8))
    await s.drain()
    assert api.binds == [("vip", "b")]


async def test_the_room_is_held_for_the_nominated_pod_against_lower_priority_pods() -> None:
    api, clock = FakeApi(), ManualClock()
    s = make_scheduler(api, clock)
    s.feed.resync([make_node("a").capacity(cpu="4").obj()], [_resident("old", "a", "4")])
    s.feed.on_pod("ADDED", _pending("vip", "4", HIGH))
    await _cycle(s)
    assert s.state.nominations.node_of("u-vip") == "a"
    # The victim is gone; before vip's next attempt, a small priority-0 pod comes first.
    s.feed.on_pod("DELETED", _resident("old", "a", "4"))
    s.feed.on_pod("ADDED", _pending("small", "1", 0))
    await s.schedule_batch(await s.queue.pop_batch(8))  # vip is in backoff: small alone
    await s.drain()
    assert api.binds == []
    # A pod of higher priority than vip is not held back by vip's nomination.
    s.feed.on_pod("ADDED", _pending("vvip", "1", HIGH + 1))
    await s.schedule_batch(await s.queue.pop_batch(8))
    await s.drain()
    assert api.binds == [("vvip", "a")]
