"""Trace lines and ``plumb explain`` on the real control plane: every line of plumb's log is
JSON, a decision's line says what the API server shows (the node a pod is bound to, the
FailedScheduling message, a policy's deviation), ``plumb explain`` gives the same text from the
running scheduler and from its log, and a storm of retries does not flood the log."""

from __future__ import annotations

import functools
import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from plumb.observability import trace
from plumb_dev.testing import builders, crds, kube
from plumb_dev.testing import drabuilders as drab
from tests.support import plumb_process, side_by_side
from tests.support.dra_stage import Stage, dra_fixture  # noqa: F401
from tests.support.live_cluster import NodeFactory, events_of
from tests.support.plumb_process import Plumb, PlumbFactory, free_port

pytestmark = pytest.mark.integration

ZONE = "topology.kubernetes.io/zone"


def _entries(plumb: Plumb) -> list[dict[str, Any]]:
    """Every line plumb wrote, each parsed as the JSON object it must be."""
    entries = []
    for number, line in enumerate(plumb.output().splitlines(), 1):
        try:
            entries.append(json.loads(line))
        except json.JSONDecodeError as error:
            raise AssertionError(f"line {number} of plumb's log is not JSON: {line!r}") from error
    return entries


def _failed_scheduling(client: kube.Kube, namespace: str, name: str, expected: str) -> str:
    def newest() -> str | None:
        found = events_of(client, namespace, name, "FailedScheduling")
        found.sort(key=lambda e: (e.get("eventTime") or "", e["metadata"]["name"]))
        return str(found[-1]["message"]) if found and found[-1]["message"] == expected else None

    return kube.wait_for(f"FailedScheduling {expected!r} for {namespace}/{name}", newest)


def _node_of(client: kube.Kube, namespace: str, name: str) -> str:
    def node() -> str | None:
        return client.pod(namespace, name)["spec"].get("nodeName") or None

    return kube.wait_for(f"{namespace}/{name} to be bound", node, timeout=60)


def test_trace_lines_say_what_happened_and_explain_reads_them_alike(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    start_plumb: PlumbFactory,
    tmp_path: Path,
) -> None:
    for i in range(3):
        add_node(builders.make_node(f"{namespace}-n{i}").zone(f"z{i}").capacity(cpu="2"))
    port = free_port()
    plumb = start_plumb("--debug-port", str(port))
    kube_client.create_pod(
        builders.make_pod("huge", namespace).scheduler("plumb").req(cpu="64").obj()
    )
    message = _failed_scheduling(
        kube_client,
        namespace,
        "huge",
        side_by_side.without_victims("0/3 nodes are available: 3 Insufficient cpu.", 3, 0),
    )
    kube_client.create_pod(
        builders.make_pod("web", namespace).scheduler("plumb").req(cpu="500m").obj()
    )
    node = _node_of(kube_client, namespace, "web")

    scheduled = plumb_process.last_trace(plumb, f"{namespace}/web", trace.SCHEDULED)
    assert scheduled.node == node
    assert scheduled.uid == kube_client.pod(namespace, "web")["metadata"]["uid"]
    assert (scheduled.feasible, scheduled.total) == (3, 3)
    assert scheduled.candidates[0].node == node
    assert len(scheduled.candidates) == 3
    assert set(scheduled.candidates[0].scores) == set(scheduled.weights)
    assert scheduled.bind_ms is not None
    assert scheduled.bind_ms > 0
    assert scheduled.kernel_ms is not None
    assert scheduled.queue_wait_ms is not None
    assert len(scheduled.input_hash) == len(scheduled.plan_hash) == 32

    failed = plumb_process.last_trace(plumb, f"{namespace}/huge", trace.UNSCHEDULABLE)
    assert failed.message == message
    assert failed.node is None
    assert failed.rejected == {
        "NodeResourcesFit": trace.Rejection(nodes=3, reasons={"Insufficient cpu": 3})
    }

    entries = _entries(plumb)  # every line, not only the traces, is one JSON object
    assert {"time", "level", "logger", "msg"} <= set(entries[0])
    line = next(e for e in entries if e.get("pod") == f"{namespace}/web")
    assert (line["logger"], line["level"], line["result"]) == ("plumb.trace", "INFO", "Scheduled")
    assert line["msg"] == f"Scheduled {namespace}/web on {node}"
    print("a trace line:", json.dumps(line))

    text = plumb_process.explained_alike(plumb, port, f"{namespace}/web")
    assert text.startswith(f"{namespace}/web: Scheduled on {node} (attempt 1)\n")
    text = plumb_process.explained_alike(plumb, port, f"{namespace}/huge")
    assert f"  {message}\n" in text
    assert "  NodeResourcesFit rejected 3 nodes: 3 Insufficient cpu\n" in text
    print(text)


