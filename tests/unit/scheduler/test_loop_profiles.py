"""Several profiles in one scheduler, a reload between two batches, and failures isolated to the
pod that caused them: the scheduler's side of a KubeSchedulerConfiguration."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from plumb import binder, events, replay, runs
from plumb import scheduler as scheduler_module
from plumb.backend import queue as queue_module
from plumb.backend.records import hashing, objects, specs
from plumb.framework import emulation, scoring
from plumb.kernel import contract, reference
from plumb.observability import metrics as metrics_module
from plumb_dev.testing.builders import make_node, make_pod
from tests.support.fakes import FakeApi, ManualClock

PACKER = "packer"
SPREADER = "plumb"
# The packer weighs its strategy 5 (as bin-packing profiles do), so that it beats the others.
PACKING_WEIGHTS = (5, *scoring.DEFAULT_WEIGHTS[1:])
SERVED = scheduler_module.Served(
    profiles=(
        scoring.Profile(name=SPREADER),
        scoring.Profile(name=PACKER, strategy=scoring.MOST_ALLOCATED, weights=PACKING_WEIGHTS),
    ),
    digest="abc123",
)
# n1 has 2 of its 4 cpus taken; n2 is empty: LeastAllocated prefers n2, MostAllocated n1.
NODES = [make_node("n1").capacity(cpu="4").obj(), make_node("n2").capacity(cpu="4").obj()]
# The pods, all created at one time, their uid "uid-" and their name.
CREATED = "2026-11-30T00:00:00Z"
# Not plumb's: it holds 2 of n1's cpus.
BUSY = (
    make_pod("busy", "ns")
    .uid("uid-busy")
    .created(CREATED)
    .scheduler("default-scheduler")
    .req(cpu="2")
    .node("n1")
    .obj()
)
SPREAD = (
    make_pod("spread", "ns").uid("uid-spread").created(CREATED).scheduler(SPREADER).req(cpu="500m")
)
PACK = make_pod("pack", "ns").uid("uid-pack").created(CREATED).scheduler(PACKER).req(cpu="500m")
OTHERS = make_pod("x", "ns").uid("uid-x").created(CREATED).scheduler("other").req(cpu="500m")
FIRST = make_pod("first", "ns").uid("uid-first").created(CREATED).scheduler(PACKER).req(cpu="500m")
SECOND = (
    make_pod("second", "ns").uid("uid-second").created(CREATED).scheduler(PACKER).req(cpu="500m")
)
GOOD_1 = (
    make_pod("good1", "ns").uid("uid-good1").created(CREATED).scheduler(SPREADER).req(cpu="500m")
)
BAD = make_pod("bad", "ns").uid("uid-bad").created(CREATED).scheduler(SPREADER).req(cpu="500m")
GOOD_2 = (
    make_pod("good2", "ns").uid("uid-good2").created(CREATED).scheduler(SPREADER).req(cpu="500m")
)
HUGE = make_pod("huge", "ns").uid("uid-huge").created(CREATED).scheduler(SPREADER).req(cpu="8")
SPREAD_PODS = [
    make_pod(f"p{i}", "ns").uid(f"uid-p{i}").created(CREATED).scheduler(SPREADER).req(cpu="500m")
    for i in range(3)
]
PACK_PODS = [
    make_pod(f"p{i}", "ns").uid(f"uid-p{i}").created(CREATED).scheduler(PACKER).req(cpu="700m")
    for i in range(6)
]


def _zone_is(zone: str) -> specs.Requirement:
    return specs.Requirement("topology.kubernetes.io/zone", "In", (zone,))


async def _round(s: scheduler_module.Scheduler) -> None:
    """Pop and decide every batch ready now (one profile per batch), then wait for binds."""
    while s.queue.counts()[queue_module.Where.ACTIVE]:
        entries = await s.queue.pop_batch(8, group=s._group)
        await s.decide(entries)
    await s.drain()


def _served_scheduler(
    api: FakeApi, clock: ManualClock, served: scheduler_module.Served = SERVED, **kwargs: Any
) -> scheduler_module.Scheduler:
    return scheduler_module.Scheduler(
        served=served,
        binder=binder.Binder(api),
        recorder=events.Recorder(api, instance="test", clock=clock),
        queue=queue_module.SchedulingQueue(clock=clock),
        kernel=kwargs.get("kernel", _reference),
        metrics=kwargs.get("metrics"),
    )


async def _reference(cluster: contract.Cluster, batch: contract.Batch) -> contract.Result:
    return reference.run(cluster, batch)


async def test_each_profile_decides_the_pods_that_name_it() -> None:
    api, clock = FakeApi(), ManualClock()
    s = _served_scheduler(api, clock)
    s.feed.resync(NODES, [BUSY, SPREAD.obj(), PACK.obj(), OTHERS.obj()])
    await _round(s)
    assert sorted(api.binds) == [("pack", "n1"), ("spread", "n2")]  # "other" is not ours
    records = {name: s.tracer.last(f"ns/{name}") for name in ("spread", "pack")}
    assert {name: (r.profile, r.config) for name, r in records.items() if r} == {
        "spread": (SPREADER, ""),
        "pack": (PACKER, ""),
    }


async def test_a_reload_switches_profiles_between_batches_and_keeps_the_queue() -> None:
    api, clock = FakeApi(), ManualClock()
    s = _served_scheduler(api, clock)
    s.feed.resync(NODES, [BUSY, FIRST.obj()])
    await _round(s)
    # The packer profile becomes a spreader; the waiting pod is decided under the new one.
    s.feed.on_pod("ADDED", SECOND.obj())
    s.reconfigure(
        dataclasses.replace(
            SERVED,
            profiles=(scoring.Profile(name=SPREADER), scoring.Profile(name=PACKER)),
            digest="def456",
            backoff=queue_module.Backoff(initial=2.0, maximum=4.0),
        )
    )
    await _round(s)
    assert api.binds == [("first", "n1"), ("second", "n2")]
    assert s.queue.backoff_duration(5) == 4.0


def test_a_reload_may_not_change_the_scheduler_names() -> None:
    api, clock = FakeApi(), ManualClock()
    s = _served_scheduler(api, clock)
    with pytest.raises(scheduler_module.ReconfigureError, match="restart plumb"):
        s.reconfigure(scheduler_module.defaults("plumb"))
    assert s.served is SERVED


async def test_a_kernel_failing_on_a_batch_decides_its_pods_one_at_a_time() -> None:
    api, clock = FakeApi(), ManualClock()
    sizes: list[int] = []

    async def kernel(cluster: contract.Cluster, batch: contract.Batch) -> contract.Result:
        sizes.append(batch.size)
        if batch.size > 1:
            raise RuntimeError("the batch kernel broke")
        return reference.run(cluster, batch)

    s = _served_scheduler(api, clock, kernel=kernel)
    s.feed.resync(NODES, [pod.obj() for pod in SPREAD_PODS])
    await _round(s)
    assert sizes == [3, 1, 1, 1]
    assert len(api.binds) == 3
    assert not [e for e in api.events if e["reason"] == "FailedScheduling"]


async def test_a_pod_that_makes_plumb_fail_gets_an_internal_error_and_the_others_go_on() -> None:
    api, clock = FakeApi(), ManualClock()
    metrics = metrics_module.Metrics()
    broken = {"uid-bad"}

    async def kernel(cluster: contract.Cluster, batch: contract.Batch) -> contract.Result:
        if any(int(h) in hashes for h in batch.pod_hashes):
            raise ValueError("a plugin raised for this pod")
        return reference.run(cluster, batch)

    hashes = {hashing.stable_hash(uid) for uid in broken}
    s = _served_scheduler(api, clock, kernel=kernel, metrics=metrics)
    s.feed.resync(NODES, [GOOD_1.obj(), BAD.obj(), GOOD_2.obj()])
    await _round(s)
    assert sorted(name for name, _ in api.binds) == ["good1", "good2"]
    failed = [e for e in api.events if e["reason"] == "FailedScheduling"]
    assert [e["note"] for e in failed] == [
        "internal error: ValueError: a plugin raised for this pod"
    ]
    conditions = [p["status"]["conditions"][0] for name, p in api.patches if name == "bad"]
    assert conditions
    assert conditions[-1]["reason"] == "SchedulerError"
    assert s.queue.where("uid-bad") is queue_module.Where.BACKOFF
    record = s.tracer.last("ns/bad")
    assert record is not None
    assert record.result == "SchedulerError"
    page = metrics.render().decode()
    assert 'plumb_schedule_attempts_total{result="error"} 1.0' in page
    # Fixed, it is retried after its backoff and bound.
    broken.clear()
    hashes.clear()
    clock.now += 2
    await s.decide(await s.queue.pop_batch(8))  # out of its backoff
    await s.drain()
    assert sorted(name for name, _ in api.binds) == ["bad", "good1", "good2"]


@pytest.mark.parametrize(
    ("minor", "words"),
    # DynamicResources' PostFilter is then the only one: its words up to v1.36, none after.
    [(34, " no new claims to deallocate"), (36, " no new claims to deallocate"), (37, "")],
)
async def test_without_default_preemption_a_pod_that_fits_nowhere_is_only_reported(
    minor: int, words: str
) -> None:
    api, clock = FakeApi(), ManualClock()
    profile = scoring.Profile(name=SPREADER, preemption=False, kube=emulation.emulate(minor))
    s = _served_scheduler(api, clock, scheduler_module.Served(profiles=(profile,)))
    s.feed.resync(NODES, [HUGE.obj()])
    await _round(s)
    notes = [e["note"] for e in api.events if e["reason"] == "FailedScheduling"]
    assert notes == [f"0/2 nodes are available: 2 Insufficient cpu.{words}"]
    assert not api.deletes


async def test_replay_decides_again_under_the_profile_of_the_decision() -> None:
    api, clock = FakeApi(), ManualClock()
    packer = scoring.Profile(
        name=PACKER,
        config="abc123",
        strategy=scoring.MOST_ALLOCATED,
        fit_resources=(("cpu", 3), ("memory", 1)),
        filters=frozenset(scoring.FILTERS) - {"InterPodAffinity"},
        spread_defaulting="List",
        added_preferred=((5, specs.NodeSelectorTerm(expressions=(_zone_is("b"),))),),
    )
    s = _served_scheduler(api, clock, scheduler_module.Served(profiles=(packer,), digest="abc123"))
    nodes = [make_node(f"n{i}").zone("ab"[i % 2]).capacity(cpu="4").obj() for i in range(4)]
    bodies = [pod.obj() for pod in PACK_PODS]
    s.feed.resync(nodes, bodies)
    await _round(s)
    document = runs.load(json.loads(json.dumps(s.dump())))
    assert document.runs
    assert all(run.profile == packer for run in document.runs)
    for body in bodies:
        pod = objects.parse_pod(body)
        record = s.tracer.last(pod.key)
        assert record is not None
        assert record.node is not None
        assert (record.profile, record.config) == (PACKER, "abc123")
        (outcome,) = replay.replay_pods(
            document, [pod], reference.run, input_hash=record.input_hash
        )
        assert outcome.replayed.node == record.node
        assert outcome.replayed.plan_hash == record.plan_hash
        assert not outcome.changed
