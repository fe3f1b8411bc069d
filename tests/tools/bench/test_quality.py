"""Placement quality: the figures the benchmark reports and the violations it refuses."""

from __future__ import annotations

from typing import Any

import pytest

from plumb_dev.bench import quality
from plumb_dev.testing import builders

ZONE = builders.ZONE_LABEL
HOST = builders.HOSTNAME_LABEL


def _nodes(count: int, zones: int = 2, cpu: str = "4", pods: str = "110") -> list[dict[str, Any]]:
    return [
        builders.make_node(f"n{i}").zone(f"z{i % zones}").capacity(cpu=cpu, pods=pods).obj()
        for i in range(count)
    ]


def _pod(name: str, node: str | None, cpu: str = "1") -> builders.PodBuilder:
    pod = builders.make_pod(name, "bench").label("app", "web").req(cpu=cpu, memory="1Gi")
    return pod.node(node) if node else pod


def test_even_placement_has_no_violations_and_zero_spread() -> None:
    nodes = _nodes(4)
    pods = [_pod(f"p{i}", f"n{i % 4}").obj() for i in range(8)]
    assessed = quality.assess(nodes, pods, {f"p{i}" for i in range(8)})
    assert assessed.placed == 8
    assert assessed.nodes_used_share == 1.0
    assert assessed.cpu_utilisation_stddev == 0.0
    assert assessed.total_violations == 0
    assert assessed.preferred_share is None


def test_unbound_pods_and_pods_on_foreign_nodes_are_not_placed() -> None:
    nodes = _nodes(2)
    pods = [_pod("a", "n0").obj(), _pod("b", None).obj(), _pod("c", "elsewhere").obj()]
    assessed = quality.assess(nodes, pods, {"a", "b", "c"})
    assert (assessed.measured_pods, assessed.placed) == (3, 1)
    assert assessed.nodes_used_share == 0.5


def test_cpu_stddev_measures_imbalance() -> None:
    # One node at 4/4 cpu, one empty: shares 1.0 and 0.0, population stddev 0.5.
    pods = [_pod(f"p{i}", "n0").obj() for i in range(4)]
    assessed = quality.assess(_nodes(2), pods, {"p0"})
    assert assessed.cpu_utilisation_stddev == pytest.approx(0.5)


def test_a_node_over_allocatable_is_a_violation() -> None:
    too_much_cpu = [_pod(f"c{i}", "n0").obj() for i in range(5)]  # 5 cpu on 4
    too_many_pods = [_pod(f"m{i}", "n1", cpu="10m").obj() for i in range(4)]  # 4 pods on 3
    nodes = [
        builders.make_node("n0").capacity(cpu="4").obj(),
        builders.make_node("n1").capacity(cpu="4", pods="3").obj(),
    ]
    assessed = quality.assess(nodes, too_much_cpu + too_many_pods, set())
    assert assessed.violations["allocatable"] == 2


def test_spread_skew_and_the_pods_beyond_max_skew() -> None:
    nodes = _nodes(3, zones=3)
    # z0 gets 4 matching pods, z1 gets 1, z2 gets 0: skew 4; maxSkew 1 allows 0 + 1 per zone.
    placement = ["n0", "n0", "n0", "n0", "n1"]
    pods = [
        _pod(f"p{i}", node).spread(ZONE, 1, selector={"app": "web"}).obj()
        for i, node in enumerate(placement)
    ]
    assessed = quality.assess(nodes, pods, {f"p{i}" for i in range(5)})
    assert list(assessed.spread_skew.values()) == [4]
    assert "topology.kubernetes.io/zone maxSkew=1 DoNotSchedule [app=web]" in assessed.spread_skew
    assert assessed.violations["spread"] == 3


def test_schedule_anyway_spread_reports_skew_but_no_violation() -> None:
    pods = [
        _pod(f"p{i}", "n0").spread(ZONE, 1, when="ScheduleAnyway", selector={"app": "web"}).obj()
        for i in range(3)
    ]
    assessed = quality.assess(_nodes(2), pods, {"p0", "p1", "p2"})
    assert list(assessed.spread_skew.values()) == [3]
    assert assessed.violations["spread"] == 0


def test_pods_sharing_a_host_they_must_avoid_are_violations() -> None:
    nodes = _nodes(3)
    avoid = {"app": "web"}
    pods = [
        _pod("a", "n0").affinity(HOST, avoid, anti=True).obj(),
        _pod("b", "n0").affinity(HOST, avoid, anti=True).obj(),
        _pod("c", "n1").affinity(HOST, avoid, anti=True).obj(),
        # Matches the selector but carries no anti-affinity: violating only through a and b.
        _pod("d", "n2").obj(),
    ]
    assessed = quality.assess(nodes, pods, {"a", "b", "c", "d"})
    assert assessed.violations["anti-affinity"] == 2


