"""Snapshot dumps and replay: records survive JSON, the journal rewinds the cache exactly, and a
dumped scheduler's decisions are made again with the same node and hashes."""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from plumb import replay, runs
from plumb.backend import queue as queue_module
from plumb.backend.cache import clustercache as cache_module
from plumb.backend.cache import codec, controllers, dumps
from plumb.backend.records import objects
from plumb.framework import scoring
from plumb.framework.plugins import podtopologyspread
from plumb.kernel import reference
from plumb.observability import trace
from plumb_dev.testing.builders import make_node, make_pod
from tests.support.fakes import FakeApi, ManualClock, make_scheduler
from tests.support.log_capture import Lines
from tests.support.policy_builders import make_policy

ZONE = podtopologyspread.ZONE


def _web(name: str, uid: str) -> dict[str, Any]:
    return (
        make_pod(name, "shop")
        .uid(uid)
        .scheduler("plumb")
        .label("app", "web")
        .req(cpu="300m", memory="256Mi")
        .spread(ZONE, 1, selector={"app": "web"})
        .affinity("kubernetes.io/hostname", {"app": "db"}, anti=True)
        .toleration("dedicated", value="web", effect="NoSchedule")
        .host_port(8080)
        .obj()
    )


def test_a_pod_record_survives_json_whole() -> None:
    pod = objects.parse_pod(_web("web-0", "u0"))
    back = codec.decode(objects.PodInfo, json.loads(json.dumps(codec.encode(pod))))
    assert back == pod
    assert back.resource_version == pod.resource_version
    assert trace.digest(back) == trace.digest(pod)
    profile = scoring.Profile(
        strategy=scoring.MOST_ALLOCATED, zone_key=ZONE, zone_factors={"a": 0.25}
    )
    assert codec.decode(scoring.Profile, json.loads(json.dumps(codec.encode(profile)))) == profile


def _fingerprint(cache: cache_module.Cache) -> dict[str, Any]:
    """What a decision reads of a cache, comparable."""
    snap = cache.snapshot()
    selection = podtopologyspread.selection_of(None, "shop")
    return {
        "names": snap.names,
        "resources": snap.resources,
        "allocatable": snap.allocatable.tolist(),
        "requested": snap.requested.tolist(),
        "nonzero": snap.nonzero_requested.tolist(),
        "rows": cache.count_rows([selection]).tolist(),
        "pods": sorted((p.pod.uid, p.node, p.state) for p in cache.placed()),
        "namespaces": dict(cache.namespace_labels),
        "workloads": cache.workloads.state(),
        "ports": cache.used_ports(snap.names),
    }


def test_the_journal_rewinds_a_dump_to_each_state_it_went_through() -> None:
    cache = cache_module.Cache()
    seen: dict[int, dict[str, Any]] = {}

    def saw() -> None:
        seen[cache.journal.seq] = _fingerprint(cache)

    saw()
    for i, zone in enumerate("aab"):
        cache.upsert_node(objects.parse_node(make_node(f"n{i}").zone(zone).capacity(cpu="4").obj()))
    saw()
    cache.set_namespace("shop", {"team": "a"})
    pods = [objects.parse_pod(_web(f"web-{i}", f"u{i}")) for i in range(4)]
    cache.assume(pods[0], "n0")
    saw()
    cache.assume(pods[1], "n1")
    cache.add_pod(objects.parse_pod(make_pod("web-1", "shop").uid("u1").node("n1").obj()))
    saw()
    cache.assume(pods[2], "n2")
    cache.forget("u2")  # its binding failed
    saw()
    cache.add_pod(objects.parse_pod(_web("web-3", "u3") | {"spec": {"nodeName": "n2"}}))
    cache.workloads.on_event(
        controllers.SERVICE,
        "ADDED",
        {"metadata": {"namespace": "shop", "name": "web"}, "spec": {"selector": {"app": "web"}}},
    )
    saw()
    cache.upsert_node(objects.parse_node(make_node("n0").zone("a").capacity(cpu="8").obj()))
    cache.remove_node("n1")
    cache.set_namespace("shop", {"team": "b"})
    cache.remove_pod("u0")
    saw()

    dumped = dumps.load(json.loads(json.dumps(dumps.dump(cache))))
    for seq, expected in seen.items():
        assert _fingerprint(dumped.rewind(seq)) == expected, f"state {seq}"


def test_a_journal_too_short_says_how_far_back_it_reaches() -> None:
    cache = cache_module.Cache(journal_limit=2)
    for i in range(4):
        cache.upsert_node(objects.parse_node(make_node(f"n{i}").capacity(cpu="1").obj()))
    dumped = dumps.load(dumps.dump(cache))
    assert len(dumped.rewind(2).snapshot()) == 2
    with pytest.raises(dumps.DumpError, match="reaches back to cache state 2"):
        dumped.rewind(1)


