"""kube-scheduler's OpportunisticBatching (on by default from v1.35) under plumb and under the
real kube-scheduler, each given the same KubeSchedulerConfiguration: one profile without
PodTopologySpread, so its pods are signed, and a pod of the same signature as the pod just
placed, finding that pod's node now full, takes the best of that pod's other nodes as they
were scored then, without scoring them again.

Four nodes alike in size, empty, differing in PreferNoSchedule taints and in the preferred
node-affinity weight the pods give them (so every other score ties): a (no taint, weight 100),
b (1 taint, 50), c (no taint, 0), d (2 taints, 0). TaintToleration weighs 3 and scores
100 - 100 * taints // (most taints among the nodes scored); NodeAffinity weighs 2 and scores
100 * weight // (highest weight among them). The first pod sees all four: a 3*100 + 2*100 =
500, b 3*50 + 2*50 = 250, c 300, d 0: a. If a is then full, the second pod scored afresh sees
b, c, d: the highest weight is 50 now, b 150 + 200 = 350, c 300, d 0: b. Batching reuses the
first pod's scores instead, normalised while a was among them: c 300 before b 250: c.

The nodes and pods exist before the scheduler starts, so it lists them all before its first
cycle: kube-scheduler runs the two cycles back to back (well within the 500 ms its scores are
kept) and plumb decides both in one batch (which stands for that window). Which of the two
goes first is each scheduler's own business (kube-scheduler took either first in these runs):
the nodes are asserted as a set.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from plumb.observability import trace
from plumb_dev.cluster.controlplane import lifecycle as controlplane
from plumb_dev.testing import builders, kube, kubescheduler
from tests.support import side_by_side
from tests.support.live_cluster import NodeFactory
from tests.support.plumb_process import PlumbFactory

pytestmark = pytest.mark.integration

PROFILE = "batching"
PROFILES: list[dict[str, Any]] = [
    {
        "schedulerName": PROFILE,
        # PodTopologySpread's system default constraints make every pod unsignable.
        "plugins": {"multiPoint": {"disabled": [{"name": "PodTopologySpread"}]}},
    }
]
PREFERRED = ("plumb.test/preferred-x", "plumb.test/preferred-y")  # weight 50 each
SOFT = "PreferNoSchedule"
# kube-scheduler's log line (klog -v=3, framework/runtime/batch.go) when it hands out a hint.
HINT = "OpportunisticBatch provided node hint"

Starter = Callable[[], side_by_side.Runner]


@pytest.fixture(name="start", params=side_by_side.SCHEDULERS)
def start_fixture(
    request: pytest.FixtureRequest, control_plane: controlplane.ControlPlane, tmp_path: Path
) -> Iterator[Starter]:
    """Starts the scheduler under test, once the test has set its scene, with the file."""
    started: list[kubescheduler.KubeScheduler] = []

    def start() -> side_by_side.Runner:
        if request.param == side_by_side.PLUMB:
            config = tmp_path / "scheduler-config.json"
            body = kubescheduler.configuration(control_plane, profiles=PROFILES)
            config.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
            start_plumb: PlumbFactory = request.getfixturevalue("start_plumb")
            plumb = start_plumb("--config", str(config))
            return side_by_side.Runner(
                name=side_by_side.PLUMB, scheduler_name=PROFILE, log=plumb.log
            )
        process = kubescheduler.start(
            control_plane, tmp_path / "kube-scheduler", profiles=PROFILES, verbosity=3
        )
        started.append(process)
        return side_by_side.Runner(
            name=side_by_side.KUBE_SCHEDULER, scheduler_name=PROFILE, log=process.log
        )

    yield start
    side_by_side.stop_kube_schedulers(started)


def _nodes(add_node: NodeFactory, namespace: str, cpu: str) -> dict[str, str]:
    """The four nodes, each of ``cpu`` cores and 4Gi; by their letter."""

    def node(letter: str) -> builders.NodeBuilder:
        return builders.make_node(f"{namespace}-{letter}").capacity(cpu=cpu, memory="4Gi")

    return {
        "a": add_node(node("a").label(PREFERRED[0], "yes").label(PREFERRED[1], "yes")),
        "b": add_node(node("b").label(PREFERRED[0], "yes").taint("plumb.test/b", effect=SOFT)),
        "c": add_node(node("c")),
        "d": add_node(
            node("d").taint("plumb.test/d1", effect=SOFT).taint("plumb.test/d2", effect=SOFT)
        ),
    }


def _place_two(client: kube.Kube, namespace: str, start: Starter) -> tuple[list[str], int]:
    """Two identical pods (1500m, 1Gi), then the scheduler: the nodes they went to (in name
    order: which pod goes first is the scheduler's choice), and how many of them the scheduler
    says took a node from the other pod's scores."""
    names = ["p1", "p2"]
    for name in names:
        pod = builders.make_pod(name, namespace).scheduler(PROFILE).label("app", "batching")
        for key in PREFERRED:
            pod.preferred_node_affinity(50, {"key": key, "operator": "Exists"})
        client.create_pod(pod.req(cpu="1500m", memory="1Gi").obj())
    runner = start()
    placed = side_by_side.wait_settled(client, namespace, names, cluster_nodes=4)
    assert None not in placed.values(), placed
    return sorted(str(node) for node in placed.values()), sum(
        _hinted(runner, f"{namespace}/{name}") for name in names
    )


def _hinted(runner: side_by_side.Runner, pod: str) -> bool:
    """plumb's trace line of the pod says ``hinted``; kube-scheduler logs its hint. plumb
    writes the line once the binding has answered, so a pod seen bound may not have it yet."""

    def lines() -> list[str]:
        return runner.log.read_text(errors="replace").splitlines()

    if runner.name == side_by_side.KUBE_SCHEDULER:
        return any(HINT in line and f'pod="{pod}"' in line for line in lines())

    def scheduled() -> trace.Trace | None:
        found = (trace.from_log_line(line) for line in lines())
        records = [r for r in found if r is not None and r.pod == pod and r.node is not None]
        return records[-1] if records else None

    return kube.wait_for(f"a Scheduled trace line for {pod}", scheduled, timeout=15).hinted


@pytest.mark.differential
def test_the_pod_after_one_that_filled_its_node_takes_the_next_of_its_scores(
    kube_minor: int,
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    start: Starter,
) -> None:
    # Nodes of 2 cores: one pod of 1500m fills a node.
    nodes = _nodes(add_node, namespace, cpu="2")
    placed, hinted = _place_two(kube_client, namespace, start)
    # v1.34 scores the second pod afresh (b); from v1.35 it reuses the first pod's scores (c).
    second = "b" if kube_minor < 35 else "c"
    assert placed == [nodes["a"], nodes[second]]
    assert hinted == (1 if kube_minor >= 35 else 0)
    assert side_by_side.overcommitted(kube_client, namespace, nodes.values()) == []


@pytest.mark.differential
def test_the_pod_after_one_whose_node_still_fits_it_is_scored_afresh(
    kube_minor: int,
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    start: Starter,
) -> None:
    # Nodes of 4 cores: a takes both pods. v1.35 and v1.36 score the second afresh (the node
    # just chosen still fits it); v1.37 rescores that node and renormalises the kept scores
    # with it (batch.go rescoreHintedNode), which over the same nodes is the fresh score: a,
    # 3*100 + 2*100 plus its resource scores with one pod placed, ahead of c's 300 plus an
    # empty node's (at most 200 apart). A scheduler that took c from the first pod's scores
    # would be wrong in every release.
    nodes = _nodes(add_node, namespace, cpu="4")
    placed, _ = _place_two(kube_client, namespace, start)
    assert placed == [nodes["a"], nodes["a"]]
    assert side_by_side.overcommitted(kube_client, namespace, nodes.values()) == []