def test_a_claim_pods_line_names_its_devices_and_explain_says_which_claim_failed_where(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    start_plumb: PlumbFactory,
    dra: Stage,
) -> None:
    with_gpu = add_node(builders.make_node(f"{namespace}-a").capacity(cpu="4"))
    without = add_node(builders.make_node(f"{namespace}-b").capacity(cpu="4"))
    gpu = dra.device_class("gpu")
    dra.publish(with_gpu, drab.device("gpu-0"))
    for name in ("first", "second"):
        dra.api.create_claim(drab.make_claim(name, namespace).request("gpu", gpu).obj())
    port = free_port()
    plumb = start_plumb("--debug-port", str(port))

    def claim_pod(name: str, claim: str) -> dict[str, Any]:
        pod = builders.make_pod(name, namespace).scheduler("plumb").req(cpu="500m")
        return pod.resource_claim("gpu", claim=claim).obj()

    kube_client.create_pod(claim_pod("trainer", "first"))
    assert _node_of(kube_client, namespace, "trainer") == with_gpu
    scheduled = plumb_process.last_trace(plumb, f"{namespace}/trainer", trace.SCHEDULED)
    assert scheduled.devices == (
        trace.DeviceRecord(
            claim=f"{namespace}/first",
            request="gpu",
            driver=dra.driver,
            pool=with_gpu,
            device="gpu-0",
        ),
    )
    # The line's devices are those the claim's allocation holds on the API server.
    assert [(d.driver, d.pool, d.device) for d in scheduled.devices] == dra.devices("first")

    kube_client.create_pod(claim_pod("waiting", "second"))
    failed = plumb_process.last_trace(plumb, f"{namespace}/waiting", trace.UNSCHEDULABLE)
    assert failed.message.startswith("0/2 nodes are available: 2 cannot allocate all claims.")
    _failed_scheduling(kube_client, namespace, "waiting", failed.message)
    assert failed.claims == (
        trace.ClaimRejection(
            claim=f"{namespace}/second",
            reason="cannot allocate all claims",
            nodes=2,
            examples=(with_gpu, without),
        ),
    )

    text = plumb_process.explained_alike(plumb, port, f"{namespace}/trainer")
    assert (
        f"devices allocated on {with_gpu}:\n"
        f"  {namespace}/first request gpu: gpu-0 (driver {dra.driver}, pool {with_gpu})\n"
    ) in text
    text = plumb_process.explained_alike(plumb, port, f"{namespace}/waiting")
    assert "  DynamicResources rejected 2 nodes: 2 cannot allocate all claims\n" in text
    assert (
        "claims (DynamicResources' verdict on each node it rejected):\n"
        f"  {namespace}/second rejected on 2 nodes ({with_gpu}, {without}): cannot allocate all "
        "claims\n"
    ) in text
    print(text)


