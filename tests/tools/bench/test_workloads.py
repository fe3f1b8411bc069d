"""The benchmark's declarative workloads and how they are chosen."""

from __future__ import annotations

import pytest

from plumb_dev.bench import draload, quality, workloads
from plumb_dev.testing import builders


def test_default_selection_leaves_the_large_workloads_out() -> None:
    chosen = [w.name for w in workloads.select(None, quick=False, large=False)]
    assert chosen == [
        "basic",
        "basic-traced",
        "drain",
        "zone-spread",
        "anti-affinity",
        "preferred-affinity",
        "dra",
        "gang",
    ]
    with_large = [w.name for w in workloads.select(None, quick=False, large=True)]
    assert with_large[-1] == "large"
    with_xlarge = [w.name for w in workloads.select(None, quick=False, large=False, xlarge=True)]
    assert with_xlarge == [*chosen, "xlarge"]
    everything = [w.name for w in workloads.select(None, quick=False, large=True, xlarge=True)]
    assert everything == workloads.names()


def test_quick_mode_runs_neither_large_workload_unless_asked() -> None:
    quick = workloads.select(None, quick=True, large=False)
    assert not any(w.large or w.xlarge for w in quick)
    assert "drain" in [w.name for w in quick]
    # Asked for by name, xlarge shrinks like the others: the way to try it at a small size.
    (small,) = workloads.select(["xlarge"], quick=True, large=False)
    assert (small.nodes, small.initial_pods, small.measured_pods) == (1500, 300, 1500)


def test_basic_traced_is_basic_with_tracing_on_at_10_percent() -> None:
    basic, traced = workloads.select(["basic-traced", "basic"], quick=False, large=False)
    assert (traced.name, traced.trace_ratio) == ("basic-traced", 0.1)
    assert basic.trace_ratio is None
    sizes = [(w.nodes, w.initial_pods, w.measured_pods, w.pod, w.node) for w in (basic, traced)]
    assert sizes[0] == sizes[1]
    quick_basic, quick_traced = workloads.select(["basic", "basic-traced"], quick=True, large=False)
    assert (quick_traced.nodes, quick_traced.measured_pods) == (
        quick_basic.nodes,
        quick_basic.measured_pods,
    )


def test_the_drain_is_basics_shape_as_a_backlog() -> None:
    basic, drain = workloads.select(["basic", "drain"], quick=False, large=False)
    assert drain.drain
    assert not basic.drain
    assert (drain.nodes, drain.initial_pods, drain.measured_pods) == (500, 500, 2000)
    assert drain.pod is basic.pod
    assert not drain.mix


def test_xlarge_is_15000_nodes_and_a_mix_taking_turns() -> None:
    (xlarge,) = workloads.select(["xlarge"], quick=False, large=False, xlarge=True)
    assert (xlarge.nodes, xlarge.initial_pods, xlarge.measured_pods) == (15000, 3000, 30000)
    classes = [xlarge.class_of(i) for i in range(6)]
    assert classes == ["plain", "zone-spread", "preferred-affinity"] * 2
    pods = [
        xlarge.shape(i)(builders.make_pod(f"p{i}", "ns").label(workloads.APP_LABEL, "xlarge")).obj()
        for i in range(3)
    ]
    labels = [pod["metadata"]["labels"] for pod in pods]
    assert [lab[workloads.CLASS_LABEL] for lab in labels] == classes[:3]
    plain, spread, preferring = (pod["spec"] for pod in pods)
    assert "topologySpreadConstraints" not in plain
    assert "affinity" not in plain
    # The spread class counts only its own pods: its own app label is its selector.
    (constraint,) = spread["topologySpreadConstraints"]
    assert constraint["labelSelector"]["matchLabels"] == {
        workloads.APP_LABEL: labels[1][workloads.APP_LABEL]
    }
    assert labels[1][workloads.APP_LABEL] != "xlarge"
    assert (constraint["maxSkew"], constraint["whenUnsatisfiable"]) == (1, "DoNotSchedule")
    assert (
        "preferredDuringSchedulingIgnoredDuringExecution" in preferring["affinity"]["nodeAffinity"]
    )
    assert workloads.select(["basic"], quick=False, large=False)[0].class_of(0) is None


