"""Each field of a scheduler profile changes the decision as kube-scheduler v1.34's profile would:
filters it disables, NodeResourcesFit's strategy and resources, BalancedAllocation's resources,
PodTopologySpread's defaulting, InterPodAffinity's hardPodAffinityWeight and NodeAffinity's
addedAffinity, on small hand-made clusters."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import pytest

from plumb.backend.cache import clustercache as cache_module
from plumb.backend.cache import controllers
from plumb.backend.records import objects, specs
from plumb.framework import compiling, cycle, emulation, scoring
from plumb.framework.plugins import nodeaffinity
from plumb.kernel import compiled, contract, reference
from plumb_dev.testing.builders import ZONE_LABEL, NodeBuilder, PodBuilder, make_node, make_pod
from tests.support.small_clusters import cluster, pod

Kernel = contract.Kernel
KERNELS = pytest.mark.parametrize("kernel", [reference.run, compiled.run], ids=["ref", "numba"])
HOSTNAME = "kubernetes.io/hostname"


def _decide(
    c: cache_module.Cache,
    builders: Sequence[PodBuilder],
    profile: scoring.Profile = scoring.DEFAULT,
    kernel: Kernel = reference.run,
) -> list[cycle.Decision]:
    pods = [pod(builder, f"uid-{i}") for i, builder in enumerate(builders)]
    prepared = cycle.prepare(pods, c.snapshot(), c, profile)
    decisions = list(prepared.early)
    if prepared.compiled is not None:
        compiled_batch = prepared.compiled
        result = kernel(compiled_batch.cluster, compiled_batch.batch)
        decisions.extend(cycle.explain(compiled_batch, result))
    return decisions


def _compile(
    c: cache_module.Cache, builders: Sequence[PodBuilder], profile: scoring.Profile
) -> compiling.Compiled:
    pods = [pod(builder, f"uid-{i}") for i, builder in enumerate(builders)]
    return compiling.compile_batch(pods, c.snapshot(), c, profile=profile)


def _without(*names: str) -> frozenset[str]:
    return frozenset(scoring.FILTERS) - set(names)


def _only(plugin: int) -> tuple[int, ...]:
    return tuple(1 if p == plugin else 0 for p in range(len(contract.SCORE_PLUGINS)))


def _web() -> PodBuilder:
    return make_pod("web").label("app", "web").req(cpu="500m", memory="512Mi")


# The default profile ------------------------------------------------------------------------


def test_the_default_profile_compiles_kube_schedulers_default_resource_arguments() -> None:
    c = cluster([make_node("n1"), make_node("n2")])
    built = _compile(c, [_web()], scoring.DEFAULT)
    expected = contract.default_resources(built.cluster.cpu_column, built.cluster.memory_column)
    for name, value in expected.items():
        np.testing.assert_array_equal(getattr(built.batch, name), value, name)
    assert built.resources == (objects.CPU, objects.MEMORY, objects.PODS)


# Filters the profile disables -----------------------------------------------------------------


@KERNELS
@pytest.mark.parametrize(
    ("plugin", "roomy"),
    [
        ("NodeUnschedulable", make_node("n1").capacity(cpu="64").unschedulable()),
        ("TaintToleration", make_node("n1").capacity(cpu="64").taint("dedicated", "gpu")),
        ("NodeAffinity", make_node("n1").capacity(cpu="64").zone("a")),
    ],
)
def test_a_static_filter_left_out_is_not_run(
    kernel: Kernel, plugin: str, roomy: NodeBuilder
) -> None:
    # n1 is the roomier node (LeastAllocated prefers it) but fails the one filter; n2 passes.
    c = cluster([roomy, make_node("n2").zone("b")])
    web = _web().node_selector(ZONE_LABEL, "b") if plugin == "NodeAffinity" else _web()
    assert _decide(c, [web], kernel=kernel)[0].node == "n2"
    profile = scoring.Profile(filters=_without(plugin))
    assert _decide(c, [web], profile, kernel)[0].node == "n1"


@KERNELS
def test_node_ports_left_out_lets_a_pod_share_a_host_port(kernel: Kernel) -> None:
    holder = make_pod("holder").node("n1").host_port(8080)
    c = cluster([make_node("n1").capacity(cpu="64"), make_node("n2")], bound=[holder])
    web = _web().host_port(8080)
    assert _decide(c, [web], kernel=kernel)[0].node == "n2"
    assert _decide(c, [web], scoring.Profile(filters=_without("NodePorts")), kernel)[0].node == "n1"


@KERNELS
def test_node_resources_fit_left_out_places_a_pod_too_big_for_every_node(kernel: Kernel) -> None:
    c = cluster([make_node("n1"), make_node("n2")])  # 4 cpus each
    big = [make_pod("big").req(cpu="6"), make_pod("next").req(cpu="6")]
    blocked = _decide(c, big, kernel=kernel)
    assert [d.node for d in blocked] == [None, None]
    assert "Insufficient cpu" in blocked[0].message
    # LeastAllocated alone: from v1.36 BalancedAllocation's change in balance would favour
    # the node already over on cpu (the second pod leaves its balance as it is).
    profile = scoring.Profile(filters=_without("NodeResourcesFit"), weights=_only(contract.FIT))
    built = _compile(c, big, profile)
    assert built.batch.fit_filter is False
    placed = _decide(c, big, profile, kernel)
    # Placed, and the first placement's requests count: LeastAllocated sends the second pod
    # to the other node (both over capacity score 0 for cpu; memory tells them apart).
    assert {d.node for d in placed} == {"n1", "n2"}


@KERNELS
def test_pod_topology_spread_left_out_as_a_filter_keeps_scoring_the_soft_constraints(
    kernel: Kernel,
) -> None:
    siblings = [make_pod(f"old-{i}").label("app", "web").node("a1") for i in range(2)]
    nodes = [make_node("a1").zone("a").capacity(cpu="64"), make_node("b1").zone("b")]
    c = cluster(nodes, bound=siblings)
    hard = _web().spread(ZONE_LABEL, 1, selector={"app": "web"})
    assert _decide(c, [hard], kernel=kernel)[0].node == "b1"
    profile = scoring.Profile(filters=_without("PodTopologySpread"))
    assert not _compile(c, [hard], profile).batch.spread_pod.size  # the hard one is dropped
    assert _decide(c, [hard], profile, kernel)[0].node == "a1"  # the roomier node
    # A soft constraint is still scored without the filter: it keeps the pod off zone a.
    soft = _web().spread(ZONE_LABEL, 1, when="ScheduleAnyway", selector={"app": "web"})
    only_spread = scoring.Profile(filters=profile.filters, weights=_only(contract.SPREAD))
    assert _decide(c, [soft], only_spread, kernel)[0].node == "b1"


@KERNELS
def test_inter_pod_affinity_left_out_as_a_filter_drops_required_terms_both_ways(
    kernel: Kernel,
) -> None:
    db = make_pod("db").label("app", "db").node("n1")
    guard = (
        make_pod("guard")
        .label("app", "guard")
        .node("n3")
        .affinity(HOSTNAME, {"app": "web"}, anti=True)
    )
    nodes = [
        make_node("n1").capacity(cpu="64"),
        make_node("n2"),
        make_node("n3").capacity(cpu="64"),
    ]
    c = cluster(nodes, bound=[db, guard])
    web = _web().affinity(HOSTNAME, {"app": "db"}, anti=True)
    assert _decide(c, [web], kernel=kernel)[0].node == "n2"
    profile = scoring.Profile(filters=_without("InterPodAffinity"))
    built = _compile(c, [web], profile)
    assert not built.batch.affinity_pod.size
    assert not built.batch.symmetric_pod.size
    assert _decide(c, [web], profile, kernel)[0].node in {"n1", "n3"}


# NodeResourcesFit's strategy and resources ----------------------------------------------------


def _cpu_busy_memory_busy() -> cache_module.Cache:
    # n1: 3 of 4 cpus taken, memory free; n2: cpu free, 24 of 32Gi taken.
    cpu_hog = make_pod("cpu-hog").node("n1").req(cpu="3")
    memory_hog = make_pod("memory-hog").node("n2").req(cpu="100m", memory="24Gi")
    return cluster([make_node("n1"), make_node("n2")], bound=[cpu_hog, memory_hog])


@KERNELS
def test_most_allocated_follows_the_resources_it_weighs(kernel: Kernel) -> None:
    c = _cpu_busy_memory_busy()
    web = _web()
    base = scoring.Profile(strategy=scoring.MOST_ALLOCATED, weights=_only(contract.FIT))
    on_cpu = dataclasses.replace(base, fit_resources=(("cpu", 1),))
    on_memory = dataclasses.replace(base, fit_resources=(("memory", 1),))
    assert _decide(c, [web], on_cpu, kernel)[0].node == "n1"
    assert _decide(c, [web], on_memory, kernel)[0].node == "n2"
    # Weighed 1 : 3, memory wins: n1 (3500m of 4000m: 87; 512Mi and the cpu hog's non-zero
    # 200Mi of 32Gi: 2) scores (87 + 6) // 4 = 23, n2 (600m: 15; 24.5Gi: 76)
    # (15 + 228) // 4 = 60.
    mixed = dataclasses.replace(base, fit_resources=(("cpu", 1), ("memory", 3)))
    (decision,) = _decide(c, [web], mixed, kernel)
    fit = {cand.node: cand.scores[contract.FIT] for cand in decision.candidates}
    assert fit == {"n1": 23, "n2": 60}


@KERNELS
def test_requested_to_capacity_ratio_scores_by_its_shape(kernel: Kernel) -> None:
    # n1: 1 of 4 cpus taken; with the pod's 1 cpu, 50% utilisation. n2: empty, 25%.
    c = cluster([make_node("n1"), make_node("n2")], bound=[make_pod("x").node("n1").req(cpu="1")])
    web = make_pod("web").req(cpu="1", memory="512Mi")
    shape = ((0, 0), (30, 8), (100, 10))
    profile = scoring.Profile(
        strategy=scoring.REQUESTED_TO_CAPACITY_RATIO,
        fit_resources=(("cpu", 1),),
        fit_shape=shape,
        weights=_only(contract.FIT),
    )
    built = _compile(c, [web], profile)
    assert built.batch.fit_shape_score.tolist() == [0, 80, 100]  # scores x 10
    (decision,) = _decide(c, [web], profile, kernel)
    fit = {cand.node: cand.scores[contract.FIT] for cand in decision.candidates}
    # 50%: 80 + (100 - 80) * (50 - 30) // (100 - 30) = 80 + 400 // 70 = 85;
    # 25%: 0 + 80 * 25 // 30 = 66.
    assert fit == {"n1": 85, "n2": 66}
    assert decision.node == "n1"
    # The opposite shape spreads.
    spread = dataclasses.replace(profile, fit_shape=((0, 10), (100, 0)))
    assert _decide(c, [web], spread, kernel)[0].node == "n2"


@KERNELS
def test_an_extended_resource_counts_only_for_pods_requesting_it(kernel: Kernel) -> None:
    gpu = "example.com/gpu"
    nodes = [make_node("n1").capacity(**{gpu: 4}), make_node("n2").capacity(**{gpu: 4})]
    holder = make_pod("holder").node("n2").req(cpu="100m", **{gpu: 2})
    c = cluster(nodes, bound=[holder])
    profile = scoring.Profile(
        strategy=scoring.MOST_ALLOCATED,
        fit_resources=(("cpu", 1), (gpu, 5)),
        weights=_only(contract.FIT),
    )
    built = _compile(c, [_web()], profile)
    assert gpu in built.resources  # a column for the profile's resource
    assert built.batch.fit_optional.tolist() == [False, True]
    # Without a gpu request only cpu counts: n1 (500m: 12) and n2 (600m: 15).
    (plain,) = _decide(c, [_web()], profile, kernel)
    assert {cand.node: cand.scores[contract.FIT] for cand in plain.candidates} == {
        "n1": 12,
        "n2": 15,
    }
    # With one: n1 (12 + 5 * 25) // 6 = 22, n2 (15 + 5 * 75) // 6 = 65.
    (gpu_pod,) = _decide(c, [_web().req(cpu="500m", memory="512Mi", **{gpu: 1})], profile, kernel)
    assert {cand.node: cand.scores[contract.FIT] for cand in gpu_pod.candidates} == {
        "n1": 22,
        "n2": 65,
    }


@KERNELS
def test_balanced_allocation_reads_its_own_resources(kernel: Kernel) -> None:
    c = _cpu_busy_memory_busy()
    only = scoring.Profile(weights=_only(contract.BALANCED))
    (both,) = _decide(c, [_web()], only, kernel)
    balanced = {cand.node: cand.scores[contract.BALANCED] for cand in both.candidates}
    assert balanced["n1"] < 100
    assert balanced["n2"] < 100
    # One resource: no deviation, 100 everywhere up to v1.35; from v1.36 (the default) no
    # change either, with the pod or without: 50 + (50 + 100 - 100) / 2 = 75.
    cpu_only = dataclasses.replace(only, balanced_resources=(("cpu", 1),))
    (one,) = _decide(c, [_web()], cpu_only, kernel)
    assert {cand.scores[contract.BALANCED] for cand in one.candidates} == {75}
    v134 = dataclasses.replace(cpu_only, kube=emulation.emulate(34))
    (one,) = _decide(c, [_web()], v134, kernel)
    assert {cand.scores[contract.BALANCED] for cand in one.candidates} == {100}
    # A pod requesting none of them is skipped (score 0), as PreScore's best-effort rule.
    memory_pod = make_pod("mem").req(memory="1Gi")
    assert _compile(c, [memory_pod], cpu_only).batch.balanced_skip.tolist() == [True]
    assert _compile(c, [memory_pod], only).batch.balanced_skip.tolist() == [False]


# PodTopologySpread's defaulting ------------------------------------------------------------


def _service_cluster() -> cache_module.Cache:
    siblings = [make_pod(f"old-{i}", "shop").label("app", "web").node("a1") for i in range(2)]
    nodes = [
        make_node("a1").zone("a").capacity(cpu="64"),
        make_node("b1").zone("b"),
        make_node("x1").capacity(cpu="64"),  # no zone label
    ]
    c = cluster(nodes, bound=siblings)
    service = {
        "metadata": {"namespace": "shop", "name": "web"},
        "spec": {"selector": {"app": "web"}},
    }
    c.workloads.on_event(controllers.SERVICE, "ADDED", service)
    return c


def _shop_web() -> PodBuilder:
    return make_pod("new", "shop").label("app", "web").req(cpu="100m")


@KERNELS
def test_listed_default_constraints_apply_with_the_workloads_selector(kernel: Kernel) -> None:
    c = _service_cluster()
    listed = scoring.Profile(
        spread_defaulting="List",
        spread_defaults=(specs.SpreadConstraint(1, ZONE_LABEL, "DoNotSchedule", None),),
    )
    built = _compile(c, [_shop_web()], listed)
    assert built.batch.spread_hard.tolist() == [True]
    assert built.batch.spread_self.tolist() == [True]  # the Service's selector matches the pod
    (decision,) = _decide(c, [_shop_web()], listed, kernel)
    # a1 would make zone a 3 against b's 0; x1 lacks the zone label.
    assert decision.node == "b1"
    assert decision.feasible == 1
    # Without a Service or workload selecting the pod, no default constraint applies.
    alone = make_pod("other", "shop").label("app", "other").req(cpu="100m")
    assert not _compile(c, [alone], listed).batch.spread_pod.size
    # An empty list: no defaults at all.
    empty = scoring.Profile(spread_defaulting="List")
    assert not _compile(c, [_shop_web()], empty).batch.spread_pod.size


def test_only_the_system_defaults_score_nodes_missing_a_key() -> None:
    c = _service_cluster()
    system = _compile(c, [_shop_web()], scoring.DEFAULT)
    assert system.batch.spread_require_all.tolist() == [False]
    assert system.batch.spread_max_skew.tolist() == [3, 5]
    soft = specs.SpreadConstraint(1, ZONE_LABEL, "ScheduleAnyway", None)
    listed = scoring.Profile(spread_defaulting="List", spread_defaults=(soft,))
    built = _compile(c, [_shop_web()], listed)
    assert built.batch.spread_require_all.tolist() == [True]
    assert built.batch.spread_max_skew.tolist() == [1]


# InterPodAffinity's hardPodAffinityWeight -------------------------------------------------------


def test_hard_pod_affinity_weight_weighs_existing_pods_required_affinity() -> None:
    lover = make_pod("lover").label("app", "lover").node("n1").affinity(HOSTNAME, {"app": "web"})
    c = cluster([make_node("n1"), make_node("n2")], bound=[lover])
    weights = {
        weight: _compile(
            c, [_web()], scoring.Profile(hard_pod_affinity_weight=weight)
        ).batch.preferred_weight.tolist()
        for weight in (0, 1, 7)
    }
    assert weights == {0: [], 1: [1], 7: [7]}


# NodeAffinity's addedAffinity ---------------------------------------------------------------


def _zone_term(zone: str) -> specs.NodeSelectorTerm:
    return specs.NodeSelectorTerm(expressions=(specs.Requirement(ZONE_LABEL, "In", (zone,)),))


@KERNELS
def test_added_required_affinity_is_enforced_with_its_own_reason(kernel: Kernel) -> None:
    nodes = [make_node("a1").zone("a").capacity(cpu="64"), make_node("b1").zone("b")]
    c = cluster(nodes)
    enforced = scoring.Profile(added_required=(_zone_term("b"),))
    assert _decide(c, [_web()], kernel=kernel)[0].node == "a1"
    assert _decide(c, [_web()], enforced, kernel)[0].node == "b1"
    # A pod whose own selector wants zone a fits nowhere: a1 fails the enforced terms first.
    (decision,) = _decide(c, [_web().node_selector(ZONE_LABEL, "a")], enforced, kernel)
    assert decision.node is None
    assert decision.reasons == {nodeaffinity.ENFORCED: 1, nodeaffinity.MISMATCH: 1}
    # Disabled as a filter, NodeAffinity checks neither.
    off = dataclasses.replace(enforced, filters=_without("NodeAffinity"))
    assert _decide(c, [_web()], off, kernel)[0].node == "a1"


@KERNELS
def test_added_preferred_affinity_adds_to_every_pods_node_affinity_score(kernel: Kernel) -> None:
    nodes = [make_node("a1").zone("a").capacity(cpu="64"), make_node("b1").zone("b")]
    c = cluster(nodes)
    preferring = scoring.Profile(added_preferred=((50, _zone_term("b")),))
    web = _web()
    built = _compile(c, [web], preferring)
    assert built.batch.node_affinity_raw.tolist() == [[0, 50]]
    (decision,) = _decide(c, [web], preferring, kernel)
    assert decision.node == "b1"
    scores = {cand.node: cand.scores[contract.NODE_AFFINITY] for cand in decision.candidates}
    assert scores == {"a1": 0, "b1": 100}


# Scores weighing 0 ----------------------------------------------------------------------------


def test_a_score_weighing_zero_compiles_nothing_for_itself() -> None:
    siblings = [make_pod(f"old-{i}").label("app", "web").node("n1") for i in range(2)]
    c = cluster([make_node("n1").zone("a"), make_node("n2").zone("b")], bound=siblings)
    web = (
        _web()
        .spread(ZONE_LABEL, 1, when="ScheduleAnyway", selector={"app": "web"})
        .preferred_affinity(10, ZONE_LABEL, {"app": "web"})
    )
    weighed = _compile(c, [web], scoring.DEFAULT).batch
    assert weighed.spread_pod.size == 1
    assert weighed.preferred_pod.size  # its own term (and the batch's carriers of it)
    weights = list(scoring.DEFAULT_WEIGHTS)
    weights[contract.SPREAD] = weights[contract.INTER_POD] = 0
    unweighed = _compile(c, [web], scoring.Profile(weights=tuple(weights)))
    assert unweighed.batch.spread_pod.size == 0
    assert unweighed.batch.preferred_pod.size == 0
    assert unweighed.row_keys == ()
