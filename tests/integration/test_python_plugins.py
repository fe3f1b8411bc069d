"""The example Python plugins (examples/, installed beside plumb by `make install` with
`pip install -e`) enabled by a configuration file, on the real control plane: MaintenanceWindow
keeps pods off a node annotated with a window that is open, PriceLabel sends them to the
cheaper node, AcceleratorPacking fills the accelerator node already in use; their reasons are
in FailedScheduling and `plumb explain`, their scores in the trace line. One file, two
profiles: the same pod under the default profile goes where the plugins would not let it.
"""

from __future__ import annotations

import datetime
import functools
import json
from pathlib import Path
from typing import Any

import pytest

from plumb.observability import trace
from plumb_dev.testing import builders, kube
from tests.support import plumb_process, side_by_side
from tests.support.live_cluster import NodeFactory, events_of
from tests.support.plumb_process import Plumb, PlumbFactory, free_port

pytestmark = pytest.mark.integration

WINDOW = "plumb.io/maintenance-window"
PRICE = "plumb.io/hourly-price"
GPU = "nvidia.com/gpu"
IN_WINDOW = "node(s) are in a maintenance window"
PLAIN, PLUGGED = "plumb", "plumb-plugins"
CONFIG: dict[str, Any] = {
    "apiVersion": "kubescheduler.config.k8s.io/v1",
    "kind": "KubeSchedulerConfiguration",
    "profiles": [
        {"schedulerName": PLAIN},
        {
            "schedulerName": PLUGGED,
            "plugins": {
                "filter": {"enabled": [{"name": "MaintenanceWindow"}]},
                "score": {
                    "enabled": [
                        {"name": "PriceLabel", "weight": 5},
                        {"name": "AcceleratorPacking", "weight": 5},
                    ]
                },
            },
            "pluginConfig": [{"name": "MaintenanceWindow", "args": {"leadSeconds": 600}}],
        },
    ],
}


def _window(start: float, end: float) -> str:
    def stamp(hours: float) -> str:
        moment = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=hours)
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")

    return f"{stamp(start)}/{stamp(end)}"


def _start(start_plumb: PlumbFactory, tmp_path: Path, port: int) -> Plumb:
    config = tmp_path / "scheduler-config.json"
    config.write_text(json.dumps(CONFIG, indent=2) + "\n", encoding="utf-8")
    return start_plumb("--config", str(config), "--debug-port", str(port))


def _node_of(client: kube.Kube, namespace: str, name: str) -> str:
    def node() -> str | None:
        return client.pod(namespace, name)["spec"].get("nodeName") or None

    return kube.wait_for(f"{namespace}/{name} to be bound", node, timeout=60)


def _failed(client: kube.Kube, namespace: str, name: str) -> str | None:
    found = events_of(client, namespace, name, "FailedScheduling")
    return str(found[-1]["message"]) if found else None


