"""A SchedulingPolicy's ``spec.gangs`` on the real control plane, with scheduler-plugins'
PodGroups (their CRD installed; no feature gate): a group lands whole in the tightest zone that
holds it; a group no zone holds spans zones on one deviation of the budget (a PolicyDeviation
event per member, ``status.budget`` counting one), and the next such group waits with a
FailedScheduling that names the policy and its budget; under ScheduleAnyway a group spans zones
without a deviation."""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from plumb.observability import trace
from plumb_dev.cluster.controlplane import lifecycle as controlplane
from plumb_dev.testing import builders, crds, groupclient, kube, schedulerplugins
from plumb_dev.testing.groupbuilders import POD_GROUP_LABEL, make_coscheduling_group
from tests.support.live_cluster import NodeFactory, events_of
from tests.support.plumb_process import PlumbFactory

pytestmark = [pytest.mark.integration, pytest.mark.gangs]

ZONE = "topology.kubernetes.io/zone"


@pytest.fixture
def podgroups(control_plane: controlplane.ControlPlane, tmp_path: Path) -> None:
    """scheduler-plugins' PodGroup CRD, before plumb starts (plumb reads it at start)."""
    schedulerplugins.install_podgroups(control_plane, tmp_path / "kubectl-cache")


def _zones(namespace: str, add_node: NodeFactory, **cpus: str) -> dict[str, str]:
    """One node per zone, of the cpus given; {node: zone}. Zones are named after the test's
    namespace, so no other test's nodes share them."""
    return {
        add_node(
            builders.make_node(f"{namespace}-{zone}").zone(f"{namespace}-{zone}").capacity(cpu=cpu)
        ): zone
        for zone, cpu in cpus.items()
    }


def _policy(kubectl: crds.Kubectl, namespace: str, when: str) -> None:
    body = {
        "apiVersion": "scheduling.plumb.dev/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": "train"},
        "spec": {
            "selector": {"matchLabels": {"app": "train"}},
            "gangs": {"topologyKey": ZONE, "whenUnsatisfiable": when},
            "deviationBudget": {"maxViolations": 1},
        },
    }
    kubectl.check("apply", "-n", namespace, "-f", "-", stdin=json.dumps(body))


def _group(client: kube.Kube, namespace: str, name: str, size: int, cpu: str) -> list[str]:
    """A PodGroup needing all its ``size`` members of ``cpu`` each; the members' names."""
    groupclient.Groups(client).create(make_coscheduling_group(name, namespace, size).obj())
    names = [f"{name}-{i}" for i in range(size)]
    for pod in names:
        client.create_pod(
            builders.make_pod(pod, namespace)
            .scheduler("plumb")
            .label("app", "train")
            .label(POD_GROUP_LABEL, name)
            .req(cpu=cpu)
            .obj()
        )
    return names


def _placed(client: kube.Kube, namespace: str, names: Sequence[str]) -> dict[str, str]:
    """The nodes of those of ``names`` that are bound."""
    pods = {p["metadata"]["name"]: p for p in client.pods(namespace)}
    return {n: pods[n]["spec"]["nodeName"] for n in names if pods[n]["spec"].get("nodeName")}


def _all_bound(client: kube.Kube, namespace: str, names: Sequence[str]) -> dict[str, str]:
    def bound() -> dict[str, str] | None:
        placed = _placed(client, namespace, names)
        return placed if len(placed) == len(names) else None

    return kube.wait_for(f"{', '.join(names)} bound", bound, timeout=30)


def _budget(kubectl: crds.Kubectl, namespace: str) -> dict[str, Any]:
    got = json.loads(kubectl.check("get", "spol", "train", "-n", namespace, "-o", "json"))
    budget: dict[str, Any] = (got.get("status") or {}).get("budget") or {}
    return budget