@pytest.mark.long  # in make test-long; the unit tests of the trace caps stay in make test
def test_a_storm_of_retries_writes_a_few_lines_and_a_summary(
    kube_client: kube.Kube, namespace: str, add_node: NodeFactory, start_plumb: PlumbFactory
) -> None:
    add_node(builders.make_node(f"{namespace}-n0").capacity(cpu="2"))
    port = free_port()
    plumb = start_plumb("--debug-port", str(port))
    kube_client.create_pod(
        builders.make_pod("huge", namespace).scheduler("plumb").req(cpu="64").obj()
    )
    plumb_process.last_trace(plumb, f"{namespace}/huge", trace.UNSCHEDULABLE)
    url = f"http://127.0.0.1:{port}/debug/pods/{namespace}/huge"

    def attempts() -> int:
        with urllib.request.urlopen(url, timeout=10) as page:
            return int(json.loads(page.read())["tried"])

    def attempted_after(count: int) -> int | None:
        now = attempts()
        return now if now > count else None

    # A label change is an update that sends an unschedulable pod straight back to be tried:
    # change it each time the last attempt is over, a hundred times.
    tried = attempts()
    for i in range(100):
        patch = {"metadata": {"labels": {"storm": str(i)}}}
        kube_client.core.patch_namespaced_pod("huge", namespace, patch)
        tried = kube.wait_for(
            f"attempt {tried + 1}", functools.partial(attempted_after, tried), interval=0.01
        )
    assert tried >= 100

    def accounted() -> int | None:
        # Each attempt left a line or was counted in a summary (one per 10 s window).
        held = sum(e["suppressed"] for e in _entries(plumb) if "suppressed" in e)
        lines = len(plumb_process.traces(plumb, f"{namespace}/huge"))
        return lines if held + lines >= tried else None

    lines = kube.wait_for("the summaries of the lines held back", accounted, timeout=40)
    assert lines <= 8, [line.attempts for line in plumb_process.traces(plumb, f"{namespace}/huge")]


def _naming(plumb: Plumb, pod: str, words: str) -> trace.Trace | None:
    """The pod's last trace line whose message has ``words``."""
    return next((r for r in reversed(plumb_process.traces(plumb, pod)) if words in r.message), None)


def _policy(name: str, max_violations: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.plumb.dev/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "topology": [{"topologyKey": ZONE, "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}],
            "deviationBudget": {"maxViolations": max_violations},
        },
    }


def test_a_deviation_is_traced_with_its_policy_generation_and_budget(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    start_plumb: PlumbFactory,
    policy_crd: crds.Kubectl,
) -> None:
    add_node(builders.make_node(f"{namespace}-a").zone("a").capacity(cpu="16"))
    add_node(builders.make_node(f"{namespace}-b").zone("b").capacity(cpu="16"))
    add_node(builders.make_node(f"{namespace}-c").zone("c").capacity(cpu="1"))  # two pods fit
    policy_crd.check("apply", "-n", namespace, "-f", "-", stdin=json.dumps(_policy("web", 2)))
    port = free_port()
    plumb = start_plumb("--debug-port", str(port))
    names = [f"web-{i:02d}" for i in range(12)]
    for name in names:
        kube_client.create_pod(
            builders.make_pod(name, namespace)
            .label("app", "web")
            .scheduler("plumb")
            .req(cpu="400m")
            .obj()
        )
    kube.wait_for(
        "10 pods bound",
        lambda: sum(1 for p in kube_client.pods(namespace) if p["spec"].get("nodeName")) == 10,
        timeout=60,
    )
    deviated = [n for n in names if events_of(kube_client, namespace, n, "PolicyDeviation")]
    assert len(deviated) == 2
    for name in deviated:
        record = plumb_process.last_trace(plumb, f"{namespace}/{name}", trace.SCHEDULED)
        assert record.deviation
        assert record.node == kube_client.pod(namespace, name)["spec"]["nodeName"]
        assert (record.policy, record.generation) == (f"{namespace}/web", 1)
        assert record.budget is not None
        assert record.budget.max_violations == 2
        assert "beyond SchedulingPolicy" in record.message
    text = plumb_process.explained_alike(plumb, port, f"{namespace}/{deviated[-1]}")
    assert "beyond its policy" in text
    assert f"SchedulingPolicy {namespace}/web generation 1; a deviation on its budget" in text

    waiting = [n for n in names if not kube_client.pod(namespace, n)["spec"].get("nodeName")]
    for name in waiting:
        record = kube.wait_for(
            f"{name}'s trace to name the spent budget",
            functools.partial(_naming, plumb, f"{namespace}/{name}", "2 of 2 used"),
        )
        assert record.result == trace.UNSCHEDULABLE
        assert "PodTopologySpread" in record.rejected
        assert record.budget is not None
        assert (record.budget.used, record.budget.remaining, record.budget.open) == (2, 0, False)