def test_anti_affinity_against_a_different_label_is_no_violation() -> None:
    pods = [
        _pod("a", "n0").affinity(HOST, {"app": "db"}, anti=True).obj(),
        _pod("b", "n0").affinity(HOST, {"app": "db"}, anti=True).obj(),
    ]
    assert quality.assess(_nodes(1), pods, {"a", "b"}).violations["anti-affinity"] == 0


def test_preferred_share_counts_pods_on_preferred_nodes() -> None:
    nodes = _nodes(2, zones=2)  # n0 in z0, n1 in z1
    prefer = builders.expr(ZONE, "In", "z0")
    pods = [
        _pod("a", "n0").preferred_node_affinity(100, prefer).obj(),
        _pod("b", "n0").preferred_node_affinity(100, prefer).obj(),
        _pod("c", "n1").preferred_node_affinity(100, prefer).obj(),
        _pod("d", "n1").obj(),  # no preference: not counted
    ]
    assessed = quality.assess(nodes, pods, {"a", "b", "c", "d"})
    assert assessed.preferred_share == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        (None, False),
        ({}, True),
        ({"matchLabels": {"app": "web"}}, True),
        ({"matchLabels": {"app": "db"}}, False),
        ({"matchExpressions": [builders.expr("app", "In", "web", "db")]}, True),
        ({"matchExpressions": [builders.expr("app", "NotIn", "web")]}, False),
        ({"matchExpressions": [builders.expr("tier", "DoesNotExist")]}, True),
        ({"matchExpressions": [builders.expr("tier", "Exists")]}, False),
    ],
)
def test_label_selector_matching(selector: dict[str, Any] | None, expected: bool) -> None:
    assert quality.matches(selector, {"app": "web"}) is expected


def test_requests_take_the_larger_of_app_containers_and_init_containers() -> None:
    pod = (
        builders.make_pod("p")
        .req(cpu="100m", memory="500Mi")
        .container("side", cpu="200m", memory="1Gi")
        .init("setup", cpu="1", memory="100Mi")
        .obj()
    )
    assert quality.requests(pod) == (1000, 500 * 2**20 + 2**30)


def test_a_mixed_workload_is_assessed_per_class() -> None:
    nodes = _nodes(2, zones=2)  # n0 in z0, n1 in z1
    prefer = builders.expr(ZONE, "In", "z0")
    kind = "bench.plumb.dev/class"

    def spread(name: str, node: str) -> dict[str, Any]:
        pod = _pod(name, node).label("app", "spread").label(kind, "zone-spread")
        return pod.spread(ZONE, 1, selector={"app": "spread"}).obj()

    def preferring(name: str, node: str) -> dict[str, Any]:
        pod = _pod(name, node).label(kind, "preferred-affinity")
        return pod.preferred_node_affinity(100, prefer).obj()

    pods = [
        _pod("plain-0", "n0").label(kind, "plain").obj(),
        _pod("plain-1", None).label(kind, "plain").obj(),
        spread("spread-0", "n0"),
        spread("spread-1", "n0"),
        spread("spread-2", "n1"),
        preferring("pref-0", "n0"),
        preferring("pref-1", "n1"),
        # An initial pod of the spread class: it counts in the skew, not as a measured pod.
        spread("init-0", "n0"),
    ]
    measured = {p["metadata"]["name"] for p in pods} - {"init-0"}
    assessed = quality.assess(nodes, pods, measured, class_label=kind)
    assert set(assessed.classes) == {"plain", "zone-spread", "preferred-affinity"}
    plain = assessed.classes["plain"]
    assert (plain.measured_pods, plain.placed, plain.max_skew, plain.preferred_share) == (
        2,
        1,
        None,
        None,
    )
    spread_class = assessed.classes["zone-spread"]
    # z0 holds 3 spread pods (init-0 included), z1 one: skew 2, over maxSkew 1.
    assert (spread_class.measured_pods, spread_class.placed, spread_class.max_skew) == (3, 3, 2)
    assert spread_class.preferred_share is None
    preferred = assessed.classes["preferred-affinity"]
    assert preferred.preferred_share == pytest.approx(0.5)
    assert preferred.max_skew is None
    # The whole-run figures are the same ones: only the spread class has a spread constraint.
    assert max(assessed.spread_skew.values()) == 2
    assert assessed.violations["spread"] == 1


def test_without_a_class_label_there_are_no_classes() -> None:
    pods = [_pod("a", "n0").label("bench.plumb.dev/class", "plain").obj()]
    assert quality.assess(_nodes(1), pods, {"a"}).classes == {}
