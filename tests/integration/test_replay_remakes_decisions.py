"""``plumb replay`` on the real control plane: a snapshot dumped by the running scheduler (from
its debug endpoint and on SIGUSR1) and the pods as kubectl shows them make every recorded
decision of a mixed workload again, with the node and plan hash of its trace line."""

from __future__ import annotations

import functools
import json
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from plumb import replay, runs
from plumb.backend.records import objects
from plumb.kernel import compiled
from plumb.observability import trace
from plumb_dev.testing import builders, crds, kube
from plumb_dev.testing import drabuilders as drab
from tests.support import plumb_process
from tests.support.dra_stage import Stage, dra_fixture  # noqa: F401
from tests.support.live_cluster import NodeFactory
from tests.support.plumb_process import Plumb, PlumbFactory, free_port

pytestmark = pytest.mark.integration

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"


def _pod(namespace: str, i: int) -> dict[str, Any]:
    """Pod i of a mixed workload: plain, spread, anti-affine, affine, pinned to ssd, governed
    by a policy, or unschedulable (too big, or selecting a label no node has)."""
    kind = i % 8
    pod = builders.make_pod(f"p{i:03d}", namespace).scheduler("plumb").req(cpu="200m")
    if kind == 0:
        pod = pod.label("app", "plain")
    elif kind == 1:
        pod = pod.label("app", "spread").spread(ZONE, 1, selector={"app": "spread"})
    elif kind == 2:
        pod = pod.label("app", "lonely").affinity(HOSTNAME, {"app": "lonely"}, anti=True)
    elif kind == 3:
        pod = pod.label("app", "near").preferred_affinity(50, ZONE, {"app": "spread"})
    elif kind == 4:
        pod = pod.label("app", "fast").node_selector("disk", "ssd")
    elif kind in (5, 6):
        pod = pod.label("app", "web")  # governed by the policy
    elif i % 16 == 7:
        pod = pod.label("app", "huge").req(cpu="64")
    else:
        pod = pod.label("app", "lost").node_selector("disk", "tape")
    return pod.obj()


def _all_decided(plumb: Plumb, count: int) -> bool:
    return len({r.uid for r in plumb_process.all_traces(plumb)}) >= count