def _budget_used(kubectl: crds.Kubectl, namespace: str, used: int) -> dict[str, Any] | None:
    budget = _budget(kubectl, namespace)
    return budget if budget.get("used") == used else None


def _refused_on_budget(client: kube.Kube, namespace: str, name: str) -> str | None:
    for event in events_of(client, namespace, name, "FailedScheduling"):
        if "deviation budget" in event["message"]:
            return str(event["message"])
    return None


def test_a_group_stays_in_the_tightest_zone_spans_on_the_budget_then_waits(
    podgroups: None,
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    policy_crd: crds.Kubectl,
    start_plumb: PlumbFactory,
) -> None:
    zones = _zones(namespace, add_node, a="5", b="5", c="3")
    _policy(policy_crd, namespace, "DoNotSchedule")
    plumb = start_plumb()

    # 3 x 1 cpu: every zone holds it; c is left with nothing, the tightest fit (LeastAllocated
    # alone would have put the members in a and b).
    fit = _group(kube_client, namespace, "fit", 3, "1")
    assert {zones[node] for node in _all_bound(kube_client, namespace, fit).values()} == {"c"}

    # 2 x 3 cpu: no zone has 6 free; it spans a and b, one deviation for the group.
    wide = _group(kube_client, namespace, "wide", 2, "3")
    assert {zones[n] for n in _all_bound(kube_client, namespace, wide).values()} == {"a", "b"}
    for name in wide:
        found = kube.wait_for(
            f"{name}'s PolicyDeviation",
            functools.partial(events_of, kube_client, namespace, name, "PolicyDeviation"),
        )
        assert len(found) == 1, (name, found)
        beyond = f"with pod group {namespace}/wide beyond SchedulingPolicy {namespace}/train"
        assert beyond in found[0]["message"]
    budget = kube.wait_for(
        "status.budget to count the group's deviation",
        functools.partial(_budget_used, policy_crd, namespace, 1),
    )
    uid = groupclient.Groups(kube_client).get("scheduling.x-k8s.io/v1alpha1", namespace, "wide")[
        "metadata"
    ]["uid"]
    assert (budget["remaining"], budget["chargedPods"]) == (0, [uid])

    # 2 x 2 cpu: a and b have 2 left each; spanning needs a deviation, and none is left.
    late = _group(kube_client, namespace, "late", 2, "2")
    for name in late:
        message = kube.wait_for(
            f"{name}'s FailedScheduling to name the budget",
            functools.partial(_refused_on_budget, kube_client, namespace, name),
        )
        assert message.startswith(
            f"pod group is unschedulable, no single {ZONE} domain holds its minimum 2"
        )
        assert f"SchedulingPolicy {namespace}/train's deviation budget: 1 of 1 used" in message
    assert _placed(kube_client, namespace, late) == {}
    # The trace line of a member says where its group went, and why.
    traced = [trace.from_log_line(line) for line in plumb.output().splitlines()]
    topologies = {
        line.pod: line.group.topology
        for line in traced
        if line is not None and line.group is not None and line.group.topology is not None
    }
    assert topologies[f"{namespace}/fit-0"].domain == f"{namespace}-c"
    assert topologies[f"{namespace}/wide-0"].deviation is True


@pytest.mark.long  # in make test-long; the other scenario stays in make test
def test_schedule_anyway_spans_zones_without_a_deviation(
    podgroups: None,
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    policy_crd: crds.Kubectl,
    start_plumb: PlumbFactory,
) -> None:
    zones = _zones(namespace, add_node, a="5", b="5")
    _policy(policy_crd, namespace, "ScheduleAnyway")
    start_plumb()

    wide = _group(kube_client, namespace, "wide", 2, "3")

    assert {zones[n] for n in _all_bound(kube_client, namespace, wide).values()} == {"a", "b"}
    assert [e for n in wide for e in events_of(kube_client, namespace, n, "PolicyDeviation")] == []
    assert _budget(policy_crd, namespace).get("used", 0) == 0
