"""Scenario 1c: plumb SIGKILLed while gangs are being placed.

Groups of 8 one-cpu pods (scheduler-plugins' PodGroup, minMember 8: the chaos plane runs no
controllers, and the upstream PodGroup needs kube-controller-manager's podgroup-protection to
be deleted; the all-or-nothing cycle is the same for both APIs) arrive in a burst, two groups
more than the nodes hold. Until the last kill plumb talks to the API server through the fault
proxy, which holds half the bindings for a moment and drops the other half, so each SIGKILL
finds groups half bound: the killed run had placed them whole and was binding them. The next
run starts from a LIST and must finish them: afterwards every group has all its minimum bound
or none of it, no pod is bound twice, and the invariant holds.
"""

from __future__ import annotations

import collections
import random
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from plumb_dev.cluster.controlplane import lifecycle as controlplane
from plumb_dev.testing import builders, groupclient, kube
from plumb_dev.testing.groupbuilders import POD_GROUP_LABEL, make_coscheduling_group
from tests.chaos import faultproxy, harness, invariant
from tests.chaos.harness import RestartablePlumbFactory

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

MEMBERS = 8
CPU_PER_NODE = 4
SHORT_OF_ROOM = 2  # groups beyond what the nodes hold: they must bind nothing
BINDING_DELAY = 0.5
HELD = (
    faultproxy.Rule(faultproxy.RequestClass.BINDING, faultproxy.Fault.DROP, 0.5),
    faultproxy.Rule(faultproxy.RequestClass.BINDING, faultproxy.Fault.DELAY, 0.5),
)
CATCH_SECONDS = 10.0  # at most, after the random point, for a group bound in part


def test_sigkill_while_gangs_are_placed_leaves_every_group_whole_or_empty(
    plane: controlplane.ControlPlane,
    client: kube.Kube,
    namespace: str,
    node_prefix: str,
    start_plumb: RestartablePlumbFactory,
    tmp_path: Path,
) -> None:
    nodes = harness.create_nodes(
        client, harness.nodes(harness.size(8, 50), prefix=node_prefix, cpu=str(CPU_PER_NODE))
    )
    fit = len(nodes) * CPU_PER_NODE // MEMBERS
    groups = fit + SHORT_OF_ROOM
    kills = harness.size(1, 3)
    api = groupclient.Groups(client)
    for g in range(groups):
        api.create(make_coscheduling_group(f"g{g}", namespace, MEMBERS).obj())
    bodies = [
        builders.make_pod(f"g{g}-{m}", namespace)
        .scheduler(harness.SCHEDULER)
        .req(cpu="1", memory="64Mi")
        .label(POD_GROUP_LABEL, f"g{g}")
        .obj()
        for g in range(groups)
        for m in range(MEMBERS)
    ]
    with faultproxy.FaultProxy(plane.server, ca_file=plane.ca_file, delay=BINDING_DELAY) as proxy:
        proxy.set_rules(HELD)
        plumb = start_plumb(kubeconfig=proxy.write_kubeconfig(tmp_path / "kc", plane.token))
        rng = random.Random(28)
        burst = harness.Burst(plane.kubeconfig, namespace, bodies).start()
        restarts = []
        caught: list[int] = []  # per kill: groups bound in part
        for kill in range(kills):
            target = int(fit * MEMBERS * (kill + rng.random()) / (kills + 1) * 0.9) + 1
            harness.wait_until(f"{target} members bound", _at_least(client, namespace, target))
            deadline = time.monotonic() + CATCH_SECONDS
            while not _partial(client, namespace) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert plumb.kill() == -9
            caught.append(len(_partial(client, namespace)))
            if kill == kills - 1:
                proxy.set_rules([])  # the rest of the burst at full speed
            began = time.monotonic()
            plumb.start()
            restarts.append(round(time.monotonic() - began, 1))
        burst.join()
        harness.wait_all_bound(client, namespace, plumb, fit * MEMBERS)
        verdict = invariant.check(client, [namespace], plumb)
    counts = _bound_per_group(client, namespace)
    harness.record(
        "sigkill-gangs",
        pods=len(bodies),
        nodes=len(nodes),
        groups=groups,
        faults=f"{kills} SIGKILL; until the last, bindings dropped or held {BINDING_DELAY} s",
        violations=len(verdict.violations),
        recovery_s=verdict.cache_matched_after,
        restart_s=restarts,
        partial_groups_at_kill=caught,
    )
    assert not verdict.violations, verdict.summary()
    # All or none: each group has its minimum bound, or nothing.
    assert sorted(set(counts.values()) | {0}) == [0, MEMBERS], counts
    assert sum(count == MEMBERS for count in counts.values()) == fit, counts
    # The kills landed where it matters: a group half bound.
    assert sum(caught) > 0, caught


def _bound_per_group(client: kube.Kube, namespace: str) -> dict[str, int]:
    counts: collections.Counter[str] = collections.Counter()
    for pod in client.pods(namespace):
        group = (pod["metadata"].get("labels") or {}).get(POD_GROUP_LABEL, "")
        counts[group] += bool(pod["spec"].get("nodeName"))
    return dict(counts)


def _partial(client: kube.Kube, namespace: str) -> list[str]:
    """The groups with some members bound and not all (the killed run was binding them)."""
    return [g for g, n in _bound_per_group(client, namespace).items() if 0 < n < MEMBERS]


def _at_least(client: kube.Kube, namespace: str, count: int) -> Callable[[], bool]:
    return lambda: harness.bound(client, namespace) >= count