@pytest.mark.parametrize("quick", [False, True])
def test_the_ceilings_round_robin_keeps_the_xlarge_spread_class_even(quick: bool) -> None:
    (xlarge,) = workloads.select(["xlarge"], quick=quick, large=False, xlarge=True)
    total = xlarge.initial_pods + xlarge.measured_pods
    spread_zones = [
        workloads.zone_of(xlarge.ceiling_node(i))
        for i in range(total)
        if xlarge.class_of(i) == "zone-spread"
    ]
    counts = {zone: spread_zones.count(zone) for zone in set(spread_zones)}
    assert len(counts) == workloads.ZONE_COUNT
    assert max(counts.values()) == min(counts.values())
    # And the initial pods alone, the cluster each scheduler starts from, are even too.
    initial = [
        workloads.zone_of(xlarge.ceiling_node(i))
        for i in range(xlarge.initial_pods)
        if xlarge.class_of(i) == "zone-spread"
    ]
    assert len({initial.count(zone) for zone in set(initial)}) == 1


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


def test_the_raw_binders_xlarge_placement_breaks_no_constraint() -> None:
    """The ceiling's node choice for the shrunk xlarge mix, assessed as a run is: nothing
    violated, the spread class even, every class reported on its own."""
    (xlarge,) = workloads.select(["xlarge"], quick=True, large=False, xlarge=True)
    names = [f"n{i:05d}" for i in range(xlarge.nodes)]
    nodes = [xlarge.node(builders.make_node(name), i).obj() for i, name in enumerate(names)]
    pods = [
        xlarge.shape(i)(builders.make_pod(f"p{i}", "ns").label(workloads.APP_LABEL, "xlarge"))
        .node(names[xlarge.ceiling_node(i)])
        .obj()
        for i in range(xlarge.initial_pods + xlarge.measured_pods)
    ]
    measured = {f"p{i}" for i in range(xlarge.initial_pods, len(pods))}
    assessed = quality.assess(nodes, pods, measured, class_label=workloads.CLASS_LABEL)
    assert assessed.total_violations == 0
    assert assessed.placed == xlarge.measured_pods
    assert set(assessed.classes) == {name for name, _ in workloads.MIX}
    assert assessed.classes["zone-spread"].max_skew == 0
    assert assessed.classes["plain"].measured_pods == xlarge.measured_pods // 3
    # Round-robin ignores the preference: a fifth of the preferring pods land in zone-0.
    assert assessed.classes["preferred-affinity"].preferred_share == pytest.approx(0.2)


def test_dra_is_500_nodes_of_8_devices_and_pods_claiming_one_each() -> None:
    (dra,) = workloads.select(["dra"], quick=False, large=False)
    assert (dra.nodes, dra.initial_pods, dra.measured_pods) == (500, 500, 2000)
    assert dra.dra
    assert not dra.drain
    assert len(draload.DEVICES) == 8
    # 2,500 pods of 3,000 matching devices: the cluster ends 5/6 full, never short.
    assert dra.initial_pods + dra.measured_pods <= draload.capacity(dra.nodes) == 3000
    (quick,) = workloads.select(["dra"], quick=True, large=False)
    assert (quick.nodes, quick.initial_pods, quick.measured_pods) == (200, 100, 300)
    assert not workloads.select(["basic"], quick=False, large=False)[0].dra


def test_gang_is_300_groups_of_8_on_1000_nodes_and_only_its_pods_are_members() -> None:
    (gang,) = workloads.select(["gang"], quick=False, large=False)
    assert (gang.nodes, gang.initial_pods, gang.measured_pods, gang.gang) == (1000, 1000, 2400, 8)
    assert gang.measured_pods // gang.gang == 300
    (quick,) = workloads.select(["gang"], quick=True, large=False)
    assert (quick.nodes, quick.initial_pods, quick.measured_pods) == (200, 100, 240)
    assert not workloads.select(["basic"], quick=False, large=False)[0].gang
    with pytest.raises(ValueError, match="12 measured pods do not make whole groups of 8"):
        workloads.Workload(
            name="x", description="", nodes=10, initial_pods=0, measured_pods=12, gang=8
        )


def test_a_dra_workload_with_more_pods_than_devices_is_refused() -> None:
    with pytest.raises(
        ValueError, match="601 measured pods need a device each; 100 nodes have 600"
    ):
        workloads.Workload(
            name="x", description="", nodes=100, initial_pods=0, measured_pods=601, dra=True
        )
    with pytest.raises(ValueError, match="2 nodes have 12"):
        workloads.Workload(
            name="x",
            description="",
            nodes=100,
            initial_pods=0,
            measured_pods=10,
            dra=True,
            quick=(2, 2, 11),
        )
    with pytest.raises(ValueError, match="dra and drain do not go together"):
        workloads.Workload(
            name="x",
            description="",
            nodes=100,
            initial_pods=0,
            measured_pods=1,
            dra=True,
            drain=True,
        )