async def test_every_decision_of_a_dumped_scheduler_replays_to_its_trace_line(
    json_lines: tuple[logging.Logger, Lines],
) -> None:
    log, handler = json_lines
    api, clock = FakeApi(), ManualClock()
    s = make_scheduler(api, clock, log=log, batch_size=4)
    nodes = [make_node(f"n{i}").zone("abc"[i % 3]).capacity(cpu="2").obj() for i in range(6)]
    bodies = []
    for i in range(24):
        pod = make_pod(f"p{i}", "shop").uid(f"u{i}").scheduler("plumb").label("app", f"a{i % 3}")
        if i % 4 == 0:
            pod = pod.spread(ZONE, 1, selector={"app": f"a{i % 3}"})
        if i % 4 == 1:
            pod = pod.affinity("kubernetes.io/hostname", {"app": "a1"}, anti=True)
        bodies.append(pod.req(cpu="400m" if i % 5 else "3").obj())
    s.feed.resync(nodes, [])
    for i, body in enumerate(bodies):  # arriving between the batches
        s.feed.on_pod("ADDED", body)
        if i % 3 == 2:
            await s.schedule_batch(await s.queue.pop_batch(4))
            await s.drain()
    while s.queue.counts().get(queue_module.Where.ACTIVE):
        await s.schedule_batch(await s.queue.pop_batch(4))
        await s.drain()
    lines = [r for r in map(trace.from_log_line, handler.lines) if r is not None]
    assert {r.result for r in lines} == {trace.SCHEDULED, trace.UNSCHEDULABLE}

    document = runs.load(json.loads(json.dumps(s.dump())))
    pods = [objects.parse_pod(body) for body in bodies]
    for record in lines:
        decided = next(p for p in pods if p.uid == record.uid)
        (outcome,) = replay.replay_pods(
            document, [decided], reference.run, input_hash=record.input_hash
        )
        assert outcome.replayed.node == record.node, record.pod
        assert outcome.replayed.plan_hash == record.plan_hash, record.pod
        assert outcome.snapshot == record.snapshot
        assert not outcome.changed
    assert np.unique([r.input_hash for r in lines]).size == len(lines)

    # The same check as one command over the log: every decision reproduced; a line whose
    # plan was altered is reported as differing, and the answer is 1.
    out = io.StringIO()
    assert replay.check_log(document, pods, lines, reference.run, out) == 0
    assert out.getvalue().splitlines()[-1].startswith(f"{len(lines)} of {len(lines)} decisions")
    placed = next(r for r in lines if r.node is not None)
    altered = dataclasses.replace(placed, plan_hash="0" * 32)
    out = io.StringIO()
    assert replay.check_log(document, pods, [altered], reference.run, out) == 1
    assert out.getvalue().startswith(f"DIFFERS    {placed.pod}: the line says node {placed.node}")


def test_replay_says_what_is_wrong_with_its_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pod_file = tmp_path / "pod.json"
    pod_file.write_text(json.dumps(_web("web-0", "u0")))
    not_a_snapshot = tmp_path / "other.json"
    not_a_snapshot.write_text(json.dumps({"kind": "Pod"}))
    assert replay.main(str(not_a_snapshot), str(pod_file), kernel_name="reference") == 1
    assert "not a plumb snapshot" in capsys.readouterr().err

    cache = cache_module.Cache()
    empty = tmp_path / "snapshot.json"
    empty.write_text(json.dumps(runs.snapshot(cache, runs.RunLog(), "plumb")))
    assert replay.main(str(empty), str(pod_file), kernel_name="reference") == 1
    assert "has no decision for pod shop/web-0 (uid u0)" in capsys.readouterr().err

    yaml_file = tmp_path / "pod.yaml"
    yaml_file.write_text("kind: Pod\n")
    assert replay.main(str(empty), str(yaml_file), kernel_name="reference") == 1
    assert "kubectl get pod -o json" in capsys.readouterr().err

    node_list = tmp_path / "nodes.json"
    node_list.write_text(json.dumps({"kind": "List", "items": [{"kind": "Node"}]}))
    assert replay.main(str(empty), str(node_list), kernel_name="reference") == 1
    assert "holds a 'Node', not a Pod" in capsys.readouterr().err


async def test_a_deviation_replays_to_the_node_its_trace_line_names(
    json_lines: tuple[logging.Logger, Lines],
) -> None:
    log, handler = json_lines
    api, clock = FakeApi(), ManualClock()
    s = make_scheduler(api, clock, log=log)
    # Zone c is too small for any web pod: after one pod in a and one in b, the policy's
    # maxSkew 1 blocks every node, and its budget lets two pods deviate.
    nodes = [
        make_node("a1").zone("a").capacity(cpu="4").obj(),
        make_node("b1").zone("b").capacity(cpu="4").obj(),
        make_node("c1").zone("c").capacity(cpu="500m").obj(),
    ]
    s.feed.resync(nodes, [])
    s.feed.on_policy("ADDED", make_policy("web", "shop").spread().budget(max_violations=2).obj())
    bodies = [
        make_pod(f"web-{i}", "shop")
        .uid(f"w{i}")
        .scheduler("plumb")
        .label("app", "web")
        .req(cpu="1")
        .obj()
        for i in range(5)
    ]
    for body in bodies:
        s.feed.on_pod("ADDED", body)
    await s.schedule_batch(await s.queue.pop_batch(8))
    await s.drain()
    lines = [r for r in map(trace.from_log_line, handler.lines) if r is not None]
    deviated = [r for r in lines if r.deviation]
    assert len(deviated) == 2

    document = runs.load(json.loads(json.dumps(s.dump())))
    pods = {p.uid: p for p in map(objects.parse_pod, bodies)}
    for record in deviated:
        (outcome,) = replay.replay_pods(
            document, [pods[record.uid]], reference.run, input_hash=record.input_hash
        )
        assert (outcome.replayed.node, outcome.replayed.plan_hash) == (
            record.node,
            record.plan_hash,
        )