def test_maintenance_windows_and_prices_place_pods_as_documented(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    start_plumb: PlumbFactory,
    tmp_path: Path,
) -> None:
    # b: the cheapest, in a window open now; c: a window in 5 minutes, within the 10 minutes'
    # lead the file gives; d: a window tomorrow; a: the dearest, no window.
    nodes = {
        "a": add_node(builders.make_node(f"{namespace}-a").label(PRICE, "3.00")),
        "b": add_node(
            builders.make_node(f"{namespace}-b")
            .label(PRICE, "0.50")
            .annotate(WINDOW, _window(-1, 1))
        ),
        "c": add_node(
            builders.make_node(f"{namespace}-c")
            .label(PRICE, "0.60")
            .annotate(WINDOW, _window(5 / 60, 2))
        ),
        "d": add_node(
            builders.make_node(f"{namespace}-d")
            .label(PRICE, "1.00")
            .annotate(WINDOW, _window(24, 26))
        ),
    }
    port = free_port()
    plumb = _start(start_plumb, tmp_path, port)

    def pod(name: str, scheduler: str) -> builders.PodBuilder:
        # Drawn to b by a preferred node affinity, as a pod that liked b's price would be.
        return (
            builders.make_pod(name, namespace)
            .scheduler(scheduler)
            .req(cpu="100m")
            .preferred_node_affinity(
                100, {"key": "kubernetes.io/hostname", "operator": "In", "values": [nodes["b"]]}
            )
        )

    kube_client.create_pod(pod("plain", PLAIN).obj())
    kube_client.create_pod(pod("plugged", PLUGGED).obj())
    # The default profile follows the affinity to b; the plugins keep the pod off b (open
    # window) and c (opening within the lead), and PriceLabel takes the cheaper of a and d.
    assert _node_of(kube_client, namespace, "plain") == nodes["b"]
    assert _node_of(kube_client, namespace, "plugged") == nodes["d"]
    scheduled = plumb_process.scheduled_traces(plumb, {f"{namespace}/plugged"})[-1]
    scores = {c.node: dict(c.scores) for c in scheduled.candidates}
    # PriceLabel reversed over a (3.00) and d (1.00): 100 - 1.00 * 100 // 3.00.
    assert scores[nodes["d"]]["PriceLabel"] == 67
    assert scores[nodes["a"]]["PriceLabel"] == 0
    assert scheduled.weights["PriceLabel"] == 5
    assert scheduled.feasible == 2
    assert scheduled.total == 4

    # A pod only b or c would take waits, with the plugin's reason among the built-ins'.
    pinned = (
        builders.make_pod("pinned", namespace)
        .scheduler(PLUGGED)
        .req(cpu="100m")
        .node_affinity(
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [nodes["b"], nodes["c"]]}
        )
    )
    kube_client.create_pod(pinned.obj())
    message = kube.wait_for(
        "pinned's FailedScheduling", functools.partial(_failed, kube_client, namespace, "pinned")
    )
    assert message == side_by_side.without_victims(
        f"0/4 nodes are available: 2 {IN_WINDOW}, "
        "2 node(s) didn't match Pod's node affinity/selector.",
        4,
        0,
    )
    explained = plumb_process.explain(f"{namespace}/pinned", "--from", str(plumb.log))
    assert "MaintenanceWindow" in explained
    assert IN_WINDOW in explained
    refused = plumb_process.last_trace(plumb, f"{namespace}/pinned", trace.UNSCHEDULABLE)
    assert refused.rejected["MaintenanceWindow"].nodes == 2

    # The window on b is lifted: the node change lets the waiting pod in (the plugin waits for
    # NodeChanged), well before the queue's periodic flush.
    kube_client.patch_node(nodes["b"], {"metadata": {"annotations": {WINDOW: None}}})
    assert _node_of(kube_client, namespace, "pinned") == nodes["b"]


def test_accelerator_pods_fill_the_node_already_in_use(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    start_plumb: PlumbFactory,
    tmp_path: Path,
) -> None:
    used = add_node(builders.make_node(f"{namespace}-used").capacity(cpu="16", **{GPU: "4"}))
    idle = add_node(builders.make_node(f"{namespace}-idle").capacity(cpu="16", **{GPU: "4"}))
    kube_client.create_pod(
        builders.make_pod("resident", namespace).node(used).req(cpu="1", **{GPU: "2"}).obj()
    )
    plumb = _start(start_plumb, tmp_path, free_port())
    for i in range(2):
        kube_client.create_pod(
            builders.make_pod(f"train-{i}", namespace)
            .scheduler(PLUGGED)
            .req(cpu="1", **{GPU: "1"})
            .obj()
        )
    # LeastAllocated alone would spread them to the idle node (less cpu requested there);
    # AcceleratorPacking (weight 5) packs both where two accelerators are in use already.
    assert [_node_of(kube_client, namespace, f"train-{i}") for i in range(2)] == [used, used]
    lines = plumb_process.scheduled_traces(plumb, {f"{namespace}/train-{i}" for i in range(2)})
    best = {line.pod: dict(line.candidates[0].scores) for line in lines}
    assert best[f"{namespace}/train-0"]["AcceleratorPacking"] == 75  # 3 of 4 in use
    assert best[f"{namespace}/train-1"]["AcceleratorPacking"] == 100
    assert idle not in {line.node for line in lines}
