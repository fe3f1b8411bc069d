"""Trace lines: what one decision's line says (the node, the FailedScheduling histogram, the
policy), that it reads back exactly from either log format, that the hashes are stable, and
that a storm of failures cannot flood the log."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import subprocess
import sys
from typing import Any

import pytest

from plumb.backend import queue as queue_module
from plumb.backend.records import objects
from plumb.framework import cycle, scoring, traces
from plumb.k8s import client as k8s_client
from plumb.kernel import reference
from plumb.observability import logs, trace, tracing
from plumb_dev.testing.builders import make_node, make_pod
from tests.support import small_clusters
from tests.support.fakes import FakeApi, ManualClock, make_scheduler
from tests.support.log_capture import Lines

RECORD = trace.Trace(
    pod="shop/web-3",
    uid="uid-web-3",
    result=trace.SCHEDULED,
    node="node-b",
    attempts=1,
    feasible=3,
    total=4,
    rejected={
        "TaintToleration": trace.Rejection(nodes=1, reasons={"node(s) had untolerated taint(s)": 1})
    },
    candidates=(
        trace.CandidateRecord(node="node-b", score=612, scores={"NodeResourcesFit": 88, "x y": 3}),
        trace.CandidateRecord(node="node-a", score=598, scores={"NodeResourcesFit": 90, "x y": 0}),
    ),
    weights={"NodeResourcesFit": 1, "x y": 2},
    policy="shop/web-spread",
    generation=2,
    budget=trace.BudgetRecord(
        used=1, remaining=2, max_violations=3, open=True, text="1 of 3 used, 2 left"
    ),
    snapshot=41,
    input_hash="a" * 32,
    plan_hash="b" * 32,
    queue_wait_ms=0.25,
    kernel_ms=1.5,
    bind_ms=12.125,
    batch=4,
)


# Log formats ---------------------------------------------------------------------------------


def test_a_json_line_is_one_object_and_reads_back_as_the_same_record(
    json_lines: tuple[logging.Logger, Lines],
) -> None:
    log, handler = json_lines
    tracing.Tracer(log=log).emit(RECORD)
    (line,) = handler.lines
    entry = json.loads(line)
    assert (entry["level"], entry["logger"]) == ("INFO", trace.LOGGER)
    assert entry["msg"] == "Scheduled shop/web-3 on node-b"
    assert entry["time"].endswith("Z")
    assert entry["node"] == "node-b"
    assert entry["candidates"][0]["scores"] == {"NodeResourcesFit": 88, "x y": 3}
    assert trace.from_log_line(line) == RECORD


def test_a_plain_line_reads_as_key_values_and_back_as_the_same_record(
    plain_lines: tuple[logging.Logger, Lines],
) -> None:
    log, handler = plain_lines
    tracing.Tracer(log=log).emit(RECORD)
    (line,) = handler.lines
    assert ' INFO plumb.trace: Scheduled shop/web-3 on node-b pod="shop/web-3" ' in line
    assert ' node="node-b" ' in line
    assert " feasible=3 total=4 " in line
    assert trace.from_log_line(line) == RECORD
    assert trace.from_log_line(f"[pod/plumb-7d9/plumb] {line}") == RECORD  # kubectl --prefix


def test_a_claim_pods_devices_and_claims_read_back_from_either_format(
    json_lines: tuple[logging.Logger, Lines], plain_lines: tuple[logging.Logger, Lines]
) -> None:
    placed = dataclasses.replace(
        RECORD,
        devices=(
            trace.DeviceRecord(
                claim="shop/web-3-gpu", request="gpu/large", driver="gpu.example.com",
                pool="node-b", device="gpu-1",
            ),
        ),
    )  # fmt: skip
    failed = dataclasses.replace(
        RECORD,
        result=trace.UNSCHEDULABLE,
        node=None,
        claims=(
            trace.ClaimRejection(
                claim="shop/web-3-gpu",
                reason="cannot allocate all claims",
                nodes=7,
                examples=("node-a", "node-b"),
            ),
            trace.ClaimRejection(claim="", reason="resourceclaim in use", nodes=1),
        ),
    )
    for log, handler in (json_lines, plain_lines):
        for record in (placed, failed):
            tracing.Tracer(log=log).emit(record)
            assert trace.from_log_line(handler.lines[-1]) == record
    entry = json.loads(json_lines[1].lines[0])
    assert entry["devices"] == [
        {
            "claim": "shop/web-3-gpu",
            "request": "gpu/large",
            "driver": "gpu.example.com",
            "pool": "node-b",
            "device": "gpu-1",
        }
    ]
    assert "claims" not in entry  # written only when there are some
    assert json.loads(json_lines[1].lines[1])["claims"][0] == {
        "claim": "shop/web-3-gpu",
        "reason": "cannot allocate all claims",
        "nodes": 7,
        "examples": ["node-a", "node-b"],
    }


def test_every_json_line_is_json_and_a_traceback_stays_in_its_line() -> None:
    formatter = logs.JsonFormatter()
    try:
        raise RuntimeError("kernel lost")
    except RuntimeError:
        record = logging.getLogger("plumb.scheduler").makeRecord(
            "plumb.scheduler", logging.ERROR, __file__, 1, "batch %s failed", ("a",), None
        )
        record.exc_info = sys.exc_info()
    line = formatter.format(record)
    assert "\n" not in line
    entry = json.loads(line)
    assert entry["msg"] == "batch a failed"
    assert entry["exc_info"].startswith("Traceback (most recent call last)")
    assert "RuntimeError: kernel lost" in entry["exc_info"]
    assert trace.from_log_line(line) is None


def test_pairs_skip_the_message_and_refuse_a_value_that_is_not_json() -> None:
    text = 'Unschedulable ns/p pod="ns/p" node=null total=3 rejected={"A":{"nodes":3}}'
    assert logs.parse_pairs(text) == {
        "pod": "ns/p",
        "node": None,
        "total": 3,
        "rejected": {"A": {"nodes": 3}},
    }
    with pytest.raises(ValueError, match="the value of node is not JSON"):
        logs.parse_pairs('pod="ns/p" node=n1')


def test_lines_that_are_not_traces_are_none() -> None:
    assert trace.from_log_line("2025-01-01 10:00:00,000 INFO plumb.app.watches: synced") is None
    assert trace.from_log_line('{"logger":"plumb.app","msg":"synced"}') is None
    summary = '{"logger":"plumb.trace","msg":"suppressed 3 trace lines","suppressed":3}'
    assert trace.from_log_line(summary) is None
    plain = (
        "2025-01-01 10:00:00,000 INFO plumb.trace: suppressed 3 trace lines in 10.0 s: 3 "
        "repeated a pod's last line suppressed=3 repeats=3 over_rate=0"
    )
    assert trace.from_log_line(plain) is None
    with pytest.raises(trace.TraceError):
        trace.from_log_line('{"logger":"plumb.trace","pod":"ns/p","uid":"u","result":3}')


# Preemption ----------------------------------------------------------------------------------

PREEMPTED = dataclasses.replace(
    RECORD,
    result=trace.UNSCHEDULABLE,
    node=None,
    message="0/4 nodes are available: 4 Insufficient cpu. preemption: nominated to node-b",
    candidates=(),
    bind_ms=None,
    preemption=trace.PreemptionRecord(
        node="node-b",
        victims=(
            trace.Victim(pod="team-a/batch-1", priority=0, qos="BestEffort"),
            trace.Victim(pod="team-a/batch 2", priority=-5, qos="Burstable"),
        ),
        candidates=3,
        searched=4,
        pdb_violations=1,
        rejected={"No preemption victims found for incoming pod": 1, 'x="y" z': 2},
        message="",
    ),
)
PREEMPTION_FIELDS = {
    "node": "node-b",
    "victims": [
        {"pod": "team-a/batch-1", "priority": 0, "qos": "BestEffort"},
        {"pod": "team-a/batch 2", "priority": -5, "qos": "Burstable"},
    ],
    "candidates": 3,
    "searched": 4,
    "pdb_violations": 1,
    "rejected": {"No preemption victims found for incoming pod": 1, 'x="y" z': 2},
    "message": "",
}


def test_a_json_line_carries_the_preemption_after_the_budget_and_reads_back_whole(
    json_lines: tuple[logging.Logger, Lines],
) -> None:
    log, handler = json_lines
    tracing.Tracer(log=log).emit(PREEMPTED)
    (line,) = handler.lines
    entry = json.loads(line)
    assert entry["preemption"] == PREEMPTION_FIELDS
    keys = list(entry)
    assert keys[keys.index("budget") + 1] == "preemption"
    assert trace.from_log_line(line) == PREEMPTED


def test_a_plain_line_carries_the_preemption_as_one_json_value_and_reads_back_whole(
    plain_lines: tuple[logging.Logger, Lines],
) -> None:
    log, handler = plain_lines
    tracing.Tracer(log=log).emit(PREEMPTED)
    (line,) = handler.lines
    assert (
        ' preemption={"node":"node-b","victims":[{"pod":"team-a/batch-1","priority":0,'
        '"qos":"BestEffort"},{"pod":"team-a/batch 2","priority":-5,"qos":"Burstable"}],'
        '"candidates":3,"searched":4,"pdb_violations":1,'
        '"rejected":{"No preemption victims found for incoming pod":1,"x=\\"y\\" z":2},'
        '"message":""} snapshot=41 '
    ) in line
    assert trace.from_log_line(line) == PREEMPTED


def test_no_preemption_is_null_and_a_line_from_before_preemption_still_reads(
    json_lines: tuple[logging.Logger, Lines],
) -> None:
    log, handler = json_lines
    tracing.Tracer(log=log).emit(RECORD)
    assert json.loads(handler.lines[0])["preemption"] is None
    empty = dataclasses.replace(RECORD, preemption=trace.PreemptionRecord())
    assert trace.Trace.from_fields(empty.fields()) == empty  # ran, found nothing, said nothing
    # A line written before the field existed (docs/observability.md's, abridged).
    old = (
        '{"time":"2026-11-30T11:42:24.342Z","level":"INFO","logger":"plumb.trace",'
        '"msg":"Unschedulable demo/too-big","pod":"demo/too-big",'
        '"uid":"24c4ad8a-603c-46e8-8384-1737ac69cba6","result":"Unschedulable","node":null,'
        '"message":"0/4 nodes are available: 4 Insufficient cpu.","attempts":1,"feasible":0,'
        '"total":4,"rejected":{"NodeResourcesFit":{"nodes":4,"reasons":{"Insufficient cpu":4}}},'
        '"candidates":[],"weights":{},"policy":null,"generation":null,"deviation":false,'
        '"budget":null,"snapshot":7,"input_hash":"ae8d778ec8dd17208048ebdd463916c1",'
        '"plan_hash":"268ea3414854a2a909515d3c3b78c133","queue_wait_ms":0.059,"kernel_ms":2.122,'
        '"bind_ms":null,"batch":1}'
    )
    record = trace.from_log_line(old)
    assert record is not None
    assert record.preemption is None
    assert record.fields()["preemption"] is None
    plain = (
        '2026-11-30 11:42:24,342 INFO plumb.trace: Unschedulable demo/too-big pod="demo/too-big" '
        'uid="u" result="Unschedulable" node=null budget=null snapshot=7 batch=1'
    )
    assert trace.from_log_line(plain) == trace.Trace(
        pod="demo/too-big", uid="u", result=trace.UNSCHEDULABLE, snapshot=7, batch=1
    )


@pytest.mark.parametrize(
    "preemption",
    [
        "nominated",
        {"node": 3},
        {"victims": {"pod": "a/b"}},
        {"victims": [{"pod": "a/b", "priority": "high", "qos": "BestEffort"}]},
        {"victims": [{"pod": "a/b", "priority": 0}]},
        {"rejected": {"reason": "two"}},
    ],
)
def test_a_preemption_that_is_not_one_is_refused(preemption: object) -> None:
    fields = {**PREEMPTED.fields(), "preemption": preemption}
    with pytest.raises(trace.TraceError, match="not a trace record"):
        trace.Trace.from_fields(fields)


# Volume control ------------------------------------------------------------------------------


def _failed(
    uid: str = "uid-waits",
    message: str = "0/3 nodes are available: 3 Insufficient cpu.",
    attempts: int = 1,
) -> trace.Trace:
    return trace.Trace(
        pod=f"ns/{uid}", uid=uid, result=trace.UNSCHEDULABLE, message=message, attempts=attempts
    )


def test_ten_thousand_failed_attempts_of_one_pod_write_a_handful_of_lines(
    json_lines: tuple[logging.Logger, Lines],
) -> None:
    log, handler = json_lines
    clock = ManualClock()
    tracer = tracing.Tracer(log=log, clock=clock)
    for attempt in range(1, 10_001):
        step = queue_module.DEFAULT_BACKOFF.duration(attempt)
        tracer.emit(_failed(attempts=attempt), repeat_after=step)
        clock.now += 0.01  # a storm: 100 attempts a second for 100 s
    tracer.flush()
    entries = [json.loads(line) for line in handler.lines]
    written = [e for e in entries if "uid" in e]
    summaries = [e for e in entries if "suppressed" in e]
    # One line per 10 s backoff step at most, one summary per 10 s window at most.
    assert 1 <= len(written) <= 12
    assert len(summaries) <= 11
    assert len(written) + sum(e["suppressed"] for e in summaries) == 10_000
    last = tracer.last("ns/uid-waits")
    assert last is not None
    # The endpoint has the record the log has last: a repeat held back is the same answer.
    assert last.attempts == written[-1]["attempts"] == 9010


def test_a_new_message_is_written_at_once_and_a_repeat_after_its_step(
    json_lines: tuple[logging.Logger, Lines],
) -> None:
    log, handler = json_lines
    clock = ManualClock()
    tracer = tracing.Tracer(log=log, clock=clock)
    assert tracer.emit(_failed(), repeat_after=1.0)
    assert not tracer.emit(_failed(), repeat_after=1.0)
    assert tracer.emit(_failed(message="0/4 nodes are available: 4 Insufficient cpu."))
    clock.now += 1.0
    assert tracer.emit(_failed(), repeat_after=1.0)
    assert len(handler.lines) == 3


def test_a_storm_of_distinct_failures_is_capped_by_the_bucket_and_summarised(
    json_lines: tuple[logging.Logger, Lines],
) -> None:
    log, handler = json_lines
    clock = ManualClock()
    tracer = tracing.Tracer(log=log, clock=clock, rate=50, burst=200, summary_every=10)
    for i in range(10_000):
        tracer.emit(_failed(uid=f"pod-{i}"))
        clock.now += 0.001  # 10,000 pods in 10 s
    tracer.flush()
    entries = [json.loads(line) for line in handler.lines]
    written = [e for e in entries if "uid" in e]
    assert len(written) <= 200 + 50 * 10 + 1
    suppressed = sum(e.get("suppressed", 0) for e in entries)
    assert len(written) + suppressed == 10_000
    assert all(e["level"] == "INFO" for e in entries)


def test_scheduled_lines_are_never_held_back(json_lines: tuple[logging.Logger, Lines]) -> None:
    log, handler = json_lines
    tracer = tracing.Tracer(log=log, clock=ManualClock(), rate=1, burst=1)
    for i in range(500):
        assert tracer.emit(dataclasses.replace(RECORD, pod=f"shop/web-{i}", uid=f"u{i}"))
    assert len(handler.lines) == 500


async def test_a_storm_that_stops_is_summarised_by_the_loop(
    json_lines: tuple[logging.Logger, Lines],
) -> None:
    log, handler = json_lines
    tracer = tracing.Tracer(log=log, rate=1, burst=1, summary_every=0.05)
    for i in range(5):
        tracer.emit(_failed(uid=f"pod-{i}"))
    assert len(handler.lines) == 1
    await asyncio.sleep(0.2)  # no further line comes to carry the summary: the timer does
    summary = json.loads(handler.lines[-1])
    assert summary["suppressed"] == 4
    assert summary["over_rate"] == 4


def test_the_last_records_are_bounded_and_a_deleted_pod_loses_its_own(
    json_lines: tuple[logging.Logger, Lines],
) -> None:
    log, _ = json_lines
    tracer = tracing.Tracer(log=log, clock=ManualClock(), keep=3)
    for i in range(5):
        tracer.emit(_failed(uid=f"pod-{i}"))
    assert [r.pod for r in tracer.records()] == ["ns/pod-2", "ns/pod-3", "ns/pod-4"]
    tracer.forget("ns/pod-3", "another-uid")  # a pod of the same name, not this one
    assert tracer.last("ns/pod-3") is not None
    tracer.forget("ns/pod-3", "pod-3")
    assert tracer.last("ns/pod-3") is None


def test_candidate_detail_is_configurable(json_lines: tuple[logging.Logger, Lines]) -> None:
    log, handler = json_lines
    tracing.Tracer(log=log, candidates=1).emit(RECORD)
    assert len(json.loads(handler.lines[0])["candidates"]) == 1
    with pytest.raises(ValueError, match="0 to 3"):
        tracing.Tracer(candidates=4)


# Hashes --------------------------------------------------------------------------------------


def _pod_body(cpu: str = "500m", version: str = "1", *, affinity: bool = True) -> dict[str, Any]:
    pod = make_pod("web", "ns").uid("uid-web").resource_version(version).scheduler("plumb")
    pod = pod.req(cpu=cpu).label("app", "web")
    if affinity:
        pod = pod.affinity("zone", {"app": "db"}, namespaces=["db", "cache", "queue", "search"])
    return pod.obj()


def _hash_of(pod: objects.PodInfo, generation: int = 7) -> str:
    return trace.input_hash(
        pod=trace.digest(pod),
        profile=trace.digest(scoring.DEFAULT),
        policy=None,
        snapshot=generation,
        nodes=3,
        ahead=(),
        deviation=False,
    )


def test_the_input_hash_follows_what_the_kernel_reads_and_nothing_else() -> None:
    base = objects.parse_pod(_pod_body())
    same = objects.parse_pod(_pod_body(version="99"))  # a status-only change
    assert _hash_of(base) == _hash_of(same)
    assert _hash_of(base) != _hash_of(objects.parse_pod(_pod_body(cpu="600m")))
    assert _hash_of(base) != _hash_of(base, generation=8)


def test_the_input_hash_is_the_same_in_another_process() -> None:
    # The pod's affinity namespaces are a frozenset, whose order follows the string hash seed.
    script = (
        "from tests.unit.observability import test_trace as t; "
        "from plumb.backend.records import objects; "
        "print(t._hash_of(objects.parse_pod(t._pod_body())))"
    )
    hashes = {
        subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout.strip()
        for seed in ("1", "2", "3")
    }
    assert hashes == {_hash_of(objects.parse_pod(_pod_body()))}


def test_the_plan_hash_names_the_node_and_the_scores() -> None:
    candidates = RECORD.candidates
    plan = trace.plan_hash("u", "node-b", candidates)
    assert plan == trace.plan_hash("u", "node-b", tuple(candidates))
    assert plan != trace.plan_hash("u", "node-a", candidates)
    assert plan != trace.plan_hash("u", "node-b", candidates[:1])
    assert trace.plan_hash("u", None, ()) != trace.plan_hash("v", None, ())


def test_the_same_cluster_and_pod_give_the_same_trace_hashes() -> None:
    def decide() -> trace.Trace:
        nodes = [make_node(f"n{i}").capacity(cpu="2") for i in range(3)]
        c = small_clusters.cluster(nodes)
        pod = objects.parse_pod(_pod_body(affinity=False))
        snap = c.snapshot()
        prepared = cycle.prepare([pod], snap, c)
        assert prepared.compiled is not None
        result = reference.run(prepared.compiled.cluster, prepared.compiled.batch)
        decisions = cycle.explain(prepared.compiled, result)
        entry = queue_module.Entry(pod=pod, where=queue_module.Where.IN_FLIGHT, attempts=1)
        built = traces.build(
            decisions, {pod.uid: entry}, snap, scoring.DEFAULT, None, prepared, 0.001
        )
        return built[pod.uid]

    first, second = decide(), decide()
    assert (first.input_hash, first.plan_hash) == (second.input_hash, second.plan_hash)
    assert first.node is not None
    assert len(first.candidates) == 3
    assert first.candidates[0].node == first.node


def test_a_preemption_leaves_the_hashes_of_the_decision_it_followed() -> None:
    nodes = [make_node(f"n{i}").capacity(cpu="2") for i in range(3)]
    c = small_clusters.cluster(nodes)
    pod = objects.parse_pod(_pod_body(cpu="3", affinity=False))  # fits nowhere
    snap = c.snapshot()
    prepared = cycle.prepare([pod], snap, c)
    assert prepared.compiled is not None
    result = reference.run(prepared.compiled.cluster, prepared.compiled.batch)
    decisions = cycle.explain(prepared.compiled, result)
    entry = queue_module.Entry(pod=pod, where=queue_module.Where.IN_FLIGHT, attempts=1)
    built = traces.build(decisions, {pod.uid: entry}, snap, scoring.DEFAULT, None, prepared, 0.001)
    decided = built[pod.uid]
    assert decided.node is None
    preempted = dataclasses.replace(decided, preemption=PREEMPTED.preemption)
    read = trace.Trace.from_fields(json.loads(json.dumps(preempted.fields())))
    assert read == preempted
    assert (read.input_hash, read.plan_hash) == (decided.input_hash, decided.plan_hash)
    # What replay recomputes from the line: the node (none: a nomination is not a placement)
    # and the candidates, never the preemption.
    assert read.plan_hash == trace.plan_hash(read.uid, read.node, read.candidates)


# From decisions ------------------------------------------------------------------------------


def test_rejections_count_nodes_per_filter_and_add_up_to_the_histogram() -> None:
    nodes = [
        make_node("n1").capacity(cpu="4").taint("dedicated", "gpu"),
        make_node("n2").capacity(cpu="1", memory="1Gi"),  # short of cpu and memory
        make_node("n3").capacity(cpu="1"),  # short of cpu only
    ]
    c = small_clusters.cluster(nodes)
    pod = small_clusters.pod(make_pod("big", "ns").req(cpu="2", memory="2Gi"), "uid-big")
    snap = c.snapshot()
    prepared = cycle.prepare([pod], snap, c)
    assert prepared.compiled is not None
    (decision,) = cycle.explain(
        prepared.compiled, reference.run(prepared.compiled.cluster, prepared.compiled.batch)
    )
    entry = queue_module.Entry(pod=pod, where=queue_module.Where.IN_FLIGHT, attempts=1)
    record = traces.build([decision], {pod.uid: entry}, snap, scoring.DEFAULT, None, prepared, 0.0)[
        pod.uid
    ]
    assert decision.message == (
        "0/3 nodes are available: 1 Insufficient memory, 1 node(s) had untolerated taint(s), "
        "2 Insufficient cpu."
    )
    assert record.rejected == {
        "NodeResourcesFit": trace.Rejection(
            nodes=2, reasons={"Insufficient cpu": 2, "Insufficient memory": 1}
        ),
        "TaintToleration": trace.Rejection(
            nodes=1, reasons={"node(s) had untolerated taint(s)": 1}
        ),
    }
    histogram = {
        reason: count for r in record.rejected.values() for reason, count in r.reasons.items()
    }
    assert histogram == decision.reasons


async def test_the_scheduler_writes_one_line_per_decision_that_matches_what_it_did(
    json_lines: tuple[logging.Logger, Lines],
) -> None:
    log, handler = json_lines
    api, clock = FakeApi(), ManualClock()
    s = make_scheduler(api, clock, log=log)
    nodes = [make_node(f"n{i}").capacity(cpu="2").obj() for i in range(3)]
    fits = make_pod("web", "ns").uid("uid-web").scheduler("plumb").req(cpu="1").obj()
    huge = make_pod("huge", "ns").uid("uid-huge").scheduler("plumb").req(cpu="64").obj()
    s.feed.resync(nodes, [fits, huge])
    clock.now += 0.5  # half a second in the queue
    await s.schedule_batch(await s.queue.pop_batch(8))
    await s.drain()

    records = {r.pod: r for r in map(trace.from_log_line, handler.lines) if r is not None}
    assert len(handler.lines) == 2
    placed = records["ns/web"]
    assert placed.result == trace.SCHEDULED
    scheduled = [e for e in api.events if e["reason"] == "Scheduled"]
    assert scheduled[0]["note"] == f"Successfully assigned ns/web to {placed.node}"
    assert (placed.feasible, placed.total) == (3, 3)
    assert placed.candidates[0].node == placed.node
    assert placed.bind_ms is not None
    assert placed.queue_wait_ms == 500.0
    assert placed.kernel_ms is not None
    assert placed.batch == 2
    assert placed.policy is None

    waiting = records["ns/huge"]
    failed = [e for e in api.events if e["reason"] == "FailedScheduling"]
    assert waiting.result == trace.UNSCHEDULABLE
    # kube-scheduler v1.37's words: the filters' histogram, then its PostFilter plugins'
    # (DefaultPreemption's alone: DynamicResources' says nothing from v1.37).
    assert (
        waiting.message
        == failed[0]["note"]
        == (
            "0/3 nodes are available: 3 Insufficient cpu. "
            "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
        )
    )
    # It asks more cpu than any node has: no node is worth searching.
    assert waiting.preemption == trace.PreemptionRecord(
        searched=0,
        message=(
            "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
        ),
    )
    assert waiting.rejected == {
        "NodeResourcesFit": trace.Rejection(nodes=3, reasons={"Insufficient cpu": 3})
    }
    assert waiting.node is None
    assert waiting.candidates == ()
    assert s.tracer.last("ns/huge") == waiting

    s.feed.on_pod("DELETED", huge)
    assert s.tracer.last("ns/huge") is None


async def test_a_failed_bind_is_a_warning_that_says_it_will_retry(
    json_lines: tuple[logging.Logger, Lines],
) -> None:
    log, handler = json_lines
    api, clock = (
        FakeApi(k8s_client.ApiResponse(status=500, body={"message": "etcd is down"})),
        ManualClock(),
    )
    s = make_scheduler(api, clock, log=log)
    pod = make_pod("web", "ns").uid("uid-web").scheduler("plumb").req(cpu="1").obj()
    s.feed.resync([make_node("n1").capacity(cpu="2").obj()], [pod])
    await s.schedule_batch(await s.queue.pop_batch(8))
    await s.drain()
    (line,) = [json.loads(line) for line in handler.lines]
    assert (line["level"], line["result"], line["node"]) == ("WARNING", "BindFailed", "n1")
    assert line["message"].endswith("; retrying after a backoff")
    assert "etcd is down" in line["message"]
    assert line["bind_ms"] is not None
    assert s.queue.where("uid-web") is queue_module.Where.BACKOFF