async def test_pods_written_with_another_rfc3339_offset_are_the_same_pods(
    json_lines: tuple[logging.Logger, Lines],
) -> None:
    # The Python client writes creationTimestamp as +00:00 where the API server wrote Z: the
    # same instant, so the same pod; a check that finds no decision to make again fails.
    log, handler = json_lines
    s = make_scheduler(FakeApi(), ManualClock(), log=log)
    bodies = []
    for i in range(3):
        body = make_pod(f"p{i}", "shop").uid(f"u{i}").scheduler("plumb").req(cpu="100m").obj()
        body["metadata"]["creationTimestamp"] = f"2026-11-30T09:00:0{i}Z"
        bodies.append(body)
    s.feed.resync([make_node("n1").capacity(cpu="2").obj()], bodies)
    await s.schedule_batch(await s.queue.pop_batch(8))
    await s.drain()
    lines = [r for r in map(trace.from_log_line, handler.lines) if r is not None]
    document = runs.load(json.loads(json.dumps(s.dump())))
    offset = []
    for body in bodies:
        copy = json.loads(json.dumps(body))
        copy["metadata"]["creationTimestamp"] = body["metadata"]["creationTimestamp"].replace(
            "Z", "+00:00"
        )
        offset.append(objects.parse_pod(copy))
    out = io.StringIO()
    assert replay.check_log(document, offset, lines, reference.run, out) == 0
    assert out.getvalue().splitlines()[-1].startswith("3 of 3 decisions reproduced")
    (outcome,) = replay.replay_pods(document, offset[:1], reference.run)
    assert not outcome.changed

    out = io.StringIO()
    assert replay.check_log(document, [], lines, reference.run, out) == 1
    assert "nothing was checked" in out.getvalue()


async def test_the_topology_labels_a_binding_copies_from_the_node_are_not_a_change(
    json_lines: tuple[logging.Logger, Lines],
) -> None:
    # From Kubernetes v1.35 the API server copies the node's zone and region labels onto each
    # pod it binds (PodTopologyLabels admission), overwriting the pod's own: the pod kubectl
    # shows then is the pod that was decided, but for those labels.
    log, handler = json_lines
    s = make_scheduler(FakeApi(), ManualClock(), log=log)
    plain = make_pod("plain", "shop").uid("u-plain").scheduler("plumb").req(cpu="100m")
    own = make_pod("own", "shop").uid("u-own").scheduler("plumb").req(cpu="100m").label(ZONE, "x")
    bodies = [plain.obj(), own.obj()]
    node = make_node("n1").zone("a").label("topology.kubernetes.io/region", "r").capacity(cpu="2")
    s.feed.resync([node.obj()], bodies)
    await s.schedule_batch(await s.queue.pop_batch(8))
    await s.drain()
    lines = [r for r in map(trace.from_log_line, handler.lines) if r is not None]
    document = runs.load(json.loads(json.dumps(s.dump())))
    topology = {ZONE: "a", "topology.kubernetes.io/region": "r"}
    region = "topology.kubernetes.io/region"
    bound = [
        objects.parse_pod(plain.copy().node("n1").label(ZONE, "a").label(region, "r").obj()),
        # Its own zone "x" overwritten by the node's "a".
        objects.parse_pod(own.copy().node("n1").label(ZONE, "a").label(region, "r").obj()),
    ]
    assert bound[0].labels == topology
    outcomes = replay.replay_pods(document, bound, reference.run)
    assert [(o.replayed.node, o.changed) for o in outcomes] == [("n1", False), ("n1", False)]
    out = io.StringIO()
    assert replay.check_log(document, bound, lines, reference.run, out) == 0
    # A label of another key is the pod's own change.
    relabelled = objects.parse_pod(
        plain.copy().node("n1").label(ZONE, "a").label(region, "r").label("app", "x").obj()
    )
    (outcome,) = replay.replay_pods(document, [relabelled], reference.run)
    assert outcome.changed


def test_reading_a_dump_loads_neither_the_scheduler_nor_numba() -> None:
    """``plumb replay`` imports the recorded runs (plumb.runs) without the live scheduler; numba
    is loaded only when a run is decided with the compiled kernel."""
    probe = (
        "import json, sys; import plumb.replay; "
        "print(json.dumps(sorted(m for m in sys.modules "
        "if m.split('.')[0] == 'numba' or m.startswith('plumb.scheduler'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