def test_a_dumped_snapshot_replays_every_recorded_decision_of_a_mixed_workload(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    start_plumb: PlumbFactory,
    policy_crd: crds.Kubectl,
    tmp_path: Path,
) -> None:
    for i in range(9):
        node = builders.make_node(f"{namespace}-n{i}").zone("abc"[i % 3]).capacity(cpu="4")
        if i % 4 == 0:
            node = node.label("disk", "ssd")
        add_node(node)
    policy = {
        "apiVersion": "scheduling.plumb.dev/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": "web"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "topology": [{"topologyKey": ZONE, "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}],
            "scoring": {"strategy": "MostAllocated"},
        },
    }
    policy_crd.check("apply", "-n", namespace, "-f", "-", stdin=json.dumps(policy))
    port = free_port()
    plumb = start_plumb("--debug-port", str(port), "--snapshot-dir", str(tmp_path))

    total = 120
    for wave in range(0, total, 20):  # in waves: decisions over many snapshots and batches
        for i in range(wave, wave + 20):
            kube_client.create_pod(_pod(namespace, i))
        kube.wait_for(
            f"pods up to p{wave + 19:03d} decided",
            functools.partial(_all_decided, plumb, wave + 20),
            timeout=120,
        )
    listed = kube_client.pods(namespace)
    bound = {p["metadata"]["uid"]: p["spec"].get("nodeName") for p in listed}
    assert sum(1 for node in bound.values() if node) >= 90  # 9 nodes: 6 anti-affine pods wait

    # The snapshot, from the debug endpoint and on SIGUSR1 (plumb logs the file it wrote).
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/debug/snapshot", timeout=60) as page:
        from_endpoint = json.load(page)
    # Decisions logged before the dump: the dump must hold each of them. Any made later (a
    # policy deleted with another test's namespace wakes unschedulable pods) are not in it.
    decisions = {(r.uid, r.input_hash): r for r in plumb_process.all_traces(plumb)}
    plumb.process.send_signal(signal.SIGUSR1)
    written = kube.wait_for(
        "plumb to log the snapshot file",
        lambda: re.search(r"snapshot written to (\S+);", plumb.output()),
        timeout=30,
    )
    from_signal = json.loads(Path(written.group(1)).read_text())
    assert from_signal["format"] == from_endpoint["format"] == runs.FORMAT

    # Every decision with a trace line, replayed from the signal's dump: same node, same plan.
    pods = [objects.parse_pod(body) for body in listed]
    document = runs.load(from_signal)
    assert len(decisions) >= 100
    results = {r.result for r in decisions.values()}
    assert results == {trace.SCHEDULED, trace.UNSCHEDULABLE}
    assert any(r.policy == f"{namespace}/web" for r in decisions.values())
    for (uid, input_hash), record in decisions.items():
        pod = next(p for p in pods if p.uid == uid)
        (outcome,) = replay.replay_pods(document, [pod], compiled.run, input_hash=input_hash)
        assert (outcome.replayed.node, outcome.replayed.plan_hash) == (
            record.node,
            record.plan_hash,
        ), record.pod
        assert outcome.snapshot == record.snapshot
        if record.result == trace.SCHEDULED:
            assert bound[uid] == record.node

    # The command a person runs: the pods as kubectl writes them, each pod's latest decision.
    pods_file = tmp_path / "pods.json"
    pods_file.write_text(json.dumps({"kind": "List", "items": listed}))
    snapshot_file = tmp_path / "endpoint-snapshot.json"
    snapshot_file.write_text(json.dumps(from_endpoint))
    done = _replay("--snapshot", str(snapshot_file), "--pod", str(pods_file), "-o", "json")
    replayed = [json.loads(line) for line in done.splitlines()]
    assert len(replayed) == total
    last = {r.uid: r for r in plumb_process.all_traces(plumb) if r.result == trace.SCHEDULED}
    for answer in replayed:
        if answer["uid"] in last:
            record = last[answer["uid"]]
            assert (answer["node"], answer["plan_hash"]) == (record.node, record.plan_hash)
            assert answer["changed"] is False
        else:
            assert answer["node"] is None

    # And the whole log checked in one command: every decision reproduced.
    checked = _replay(
        "--snapshot", str(snapshot_file), "--pod", str(pods_file), "--trace", str(plumb.log)
    )
    verdicts = checked.splitlines()[:-1]
    assert len(verdicts) == len(decisions)
    assert all(line.startswith("reproduced ") for line in verdicts)
    summary = checked.splitlines()[-1]
    assert summary.startswith(f"{len(decisions)} of {len(decisions)} decisions reproduced")


def test_claim_pods_replay_from_a_dump_to_their_node_and_failure_message(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    start_plumb: PlumbFactory,
    dra: Stage,
    tmp_path: Path,
) -> None:
    # Three devices on two of three nodes, five pods whose claims the resourceclaim controller
    # makes from one template: three are bound, two wait ("cannot allocate all claims").
    names = [add_node(builders.make_node(f"{namespace}-n{i}").capacity(cpu="4")) for i in range(3)]
    gpu = dra.device_class("gpu")
    dra.publish(names[0], drab.device("gpu-0"), drab.device("gpu-1"))
    dra.publish(names[1], drab.device("gpu-0"))
    dra.api.create_template(drab.make_template("one-gpu", namespace).request("gpu", gpu).obj())
    port = free_port()
    plumb = start_plumb("--debug-port", str(port))
    for i in range(5):
        pod = builders.make_pod(f"c{i}", namespace).scheduler("plumb").req(cpu="200m")
        kube_client.create_pod(pod.resource_claim("gpu", template="one-gpu").obj())
    kube.wait_for(
        "three claim pods bound and two refused",
        functools.partial(_claim_pods_decided, plumb, namespace),
        timeout=120,
    )
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/debug/snapshot", timeout=60) as page:
        snapshot_file = tmp_path / "snapshot.json"
        snapshot_file.write_bytes(page.read())
    listed = kube_client.pods(namespace)
    pods_file = tmp_path / "pods.json"
    pods_file.write_text(json.dumps({"kind": "List", "items": listed}))

    lines = [r for r in plumb_process.all_traces(plumb) if r.pod.startswith(f"{namespace}/")]
    failed = [r for r in lines if r.result == trace.UNSCHEDULABLE]
    assert failed
    assert all("cannot allocate all claims" in r.message for r in failed)
    assert all(r.devices for r in lines if r.result == trace.SCHEDULED)
    # Every decision of the log made again: node, plan hash and, for those refused, the
    # FailedScheduling message, word for word.
    checked = _replay(
        "--snapshot", str(snapshot_file), "--pod", str(pods_file), "--trace", str(plumb.log)
    )
    verdicts = checked.splitlines()[:-1]
    assert verdicts, checked
    assert all(line.startswith("reproduced ") for line in verdicts), checked
    answers = [
        json.loads(line)
        for line in _replay(
            "--snapshot", str(snapshot_file), "--pod", str(pods_file), "-o", "json"
        ).splitlines()
    ]
    last = _last_lines(plumb)
    for answer in answers:
        record = last[answer["pod"]]
        assert (answer["node"], answer["plan_hash"]) == (record.node, record.plan_hash)
        if record.result == trace.UNSCHEDULABLE:
            assert answer["message"] == record.message


def _claim_pods_decided(plumb: Plumb, namespace: str) -> bool:
    results = [r.result for p, r in _last_lines(plumb).items() if p.startswith(f"{namespace}/")]
    return sorted(results) == [trace.SCHEDULED] * 3 + [trace.UNSCHEDULABLE] * 2


def _last_lines(plumb: Plumb) -> dict[str, trace.Trace]:
    """Each pod's last trace line, by namespace/name."""
    return {r.pod: r for r in plumb_process.all_traces(plumb)}


def _replay(*args: str) -> str:
    """``plumb replay ARGS``' output; it must succeed."""
    done = subprocess.run(
        [sys.executable, "-m", "plumb", "replay", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr + done.stdout[-2000:]
    return done.stdout
