"""A plugin that raises for one pod, in a real plumb process on the real control plane: the
other pods of its batch are scheduled, that pod waits with an internal-error FailedScheduling
(PodScheduled=False, reason SchedulerError) and is retried, and plumb goes on scheduling."""

from __future__ import annotations

import urllib.request
from pathlib import Path

from plumb_dev.cluster.controlplane import lifecycle as controlplane
from plumb_dev.testing import builders, kube
from tests.support import raising_plugin, side_by_side
from tests.support.live_cluster import NodeFactory
from tests.support.plumb_process import Plumb, free_port, started_module

NAME = "plumb"


def _start(plane: controlplane.ControlPlane, log: Path, port: int) -> Plumb:
    return started_module(
        "tests.support.raising_plugin", plane.kubeconfig, log, "--metrics-port", str(port)
    )


def test_a_plugin_raising_for_one_pod_fails_only_that_pod(
    control_plane: controlplane.ControlPlane,
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    tmp_path: Path,
) -> None:
    for i in range(3):
        add_node(builders.make_node(f"{namespace}-n{i}").capacity(cpu="8"))
    port = free_port()
    plumb = _start(control_plane, tmp_path / "plumb.log", port)
    try:
        names = [f"web-{i}" for i in range(8)]
        for name in [*names[:4], "doomed", *names[4:]]:
            pod = builders.make_pod(name, namespace).scheduler(NAME).req(cpu="100m")
            if name == "doomed":
                # A spec of its own: replicas of one spec share the filters' verdicts, worked
                # out once per batch, and the double must be asked about this pod.
                pod = pod.toleration("plumb.test/doomed", effect="NoSchedule")
            kube_client.create_pod(pod.obj())
        placed = side_by_side.wait_settled(kube_client, namespace, [*names, "doomed"])
        assert all(placed[name] for name in names), placed
        assert placed["doomed"] is None
        expected = f"internal error: RuntimeError: {raising_plugin.MESSAGE.format(name='doomed')}"
        assert side_by_side.failed_scheduling(kube_client, namespace, "doomed") == expected
        condition = next(
            c
            for c in kube_client.pod(namespace, "doomed")["status"].get("conditions", [])
            if c["type"] == "PodScheduled"
        )
        assert (condition["status"], condition["reason"]) == ("False", "SchedulerError")
        # It is retried after its backoff (and fails again), and plumb goes on with the others.
        kube.wait_for(
            "a retry of the doomed pod",
            lambda: plumb.output().count("scheduling " + f"{namespace}/doomed failed") >= 2,
            timeout=30,
        )
        kube_client.create_pod(builders.make_pod("later", namespace).scheduler(NAME).obj())
        later = side_by_side.wait_settled(kube_client, namespace, ["later"])
        assert later["later"] is not None
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as page:
            text = page.read().decode()
        errors = next(
            line
            for line in text.splitlines()
            if line.startswith('plumb_schedule_attempts_total{result="error"}')
        )
        assert float(errors.split()[-1]) >= 2
        assert plumb.process.poll() is None
    finally:
        code = plumb.stop()
        print(f"--- plumb log ---\n{plumb.output()[-6000:]}")
    assert code == 0
