"""What a person sees of a preemption on the real control plane: the trace line's preemption
part, ``plumb explain``, and the preemption metrics on /metrics."""

from __future__ import annotations

import re
import urllib.request

import pytest

from plumb import DEFAULT_SCHEDULER_NAME
from plumb.observability import trace
from plumb_dev.testing import builders, kube
from tests.support import plumb_process
from tests.support.live_cluster import NodeFactory
from tests.support.plumb_process import PlumbFactory, free_port

pytestmark = pytest.mark.integration

HOLD = "plumb.test/hold"


def _metric(text: str, name: str) -> float:
    found = re.findall(rf"^{name} ([0-9.e+]+)$", text, flags=re.MULTILINE)
    assert found, f"{name} is not on /metrics"
    return float(found[0])


def test_a_preemption_is_traced_explained_and_counted(
    kube_client: kube.Kube, namespace: str, add_node: NodeFactory, start_plumb: PlumbFactory
) -> None:
    """One 4-cpu node holds a 3-cpu pod of priority 0 and a 1-cpu pod of priority 5; a 2-cpu
    pod of priority 1000 needs the 3-cpu pod gone (the 1-cpu pod is reprieved). The victim
    keeps a finalizer, so the preemptor's last decision is the one that preempted."""
    node = add_node(builders.make_node(f"{namespace}-n").capacity(cpu="4"))
    debug, metrics = free_port(), free_port()
    plumb = start_plumb("--debug-port", str(debug), "--metrics-port", str(metrics))
    kube_client.create_pod(
        builders.make_pod("big", namespace)
        .scheduler(DEFAULT_SCHEDULER_NAME)
        .req(cpu="3")
        .grace(0)
        .node(node)
        .finalizer(HOLD)
        .obj()
    )
    kube_client.create_pod(
        builders.make_pod("small", namespace)
        .scheduler(DEFAULT_SCHEDULER_NAME)
        .req(cpu="1")
        .grace(0)
        .priority(5)
        .node(node)
        .obj()
    )
    kube_client.create_pod(
        builders.make_pod("vip", namespace)
        .scheduler(DEFAULT_SCHEDULER_NAME)
        .req(cpu="2")
        .grace(0)
        .priority(1000)
        .obj()
    )

    record = plumb_process.last_trace(plumb, f"{namespace}/vip", trace.UNSCHEDULABLE)
    assert record.preemption is not None
    assert record.preemption.node == node
    assert [(v.pod, v.priority) for v in record.preemption.victims] == [(f"{namespace}/big", 0)]
    assert (record.preemption.candidates, record.preemption.searched) == (1, 1)

    text = plumb_process.explained_alike(plumb, debug, f"{namespace}/vip")
    assert (
        f"preemption: nominated to {node}, 1 victim (1 of 1 candidate node, 1 searched, "
        "0 PDB violations)"
    ) in text
    assert f"evicts {namespace}/big (priority 0, Burstable)" in text

    with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=10) as response:
        page = response.read().decode()
    assert _metric(page, "plumb_preemption_attempts_total") >= 1
    assert _metric(page, "plumb_preemption_victims_count") == 1
    assert _metric(page, "plumb_preemption_victims_sum") == 1

    kube_client.release(namespace, "big")
    bound = kube.wait_for(
        "vip to be bound", lambda: kube_client.pod(namespace, "vip")["spec"].get("nodeName")
    )
    assert bound == node
