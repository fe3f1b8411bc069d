"""Decisions the Python plugins took part in replay from a snapshot dump to their trace lines:
the plugins are called again with the cycle's clock as it was, and a replay with another
version of a plugin says so (one without the plugin refuses, naming it)."""

from __future__ import annotations

import json
import logging
import time

import pytest

from plumb import binder, events, replay, runs
from plumb import scheduler as scheduler_module
from plumb.backend import queue as queue_module
from plumb.backend.records import objects
from plumb.extensions import registry
from plumb.framework import schedconfig
from plumb.kernel import reference
from plumb.observability import trace, tracing
from plumb.scheduler import profiles
from plumb_dev.testing.builders import make_node, make_pod
from tests.support import sample_plugins
from tests.support.fakes import FakeApi, ManualClock, reference_kernel
from tests.support.log_capture import Lines

FOUND = registry.of(sample_plugins.RackFilter, sample_plugins.CheapScore, sample_plugins.Curfew)
CONFIG = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: plumb
  plugins:
    filter: {enabled: [{name: RackFilter}, {name: Curfew}]}
    score: {enabled: [{name: CheapScore, weight: 2}]}
"""


async def test_a_plugins_decisions_replay_to_their_trace_lines_at_the_cycles_clock(
    json_lines: tuple[logging.Logger, Lines], monkeypatch: pytest.MonkeyPatch
) -> None:
    log, handler = json_lines
    api, clock = FakeApi(), ManualClock()
    served = profiles.Served(profiles=schedconfig.parse(CONFIG, extensions=FOUND).profiles)
    s = scheduler_module.Scheduler(
        served=served,
        binder=binder.Binder(api),
        recorder=events.Recorder(api, instance="test", clock=clock),
        kernel=reference_kernel,
        batch_size=4,
        queue=queue_module.SchedulingQueue(clock=clock),
        tracer=tracing.Tracer(log=log, clock=clock),
        extensions=FOUND,
    )
    # n1 is the cheapest but its curfew has passed (by the wall clock the cycle reads).
    rack = "plumb.test/rack"
    nodes = [
        make_node("n0").label(rack, "a").label("plumb.test/price", "30").capacity(cpu="1").obj(),
        make_node("n1")
        .label(rack, "a")
        .label("plumb.test/price", "5")
        .label("plumb.test/curfew", str(int(time.time()) - 60))
        .obj(),
        make_node("n2").label(rack, "a").label("plumb.test/price", "10").capacity(cpu="1").obj(),
        make_node("n3").label(rack, "b").label("plumb.test/price", "1").obj(),
    ]
    s.feed.resync(nodes, [])
    bodies = [
        make_pod(f"p{i}", "shop").uid(f"u{i}").scheduler("plumb").req(cpu="600m").obj()
        for i in range(3)
    ]
    for body in bodies:
        s.feed.on_pod("ADDED", body)
    await s.schedule_batch(await s.queue.pop_batch(4))
    await s.drain()
    lines = [r for r in map(trace.from_log_line, handler.lines) if r is not None]
    # n2 (10) before n0 (30); each takes one pod; the third fits nowhere allowed.
    assert {r.pod: r.node for r in lines} == {"shop/p0": "n2", "shop/p1": "n0", "shop/p2": None}
    assert lines[0].plugins == {"RackFilter": "1.0", "CheapScore": "2.0", "Curfew": "1.0"}

    monkeypatch.setattr(registry, "installed", lambda builtin: FOUND)
    document = runs.load(json.loads(json.dumps(s.dump())))
    pods = [objects.parse_pod(body) for body in bodies]
    for record in lines:
        decided = next(p for p in pods if p.uid == record.uid)
        (outcome,) = replay.replay_pods(document, [decided], reference.run)
        assert (outcome.replayed.node, outcome.replayed.plan_hash) == (
            record.node,
            record.plan_hash,
        )
        assert outcome.replayed.input_hash == record.input_hash
        assert outcome.plugins == ()

    # Another version of a plugin installed: the replay says so.
    monkeypatch.setattr(sample_plugins.Curfew, "version", "1.1")
    moved = registry.of(sample_plugins.RackFilter, sample_plugins.CheapScore, sample_plugins.Curfew)
    monkeypatch.setattr(registry, "installed", lambda builtin: moved)
    (outcome,) = replay.replay_pods(document, [pods[0]], reference.run)
    assert outcome.plugins == (
        "plugin Curfew 1.0 decided it; 1.1 is installed here: the replay may decide otherwise",
    )
    assert "plugin Curfew 1.0 decided it; 1.1 is installed here" in outcome.line()

    # Without it, the replay refuses, naming it.
    monkeypatch.setattr(
        registry, "installed", lambda builtin: registry.of(sample_plugins.RackFilter)
    )
    with pytest.raises(replay.ReplayError, match=r"plugin CheapScore 2\.0 decided it; it is not"):
        replay.replay_pods(document, [pods[0]], reference.run)
