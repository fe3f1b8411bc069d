"""The benchmark's declarative workloads and how they are chosen."""

from __future__ import annotations

import pytest

from plumb.bench import workloads


def test_default_selection_leaves_the_large_workload_out() -> None:
    chosen = [w.name for w in workloads.select(None, quick=False, large=False)]
    assert chosen == ["basic", "zone-spread", "anti-affinity", "preferred-affinity"]
    with_large = [w.name for w in workloads.select(None, quick=False, large=True)]
    assert with_large[-1] == "large"


def test_basic_is_scheduler_perfs_shape() -> None:
    (basic,) = workloads.select(["basic"], quick=False, large=False)
    assert (basic.nodes, basic.initial_pods, basic.measured_pods) == (500, 500, 2000)


def test_quick_mode_shrinks_every_workload() -> None:
    full = {w.name: w for w in workloads.select(None, quick=False, large=True)}
    for quick in workloads.select(None, quick=True, large=True):
        assert quick.measured_pods < full[quick.name].measured_pods
        assert quick.nodes <= full[quick.name].nodes


def test_unknown_workloads_are_named() -> None:
    with pytest.raises(ValueError, match=r"'nope'.*choose from basic"):
        workloads.select(["basic", "nope"], quick=False, large=False)


@pytest.mark.parametrize("quick", [False, True])
def test_anti_affinity_has_a_free_host_for_every_pod(quick: bool) -> None:
    (anti,) = workloads.select(["anti-affinity"], quick=quick, large=False)
    assert anti.initial_pods + anti.measured_pods <= anti.nodes


def test_ceiling_round_robin_keeps_zones_even() -> None:
    (spread,) = workloads.select(["zone-spread"], quick=True, large=False)
    zones = [
        workloads.zone_of(spread.ceiling_node(i))
        for i in range(spread.initial_pods + spread.measured_pods)
    ]
    counts = {zone: zones.count(zone) for zone in set(zones)}
    assert len(counts) == workloads.ZONE_COUNT
    assert max(counts.values()) - min(counts.values()) <= 1


def test_a_workload_needs_nodes_and_measured_pods() -> None:
    with pytest.raises(ValueError, match="nodes=0"):
        workloads.Workload(name="x", description="", nodes=0, initial_pods=0, measured_pods=1)
