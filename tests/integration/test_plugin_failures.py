"""Python plugins that misbehave, in a real plumb process on the real control plane: a Filter
that raises, one that answers in the wrong shape and one that hangs past its timeout each fail
only the pod they judged (FailedScheduling with reason SchedulerError, in kube-scheduler's words
for the extension point, counted in plumb_plugin_failures_total), and every other pod of the
same burst is bound; plumb goes on scheduling."""

from __future__ import annotations

import functools
import json
from pathlib import Path

from plumb_dev.cluster.controlplane import lifecycle as controlplane
from plumb_dev.testing import builders, kube
from tests.support import metrics_page, side_by_side
from tests.support.live_cluster import NodeFactory
from tests.support.plumb_process import Plumb, free_port, started_module

NAME = "plumb"
RACK = "plumb.test/rack"
CONFIG = {
    "apiVersion": "kubescheduler.config.k8s.io/v1",
    "kind": "KubeSchedulerConfiguration",
    "profiles": [
        {
            "schedulerName": NAME,
            "plugins": {
                "filter": {"enabled": [{"name": "RackFilter"}]},
                "score": {"enabled": [{"name": "CheapScore", "weight": 1}]},
            },
        }
    ],
}
FILTER_SAYS = 'running "RackFilter" filter plugin: '
EXPECTED = {
    "raise-1": FILTER_SAYS + "RuntimeError: cannot judge raise-1",
    "wrong-1": FILTER_SAYS + "answered ndarray, not a FilterRejection, a list of them or None",
    "hang-1": FILTER_SAYS + "did not answer within 0.5s",
}


def _start(plane: controlplane.ControlPlane, tmp_path: Path, port: int) -> Plumb:
    config = tmp_path / "scheduler-config.json"
    config.write_text(json.dumps(CONFIG), encoding="utf-8")
    return started_module(
        "tests.support.sample_plugins",
        plane.kubeconfig,
        tmp_path / "plumb.log",
        "--config",
        str(config),
        "--metrics-port",
        str(port),
    )


def test_a_plugin_that_raises_answers_wrong_or_hangs_fails_only_the_pod_it_judged(
    control_plane: controlplane.ControlPlane,
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    tmp_path: Path,
) -> None:
    for i in range(3):
        add_node(builders.make_node(f"{namespace}-n{i}").capacity(cpu="8").label(RACK, "a"))
    port = free_port()
    plumb = _start(control_plane, tmp_path, port)
    try:
        good = [f"web-{i}" for i in range(6)]
        burst = [good[0], "raise-1", good[1], "wrong-1", good[2], "hang-1", *good[3:]]
        for name in burst:
            kube_client.create_pod(
                builders.make_pod(name, namespace).scheduler(NAME).req(cpu="100m").obj()
            )
        placed = side_by_side.wait_settled(kube_client, namespace, burst)
        assert all(placed[name] for name in good), placed
        for name, message in EXPECTED.items():
            assert placed[name] is None
            said = kube.wait_for(
                f"{name}'s FailedScheduling",
                functools.partial(side_by_side.failed_scheduling, kube_client, namespace, name),
            )
            assert said == message
            condition = next(
                c
                for c in kube_client.pod(namespace, name)["status"].get("conditions", [])
                if c["type"] == "PodScheduled"
            )
            assert (condition["status"], condition["reason"]) == ("False", "SchedulerError")
        samples = metrics_page.scrape(port)
        for reason in ("raised", "malformed", "timeout"):
            counted = metrics_page.value(
                samples,
                "plumb_plugin_failures_total",
                plugin="RackFilter",
                extension_point="Filter",
                reason=reason,
            )
            assert counted is not None, reason
            assert counted >= 1, (reason, counted)
        # Its calls are timed like a built-in's (the dashboard's "Python plugin latency"): each
        # call that answered, so every pod's but the hung one's, which counts as a timeout.
        timed = [
            count
            for (name, labels), count in samples.items()
            if name == "plumb_plugin_execution_duration_seconds_count"
            and ("plugin", "RackFilter") in labels
            and ("extension_point", "Filter") in labels
        ]
        assert sum(timed) >= len(burst) - 1, timed
        # The loop goes on: a pod created after all this is bound.
        kube_client.create_pod(
            builders.make_pod("later", namespace).scheduler(NAME).req(cpu="100m").obj()
        )
        assert side_by_side.wait_settled(kube_client, namespace, ["later"])["later"] is not None
        assert plumb.process.poll() is None
    finally:
        code = plumb.stop()
        print(f"--- plumb log ---\n{plumb.output()[-6000:]}")
    assert code == 0
