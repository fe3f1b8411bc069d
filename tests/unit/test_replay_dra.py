"""``plumb replay`` of pods with ResourceClaims: a snapshot dump carries the DRA store (slices,
classes, claims, the allocations plumb assumed), so each claim pod's decision is made again
over it with the node and plan hash of its trace line, and a pod no node fits gets its
FailedScheduling message again, word for word, in every release's wording."""

from __future__ import annotations

import io
import json
import logging

import pytest

from plumb import replay, runs
from plumb.backend.records import objects
from plumb.framework import emulation
from plumb.kernel import reference
from plumb.observability import trace
from plumb_dev.testing.drabuilders import device, make_claim
from tests.support.dra_world import DRIVER, NS, DraWorld
from tests.support.log_capture import Lines


@pytest.mark.parametrize("minor", [emulation.OLDEST, emulation.NEWEST])
async def test_claim_pods_replay_to_their_node_devices_taken_and_failure_message(
    minor: int, json_lines: tuple[logging.Logger, Lines]
) -> None:
    world = DraWorld(json_lines, kube=emulation.emulate(minor))
    world.nodes("node-a", "node-b")
    world.device_class("gpu")
    world.publish("node-a", device("gpu-0"), device("gpu-1"))
    world.publish("node-b", device("gpu-0"))
    for i in range(4):
        world.claim(make_claim(f"c{i}", NS).request("gpu", "gpu"))
    world.claim(make_claim("odd", NS).request("gpu", "no-such-class"))
    for i in range(4):  # one at a time: each takes a device the next cannot have
        world.pod(f"p{i}", f"c{i}")
        await world.settle()
    world.pod("lost", "odd")
    await world.settle()
    lines = world.traces()
    assert [r.result for r in lines] == [trace.SCHEDULED] * 3 + [trace.UNSCHEDULABLE] * 2
    full, lost = lines[3], lines[4]
    assert full.message.startswith("0/2 nodes are available: 2 cannot allocate all claims.")
    if minor < 37:  # DynamicResources' PostFilter speaks up to v1.36 (docs/versions.md)
        assert "still not schedulable, preemption: " in full.message
        assert "no new claims to deallocate, preemption: " in lost.message

    document = runs.load(json.loads(json.dumps(world.scheduler.dump())))
    pods = [objects.parse_pod(body) for body in world.pods.values()]
    for record in lines:
        decided = next(p for p in pods if p.uid == record.uid)
        (outcome,) = replay.replay_pods(
            document, [decided], reference.run, input_hash=record.input_hash
        )
        assert (outcome.replayed.node, outcome.replayed.plan_hash) == (
            record.node,
            record.plan_hash,
        ), record.pod
        assert outcome.message == record.message, record.pod
    out = io.StringIO()
    assert replay.check_log(document, pods, lines, reference.run, out) == 0, out.getvalue()
    assert out.getvalue().splitlines()[-1].startswith("5 of 5 decisions reproduced")

    # A line whose message was not the one made again is reported.
    altered = [r if r is not full else _reworded(r) for r in lines]
    out = io.StringIO()
    assert replay.check_log(document, pods, altered, reference.run, out) == 1
    assert f"DIFFERS    {NS}/p3: the line says 'x', replay gives {full.message!r}" in (
        out.getvalue()
    )


def _reworded(record: trace.Trace) -> trace.Trace:
    return trace.Trace.from_fields(record.fields() | {"message": "x"})


@pytest.mark.parametrize("echo", [False, True], ids=["watch-later", "watch-during-the-write"])
async def test_a_claim_deallocated_by_post_filter_replays_with_its_words(
    echo: bool, json_lines: tuple[logging.Logger, Lines]
) -> None:
    # With the watch event of the deallocation back while PostFilter awaits the write, the
    # preemption search must still be replayed over the cache it read (before the write).
    world = DraWorld(json_lines)
    if echo:
        world.echo_writes()
    world.nodes("node-a", "node-b")
    world.device_class("gpu")
    world.publish("node-a", device("gpu-0"))
    world.publish("node-b", device("gpu-0"))
    # Allocated on node-b (its kubelet never ran the pod that had it), reserved for no pod.
    held = make_claim("held", NS).request("gpu", "gpu").obj()
    held["status"] = {"allocation": _on_node_b()}
    world.claim(held)
    world.pod("mover", "held", on="node-a")
    await world.settle()
    failed, placed = world.traces()
    assert failed.result == trace.UNSCHEDULABLE
    assert "deallocation of ResourceClaim completed" in failed.message
    assert failed.claims == (
        trace.ClaimRejection(
            claim=f"{NS}/held",
            reason="resourceclaim not available on the node",
            nodes=1,
            examples=("node-a",),
        ),
    )
    assert (placed.result, placed.node) == (trace.SCHEDULED, "node-a")
    assert [(d.pool, d.device) for d in placed.devices] == [("node-a", "gpu-0")]

    document = runs.load(json.loads(json.dumps(world.scheduler.dump())))
    (pod,) = (objects.parse_pod(body) for body in world.pods.values())
    for record in (failed, placed):
        (outcome,) = replay.replay_pods(
            document, [pod], reference.run, input_hash=record.input_hash
        )
        assert (outcome.replayed.node, outcome.message) == (record.node, record.message)


def _on_node_b() -> dict[str, object]:
    selector = {"key": "metadata.name", "operator": "In", "values": ["node-b"]}
    result = {"request": "gpu", "driver": DRIVER, "pool": "node-b", "device": "gpu-0"}
    return {
        "devices": {"results": [result]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [selector]}]},
    }
