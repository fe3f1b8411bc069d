"""The harness that runs scenarios under both plumb and the real kube-scheduler: that the
reference scheduler starts, decides, stays in its lane and stops, and that both agree."""

from __future__ import annotations

import collections
import dataclasses
import signal
import time
from pathlib import Path

import pytest

from plumb_dev.cluster.controlplane import lifecycle as controlplane
from plumb_dev.testing import builders, kube, kubescheduler
from tests.support import side_by_side
from tests.support.live_cluster import NodeFactory, events_of
from tests.support.side_by_side import scheduler_fixture  # noqa: F401

pytestmark = pytest.mark.integration


def _processes_with(arg: str) -> list[int]:
    """Pids of live processes whose command line carries arg (zombies have none)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if arg.encode() in args:
            found.append(int(cmdline.parent.name))
    return found


def test_kube_scheduler_binds_its_own_pods_explains_waits_and_stops_cleanly(
    control_plane: controlplane.ControlPlane,
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    tmp_path: Path,
) -> None:
    nodes = [
        add_node(builders.make_node(f"{namespace}-n{i}").capacity(cpu="2", pods="10"))
        for i in range(2)
    ]
    ks = kubescheduler.start(control_plane, tmp_path / "ks")
    identity = f"--config={ks.config}"
    assert _processes_with(identity) == [ks.pid]
    try:
        # Created before the pods it does take: the pod watch is one ordered stream, so once
        # "mine" is bound kube-scheduler has seen these two and passed them over.
        kube_client.create_pod(
            builders.make_pod("for-plumb", namespace).scheduler("plumb").req(cpu="100m").obj()
        )
        kube_client.create_pod(builders.make_pod("default", namespace).req(cpu="100m").obj())
        for name, cpu in (("mine", "500m"), ("huge", "100000")):
            kube_client.create_pod(
                builders.make_pod(name, namespace).scheduler(ks.scheduler_name).req(cpu=cpu).obj()
            )

        placed = side_by_side.wait_settled(
            kube_client, namespace, ["mine", "huge"], cluster_nodes=len(nodes)
        )
        assert placed["mine"] in nodes
        assert placed["huge"] is None
        # v1.34.4 goes on after the prefix: "no new claims to deallocate, preemption: 0/2 nodes
        # are available: 2 Preemption is not helpful for scheduling."
        message = side_by_side.failed_scheduling(kube_client, namespace, "huge")
        assert message is not None
        assert message.startswith("0/2 nodes are available: 2 Insufficient cpu.")
        scheduled = kube.wait_for(
            "a Scheduled event for mine",
            lambda: events_of(kube_client, namespace, "mine", "Scheduled"),
        )
        assert scheduled[0]["message"] == (
            f"Successfully assigned {namespace}/mine to {placed['mine']}"
        )
        assert scheduled[0]["reportingComponent"] == ks.scheduler_name
        for name in ("for-plumb", "default"):
            assert not kube_client.pod(namespace, name)["spec"].get("nodeName"), name
            assert not kube_client.events(namespace, name), f"kube-scheduler reported on {name}"
    finally:
        code = ks.stop()

    assert code != -signal.SIGKILL, f"kube-scheduler ignored SIGTERM:\n{ks.tail()}"
    assert not ks.running()
    assert _processes_with(identity) == []
    assert ks.stop() == code


def test_kube_scheduler_that_exits_at_start_fails_with_its_log(
    control_plane: controlplane.ControlPlane, tmp_path: Path
) -> None:
    missing = tmp_path / "no-such-kubeconfig"
    plane = dataclasses.replace(control_plane, kubeconfig=missing)
    with pytest.raises(kubescheduler.KubeSchedulerError, match="exited with code 1") as error:
        kubescheduler.start(plane, tmp_path / "ks", timeout=30)
    assert f"stat {missing}: no such file or directory" in str(error.value)
    assert _processes_with(f"--config={tmp_path / 'ks' / kubescheduler.CONFIG_FILE}") == []


def test_overcommitted_names_the_node_and_resource(
    kube_client: kube.Kube, namespace: str, add_node: NodeFactory
) -> None:
    node = add_node(builders.make_node(f"{namespace}-n").capacity(cpu="1", pods="10"))
    # Bound at creation, as a buggy scheduler might: the API server does not check capacity.
    for name in ("a", "b"):
        kube_client.create_pod(builders.make_pod(name, namespace).node(node).req(cpu="600m").obj())
    assert side_by_side.overcommitted(kube_client, namespace, [node]) == [
        f"{node} over-committed on cpu: 1.200 > 1"
    ]


def test_both_schedulers_bind_six_of_seven_pods_two_per_node(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: side_by_side.Runner,
) -> None:
    nodes = [
        add_node(builders.make_node(f"{namespace}-n{i}").capacity(cpu="2", memory="4Gi"))
        for i in range(3)
    ]
    names = [f"p{i}" for i in range(7)]
    for name in names:
        kube_client.create_pod(scheduler.pod(name, namespace).req(cpu="800m").obj())

    placed = side_by_side.wait_settled(kube_client, namespace, names, cluster_nodes=len(nodes))
    pending = [name for name, node in placed.items() if node is None]
    assert len(pending) == 1, placed
    # Two 800m pods fit in 2 cpu and three do not, so six bound means two on every node.
    assert collections.Counter(node for node in placed.values() if node) == dict.fromkeys(nodes, 2)
    message = side_by_side.failed_scheduling(kube_client, namespace, pending[0])
    assert message is not None
    assert message.startswith("0/3 nodes are available: 3 Insufficient cpu."), message
    assert side_by_side.overcommitted(kube_client, namespace, nodes) == []


def test_both_schedulers_give_a_freed_node_to_the_pods_that_waited_longest(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: side_by_side.Runner,
) -> None:
    # Four pods created in a burst (creationTimestamp has whole seconds: they share one or
    # two) all fail: no node has their label. When a node gets it, it has room for two, and
    # both schedulers give it to the first two: kube-scheduler's queue orders by its own
    # nanosecond timestamp of each failure, never by anything random such as the uid.
    node = add_node(builders.make_node(f"{namespace}-n").capacity(cpu="2", memory="4Gi"))
    names = [f"p{i}" for i in range(4)]
    for name in names:
        kube_client.create_pod(
            scheduler.pod(name, namespace)
            .node_selector("plumb.test/ready", namespace)
            .req(cpu="800m")
            .obj()
        )
    assert set(side_by_side.wait_settled(kube_client, namespace, names).values()) == {None}
    # Past both schedulers' 1 s backoff after a first failure: the node's change sends all four
    # back to the active queue at once, and its order alone decides.
    time.sleep(2)

    kube_client.patch_node(node, {"metadata": {"labels": {"plumb.test/ready": namespace}}})

    def bound() -> dict[str, str] | None:
        placed = {
            p["metadata"]["name"]: p["spec"]["nodeName"]
            for p in kube_client.pods(namespace)
            if p["spec"].get("nodeName")
        }
        return placed if len(placed) >= 2 else None

    placed = kube.wait_for("two pods bound on the labelled node", bound, timeout=60)
    assert placed == {"p0": node, "p1": node}
    assert side_by_side.overcommitted(kube_client, namespace, [node]) == []
