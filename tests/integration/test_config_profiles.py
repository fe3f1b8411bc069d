"""One KubeSchedulerConfiguration file, two profiles, two schedulers: kube-scheduler of the
session's release and plumb (following the same release) each read the same file and schedule
the same scenario on the real control plane, one after the other, on nodes of their own. They
must agree on which pods can be placed, keep the same constraints, and the bin-packing profile
must pack as kube-scheduler's does."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from plumb_dev.cluster.controlplane import lifecycle as controlplane
from plumb_dev.testing import builders, kube, kubescheduler
from tests.support import side_by_side
from tests.support.live_cluster import NodeFactory
from tests.support.plumb_process import PlumbFactory

DEFAULT = "cfg-default"
PACKER = "cfg-packer"
PROFILES: list[dict[str, Any]] = [
    {"schedulerName": DEFAULT},
    {
        "schedulerName": PACKER,
        "plugins": {
            "multiPoint": {
                "disabled": [{"name": "InterPodAffinity"}, {"name": "PodTopologySpread"}]
            },
            "score": {
                "enabled": [
                    {"name": "NodeResourcesFit", "weight": 5},
                    {"name": "TaintToleration", "weight": 1},
                ]
            },
        },
        "pluginConfig": [
            {
                "name": "NodeResourcesFit",
                "args": {
                    "scoringStrategy": {
                        "type": "MostAllocated",
                        "resources": [
                            {"name": "cpu", "weight": 1},
                            {"name": "memory", "weight": 1},
                        ],
                    }
                },
            }
        ],
    },
]
NODES = 6
PACKED = 12  # 900m each on 4-cpu nodes: MostAllocated fills 3 nodes, 400m left on each
ANTI = 8  # more pods than nodes, each refusing another on its node
MISSING_KEY = "plumb.test/rack"  # a spread key no node has


@dataclasses.dataclass(frozen=True)
class ProfilePlacements:
    placed: dict[str, str | None]  # pod -> node, None: pending with FailedScheduling
    messages: dict[str, str | None]  # pending pod -> its newest FailedScheduling message

    def packed_nodes(self) -> int:
        return len({node for pod, node in self.placed.items() if pod.startswith("pack")})

    def schedulable(self) -> dict[str, bool]:
        return {pod: node is not None for pod, node in self.placed.items()}


def _scenario(
    client: kube.Kube, namespace: str, add_node: NodeFactory, runner: side_by_side.Runner
) -> ProfilePlacements:
    nodes = [
        add_node(
            builders.make_node(f"{namespace}-n{i}").capacity(cpu="4", memory="16Gi", pods="110")
        )
        for i in range(NODES)
    ]
    try:
        return _place(client, namespace, nodes, runner)
    finally:
        # The next run must not see these nodes (nor their pods).
        client.delete_pods(namespace)
        for node in nodes:
            client.delete_node(node)


def _place(
    client: kube.Kube, namespace: str, nodes: list[str], runner: side_by_side.Runner
) -> ProfilePlacements:
    side_by_side.in_view(client, runner, namespace, nodes)

    def pod(name: str, scheduler_name: str) -> builders.PodBuilder:
        return builders.make_pod(name, namespace).scheduler(scheduler_name)

    names: list[str] = []
    packed = [f"pack{i}" for i in range(PACKED)]
    for name in packed:  # one at a time: each decision sees the ones before it
        client.create_pod(pod(name, PACKER).req(cpu="900m", memory="1Gi").obj())
        side_by_side.wait_settled(client, namespace, [name])
    names += packed
    # The packer's anti-affinity pods first: it packs them onto the packed nodes and fills two
    # of them, which the defaults' anti-affinity pods then find full.
    for scheduler_name, prefix in ((PACKER, "anti-packer"), (DEFAULT, "anti-default")):
        anti = [f"{prefix}{i}" for i in range(ANTI)]
        for name in anti:
            client.create_pod(
                pod(name, scheduler_name)
                .label("app", prefix)
                .req(cpu="100m")
                .affinity("kubernetes.io/hostname", {"app": prefix}, anti=True)
                .obj()
            )
            side_by_side.wait_settled(client, namespace, [name])
        names += anti
    for scheduler_name, name in ((DEFAULT, "rack-default"), (PACKER, "rack-packer")):
        client.create_pod(
            pod(name, scheduler_name)
            .label("app", name)
            .req(cpu="100m")
            .spread(MISSING_KEY, 1, selector={"app": name})
            .obj()
        )
        names.append(name)
    placed = side_by_side.wait_settled(client, namespace, names, cluster_nodes=NODES)
    messages = {
        name: side_by_side.failed_scheduling(client, namespace, name)
        for name, node in placed.items()
        if node is None
    }
    return ProfilePlacements(placed=placed, messages=messages)


def _run_both(
    control_plane: controlplane.ControlPlane,
    tmp_path: Path,
    run: Callable[[side_by_side.Runner], ProfilePlacements],
    start_plumb: PlumbFactory,
) -> tuple[ProfilePlacements, ProfilePlacements]:
    """The scenario under kube-scheduler, then under plumb, both given kube-scheduler's file."""
    process = kubescheduler.start(control_plane, tmp_path / "kube-scheduler", profiles=PROFILES)
    try:
        kube_outcome = run(
            side_by_side.Runner(
                name=side_by_side.KUBE_SCHEDULER, scheduler_name=DEFAULT, log=process.log
            )
        )
    finally:
        assert process.running(), f"kube-scheduler died:\n{process.tail()}"
        process.stop()
    plumb = start_plumb("--config", str(process.config))
    assert "profiles cfg-default, cfg-packer (configuration " in plumb.output()
    plumb_outcome = run(
        side_by_side.Runner(name=side_by_side.PLUMB, scheduler_name=DEFAULT, log=plumb.log)
    )
    return kube_outcome, plumb_outcome


@pytest.mark.differential
def test_two_profiles_from_one_file_place_as_kube_scheduler_does(
    control_plane: controlplane.ControlPlane,
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    start_plumb: PlumbFactory,
    tmp_path: Path,
) -> None:
    runs = iter(("ks", "plumb"))

    def run(runner: side_by_side.Runner) -> ProfilePlacements:
        # Nodes of its own per run: the first run's pods must not weigh on the second's.
        ns = f"{namespace}-{next(runs)}"
        kube_client.create_namespace(ns)
        try:
            return _scenario(kube_client, ns, add_node, runner)
        finally:
            kube_client.delete_workloads(ns)

    kube_outcome, plumb_outcome = _run_both(control_plane, tmp_path, run, start_plumb)

    # The same pods placed and pending.
    assert plumb_outcome.schedulable() == kube_outcome.schedulable()
    # The defaults honour anti-affinity (one per node with room: two are full, the rest wait)
    # and the spread key no node has; the packer, with both plugins disabled, places every pod.
    expected = {
        **{f"pack{i}": True for i in range(PACKED)},
        **{f"anti-default{i}": i < NODES - 2 for i in range(ANTI)},
        **{f"anti-packer{i}": True for i in range(ANTI)},
        "rack-default": False,
        "rack-packer": True,
    }
    assert plumb_outcome.schedulable() == expected
    # Bin-packing packs as kube-scheduler's does.
    assert abs(plumb_outcome.packed_nodes() - kube_outcome.packed_nodes()) <= 1, (
        plumb_outcome.packed_nodes(),
        kube_outcome.packed_nodes(),
    )
    assert plumb_outcome.packed_nodes() == PACKED // 4
    # The pending pods say the same thing.
    assert plumb_outcome.messages == kube_outcome.messages
