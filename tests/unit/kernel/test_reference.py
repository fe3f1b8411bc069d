"""Hand-checked examples of every filter, score and the tie-break, run against the reference
(which defines them) and the compiled kernel (which must agree); and where the reference departs
from kube-scheduler v1.34."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from plumb.kernel import compiled, reference
from plumb.kernel import contract as c
from tests.support.kernel_builders import CPU, GI, GPU, MEMORY, PODS, KernelCase, failure_case, only

Kernel = c.Kernel
KERNELS = pytest.mark.parametrize("kernel", [reference.run, compiled.run], ids=["ref", "numba"])

U64 = 2**64


def splitmix(node_hash: int, pod_hash: int) -> int:
    """splitmix64's finaliser in plain Python integers."""
    z = node_hash ^ pod_hash
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) % U64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) % U64
    return z ^ (z >> 31)


@given(st.lists(st.integers(0, U64 - 1), min_size=1, max_size=5), st.integers(0, U64 - 1))
def test_mix_is_splitmix64_of_node_and_pod_hashes(node_hashes: list[int], pod_hash: int) -> None:
    mixed = reference.mix(np.array(node_hashes, dtype=np.uint64), np.uint64(pod_hash))
    assert mixed.dtype == np.uint64
    assert mixed.tolist() == [splitmix(h, pod_hash) for h in node_hashes]


@KERNELS
def test_a_batch_pod_that_fits_nowhere_places_nothing(kernel: Kernel) -> None:
    # Two 3-cpu pods for one 4-cpu node: the second sees the first's requests.
    case = KernelCase(1).pod(cpu=3000).pod(cpu=3000, pod_hash=8)
    result = kernel(*case.build())
    assert result.chosen.tolist() == [0, -1]
    assert result.code[1].tolist() == [c.RESOURCES]
    assert result.feasible.tolist() == [1, 0]


# Filters by hand ------------------------------------------------------------------------------


@KERNELS
def test_each_filter_rejects_with_its_code(kernel: Kernel) -> None:
    result = kernel(*failure_case().build())
    assert result.code[0].tolist() == [
        c.PASS,
        c.STATIC,
        c.RESOURCES,
        c.SPREAD_LABEL,
        c.SPREAD_SKEW,
        c.AFFINITY,
        c.ANTI_AFFINITY,
        c.EXISTING_ANTI_AFFINITY,
    ]
    assert result.feasible.tolist() == [1]
    assert result.chosen.tolist() == [0]
    assert result.top[0].tolist() == [0, -1, -1]
    assert result.total[0, 1:].tolist() == [0] * 7
    # Why nodes failed, in detail, only for a pod that fits nowhere (its FailedScheduling
    # message): none for this one.
    assert result.detail[0].tolist() == [0] * 8


@KERNELS
def test_a_pod_that_fits_nowhere_gets_the_details(kernel: Kernel) -> None:
    # The failure case with node 0 cordoned (static reason 1): no node fits.
    result = kernel(*failure_case().static([1, 4, 0, 0, 0, 0, 0, 0]).build())
    assert result.chosen.tolist() == [-1]
    assert result.code[0, :3].tolist() == [c.STATIC, c.STATIC, c.RESOURCES]
    # The static reason code as given; one bit per resource column that does not fit; 0 for a
    # node that failed a later filter.
    assert result.detail[0].tolist() == [1, 4, (1 << CPU) | (1 << PODS), 0, 0, 0, 0, 0]


@KERNELS
def test_the_first_failing_filter_is_the_one_reported(kernel: Kernel) -> None:
    # Node 0 fails resources (gpu) and anti-affinity; node 1 fails the static filters as well.
    case = (
        KernelCase(2)
        .key("host", [0, 1])
        .row("batch", [1, 1])
        .pod(gpu=1)
        .static([0, 2])
        .affinity("batch", "host", anti=True)
    )
    result = kernel(*case.build())
    assert result.code[0].tolist() == [c.RESOURCES, c.STATIC]
    assert result.detail[0].tolist() == [1 << GPU, 2]
    assert result.chosen.tolist() == [-1]
    assert result.top[0].tolist() == [-1, -1, -1]


@KERNELS
def test_a_static_reason_checked_last_is_reported_only_where_nothing_else_fails(
    kernel: Kernel,
) -> None:
    # The failure case's nodes, each failing one filter, now also fail a static reason checked
    # after every other filter (NodeDeclaredFeatures: code -3), all but node 1, which fails the
    # static reason 4 checked first. Each node reports the filter it failed before; node 0,
    # which failed nothing else, reports reason 3.
    result = kernel(*failure_case().static([-3, 4, -3, -3, -3, -3, -3, -3]).build())
    assert result.chosen.tolist() == [-1]
    assert result.code[0].tolist() == [
        c.STATIC,
        c.STATIC,
        c.RESOURCES,
        c.SPREAD_LABEL,
        c.SPREAD_SKEW,
        c.AFFINITY,
        c.ANTI_AFFINITY,
        c.EXISTING_ANTI_AFFINITY,
    ]
    assert result.detail[0].tolist() == [3, 4, (1 << CPU) | (1 << PODS), 0, 0, 0, 0, 0]


@KERNELS
def test_a_pod_without_dynamic_constraints_fails_the_reason_checked_last(kernel: Kernel) -> None:
    # No spread or affinity: the kernel takes its path without the dynamic filters.
    case = KernelCase(3).allocatable(CPU, [4000, 500, 4000]).pod(cpu=1000).static([-2, -2, 0])
    result = kernel(*case.build())
    assert result.code[0].tolist() == [c.STATIC, c.RESOURCES, c.PASS]
    assert result.chosen.tolist() == [2]
    failing = kernel(*case.static([-2, -2, -2]).build())
    assert failing.code[0].tolist() == [c.STATIC, c.RESOURCES, c.STATIC]
    assert failing.detail[0].tolist() == [2, 1 << CPU, 2]


@KERNELS
def test_spread_min_domains_holds_the_minimum_at_zero(kernel: Kernel) -> None:
    # Two zones with 3 matching pods each: skew 3 + 1 - 3 = 1 passes maxSkew 1, unless fewer
    # zones than minDomains exist, when the global minimum counts as 0 and 3 + 1 - 0 > 1.
    def codes(min_domains: int) -> list[int]:
        case = (
            KernelCase(2)
            .key("zone", [0, 1])
            .row("web", [3, 3])
            .pod(cpu=100)
            .spread("web", "zone", min_domains=min_domains)
        )
        return list(kernel(*case.build()).code[0].tolist())

    assert codes(2) == [c.PASS, c.PASS]
    assert codes(3) == [c.SPREAD_SKEW, c.SPREAD_SKEW]


@KERNELS
def test_spread_counts_only_eligible_nodes(kernel: Kernel) -> None:
    # Zone 0's only node is not eligible (nodeAffinityPolicy/nodeTaintsPolicy): the zones
    # present are 1 and 2 with 2 pods each, so the minimum is 2 and every node passes.
    def codes(eligible: list[bool]) -> list[int]:
        case = (
            KernelCase(3)
            .key("zone", [0, 1, 2])
            .row("web", [0, 2, 2])
            .pod(cpu=100)
            .spread("web", "zone", eligible=eligible)
        )
        return list(kernel(*case.build()).code[0].tolist())

    assert codes([False, True, True]) == [c.PASS, c.PASS, c.PASS]
    assert codes([True, True, True]) == [c.PASS, c.SPREAD_SKEW, c.SPREAD_SKEW]


@KERNELS
def test_affinity_lets_the_first_pod_of_a_group_in(kernel: Kernel) -> None:
    def codes(web: list[int], matches_itself: bool) -> list[int]:
        case = KernelCase(3).key("zone", [0, 1, -1]).row("web", web).pod(cpu=100)
        case = case.affinity("web", "zone")
        if matches_itself:
            case = case.matches_own_affinity()
        return list(kernel(*case.build()).code[0].tolist())

    # A matching pod in zone 0: only zone 0 will do.
    assert codes([1, 0, 0], True) == [c.PASS, c.AFFINITY, c.AFFINITY]
    # No matching pod anywhere: a pod matching its own terms may go to any node with the key.
    assert codes([0, 0, 0], True) == [c.PASS, c.PASS, c.AFFINITY]
    assert codes([0, 0, 0], False) == [c.AFFINITY, c.AFFINITY, c.AFFINITY]
    # A match on a node without the key is no match (kube counts topology pairs).
    assert codes([0, 0, 1], True) == [c.PASS, c.PASS, c.AFFINITY]


@KERNELS
def test_anti_affinity_both_ways(kernel: Kernel) -> None:
    # Our pod's anti-affinity to web pods per zone; a node without the key is never in conflict.
    case = KernelCase(3).key("zone", [0, 0, -1]).row("web", [1, 0, 0]).pod(cpu=100)
    result = kernel(*case.affinity("web", "zone", anti=True).build())
    assert result.code[0].tolist() == [c.ANTI_AFFINITY, c.ANTI_AFFINITY, c.PASS]
    # A guard pod's anti-affinity matches our pod: its zone is closed to us (symmetry).
    case = KernelCase(3).key("zone", [0, 0, 1]).row("guard", [0, 1, 0]).pod(cpu=100)
    result = kernel(*case.symmetric("guard", "zone").build())
    assert result.code[0].tolist() == [c.EXISTING_ANTI_AFFINITY] * 2 + [c.PASS]


@KERNELS
def test_a_batch_sees_its_own_placements(kernel: Kernel) -> None:
    # Two replicas with hostname anti-affinity to each other, then a pod that needs 3.5 cpu.
    case = KernelCase(2).key("host", [0, 1]).row("web", [0, 0])
    for pod_hash in (7, 8):
        case = case.pod(cpu=1000, pod_hash=pod_hash).member("web")
        case = case.affinity("web", "host", anti=True)
    result = kernel(*case.pod(cpu=3500).build())
    first, second, third = result.chosen.tolist()
    assert {first, second} == {0, 1}
    assert result.code[1, first] == c.ANTI_AFFINITY
    assert third == -1
    assert result.detail[2].tolist() == [1 << CPU, 1 << CPU]


# Scores by hand -------------------------------------------------------------------------------


@KERNELS
def test_least_allocated(kernel: Kernel) -> None:
    case = (
        KernelCase(3)
        .allocatable(MEMORY, [8 * GI, 3 * GI, 8 * GI])
        .requested(CPU, [1000, 0, 0])
        .requested(MEMORY, [2 * GI, 0, 0])
        .nonzero(CPU, [1000, 0, 3900])  # node 2: many request-less containers
        .weights(*only(c.FIT))
        .pod(cpu=1000, memory=2 * GI)
    )
    result = kernel(*case.build())
    # Node 0: cpu (4000-2000)*100//4000 = 50, memory (8-4)*100//8 = 50 -> 50.
    # Node 1: cpu (4000-1000)*100//4000 = 75, memory (3-2)*100//3 = 33 -> 108//2 = 54.
    # Node 2: cpu 3900+1000 > 4000 -> 0, memory (8-2)*100//8 = 75 -> 75//2 = 37.
    assert result.total[0].tolist() == [50, 54, 37]
    assert result.chosen.tolist() == [1]
    assert result.top[0].tolist() == [1, 0, 2]
    assert result.top_scores[0, :, c.FIT].tolist() == [54, 50, 37]


@KERNELS
def test_balanced_allocation(kernel: Kernel) -> None:
    case = (
        KernelCase(3)
        .requested(CPU, [1000, 1000, 5000])  # node 2 is over-committed on cpu
        .requested(MEMORY, [GI, 6 * GI, 0])
        .weights(*only(c.BALANCED))
        .pod(cpu=1000, memory=GI)
        .pod(memory=2 * GI)
        .pod()  # requests nothing: BalancedAllocation skips it
    )
    result = kernel(*case.build())
    # Pod 0. Node 0: cpu 2000/4000 = .5, memory 2/8 = .25 -> (1 - .125) * 100 = 87.
    # Node 1: memory 7/8 -> |.5 - .875| / 2 = .1875 -> 81. Node 2 lacks cpu.
    assert result.total[0].tolist() == [87, 81, 0]
    assert result.code[0, 2] == c.RESOURCES
    # Pod 1 (after pod 0 took node 0: 2000 cpu, 2Gi). Node 0: .5 and 4/8 -> 100.
    # Node 1: .25 and 8/8 -> 62. Node 2: cpu 5000/4000 caps at 1, memory .25 -> 62.
    assert result.total[1].tolist() == [100, 62, 62]
    assert result.total[2].tolist() == [0, 0, 0]


@KERNELS
def test_most_allocated(kernel: Kernel) -> None:
    case = (
        KernelCase(3)
        .allocatable(MEMORY, [8 * GI, 3 * GI, 8 * GI])
        .requested(CPU, [1000, 0, 0])
        .requested(MEMORY, [2 * GI, 0, 0])
        .nonzero(CPU, [1000, 0, 3900])  # node 2: many request-less containers
        .strategy(c.MOST_ALLOCATED)
        .weights(*only(c.FIT))
        .pod(cpu=1000, memory=2 * GI)
    )
    result = kernel(*case.build())
    # Node 0: cpu 2000*100//4000 = 50, memory 4*100//8 = 50 -> 50.
    # Node 1: cpu 1000*100//4000 = 25, memory 2*100//3 = 66 -> 91//2 = 45.
    # Node 2: cpu 3900+1000 capped at 4000 -> 100, memory 2*100//8 = 25 -> 125//2 = 62.
    assert result.total[0].tolist() == [50, 45, 62]
    assert result.top[0].tolist() == [2, 0, 1]
    assert result.top_scores[0, :, c.FIT].tolist() == [62, 50, 45]


@KERNELS
def test_most_allocated_leaves_out_a_resource_the_node_has_none_of(kernel: Kernel) -> None:
    case = (
        KernelCase(2)
        .allocatable(CPU, [0, 4000])
        .strategy(c.MOST_ALLOCATED)
        .weights(*only(c.FIT))
        .pod(memory=GI)  # no cpu request: 100m counted, and node 0 is not short of cpu
    )
    # Node 0: memory 1*100//8 = 12 alone. Node 1: cpu 100*100//4000 = 2 -> (2 + 12)//2 = 7.
    assert kernel(*case.build()).total[0].tolist() == [12, 7]


@KERNELS
def test_requested_to_capacity_ratio_follows_its_shape_and_rounds_as_go(kernel: Kernel) -> None:
    case = (
        KernelCase(3)
        .requested(CPU, [1000, 0, 3000])
        .requested(MEMORY, [0, 0, 6 * GI])
        .strategy(c.REQUESTED_TO_CAPACITY_RATIO)
        .fit_resources([CPU, MEMORY], [1, 2], shape=[(0, 0), (30, 80), (100, 100)])
        .weights(*only(c.FIT))
        .pod(cpu=1000, memory=GI)
    )
    result = kernel(*case.build())
    # Node 0: cpu 2000/4000 = 50% -> 80 + 20 * 20 // 70 = 85; memory 1/8 = 12% ->
    # 80 * 12 // 30 = 32; round((85 + 2 * 32) / 3 = 49.67) = 50.
    # Node 1: cpu 25% -> 80 * 25 // 30 = 66; memory 12% -> 32; round(130 / 3 = 43.33) = 43.
    # Node 2: cpu 100% -> 100; memory 7/8 = 87% -> 80 + 20 * 57 // 70 = 96;
    # round(292 / 3 = 97.33) = 97.
    assert result.total[0].tolist() == [50, 43, 97]


@KERNELS
def test_requested_to_capacity_ratio_counts_only_resources_scoring_above_zero(
    kernel: Kernel,
) -> None:
    case = (
        KernelCase(2)
        .requested(CPU, [3000, 0])
        .strategy(c.REQUESTED_TO_CAPACITY_RATIO)
        .fit_resources([CPU, MEMORY], [1, 1], shape=[(0, 0), (50, 0), (100, 100)])
        .weights(*only(c.FIT))
        .pod(cpu=500, memory=GI)
    )
    # Node 0: cpu 87% -> 0 + 100 * 37 // 50 = 74; memory 12% -> 0, left out: 74 / 1.
    # Node 1: cpu 12% -> 0 and memory 0: no resource counts, 0. A round half: none.
    assert kernel(*case.build()).total[0].tolist() == [74, 0]
    half = (
        KernelCase(1)
        .strategy(c.REQUESTED_TO_CAPACITY_RATIO)
        .fit_resources([CPU, MEMORY], [1, 1], shape=[(0, 0), (100, 100)])
        .weights(*only(c.FIT))
        .pod(cpu=1000, memory=GI)
    )
    # cpu 25, memory 12: 37 / 2 = 18.5 rounds away from zero to 19 (Go's math.Round).
    assert kernel(*half.build()).total[0].tolist() == [19]


@KERNELS
def test_an_optional_resource_the_pod_does_not_request_is_left_out(kernel: Kernel) -> None:
    def totals(gpu: int) -> list[int]:
        case = (
            KernelCase(2)
            .allocatable(GPU, [4, 0])
            .requested(GPU, [2, 0])
            .strategy(c.MOST_ALLOCATED)
            .fit_resources([CPU, GPU], [1, 3])
            .weights(*only(c.FIT))
            .pod(cpu=1000, gpu=gpu)
        )
        return list(kernel(*case.build()).total[0].tolist())

    # Without a gpu request: cpu alone, 25 on both. With one: node 0 (25 + 3 * 75) // 4 = 62;
    # node 1 has no gpu (and fails the filter).
    assert totals(0) == [25, 25]
    assert totals(1) == [62, 0]


@KERNELS
def test_balanced_allocation_over_three_resources_is_their_standard_deviation(
    kernel: Kernel,
) -> None:
    case = (
        KernelCase(1)
        .allocatable(GPU, [4])
        .requested(GPU, [1])
        .balanced_resources([CPU, MEMORY, GPU])
        .weights(*only(c.BALANCED))
        .pod(cpu=1000, memory=2 * GI, gpu=1)
    )
    # Fractions .25, .25, .5: mean 1/3, deviation sqrt((2 / 144 + 4 / 144) / 3) = .1178;
    # (1 - .1178) * 100 = 88.
    assert kernel(*case.build()).total[0].tolist() == [88]


@KERNELS
def test_without_the_fit_filter_a_pod_too_big_is_placed_and_counted(kernel: Kernel) -> None:
    case = (
        KernelCase(2)
        .no_fit_filter()
        .weights(*only(c.FIT))
        .pod(cpu=6000, memory=GI, pod_hash=1)
        .pod(cpu=6000, memory=GI, pod_hash=2)
    )
    result = kernel(*case.build())
    assert result.feasible.tolist() == [2, 2]
    # Both nodes over on cpu score only memory; the second pod goes where the first did not.
    assert sorted(result.chosen.tolist()) == [0, 1]


@KERNELS
def test_image_locality_is_each_nodes_own_score_weighed(kernel: Kernel) -> None:
    case = KernelCase(3).weights(*only(c.IMAGE_LOCALITY)).pod(cpu=100).image([0, 48, 23])
    result = kernel(*case.build())
    assert result.total[0].tolist() == [0, 48, 23]
    assert result.chosen.tolist() == [1]
    assert result.top_scores[0, :, c.IMAGE_LOCALITY].tolist() == [48, 23, 0]


@KERNELS
def test_volume_binding_is_each_nodes_own_score_weighed(kernel: Kernel) -> None:
    case = KernelCase(3).weights(*only(c.VOLUME_BINDING)).pod(cpu=100).volume([50, 95, 75])
    result = kernel(*case.build())
    assert result.total[0].tolist() == [50, 95, 75]  # not normalised: its own 0-100
    assert result.chosen.tolist() == [1]
    assert result.top_scores[0, :, c.VOLUME_BINDING].tolist() == [95, 75, 50]
    # Weighed with the others: it tips a node that loses on free cpu.
    case = (
        KernelCase(2)
        .requested(CPU, [0, 2000])
        .weights(1, 0, 0, 0, 0, 0, 0, 0, 2)
        .pod(cpu=1000)
        .volume([0, 50])
    )
    result = kernel(*case.build())
    assert result.chosen.tolist() == [1]


@KERNELS
def test_most_allocated_packs_a_batch_onto_the_fuller_node(kernel: Kernel) -> None:
    def chosen(strategy: int) -> list[int]:
        case = KernelCase(2).requested(CPU, [500, 0]).strategy(strategy).weights(*only(c.FIT))
        for b in range(4):
            case = case.pod(cpu=500, memory=GI, pod_hash=b)
        return list(kernel(*case.build()).chosen.tolist())

    assert chosen(c.MOST_ALLOCATED) == [0, 0, 0, 0]
    assert chosen(c.LEAST_ALLOCATED) == [1, 0, 1, 0]  # the emptier node, in turn


@KERNELS
def test_balanced_allocation_as_the_fit_strategy_scores_as_balanced_allocation(
    kernel: Kernel,
) -> None:
    case = (
        KernelCase(3)
        .requested(CPU, [1000, 1000, 5000])
        .requested(MEMORY, [GI, 6 * GI, 0])
        .strategy(c.BALANCED_ALLOCATION)
        .weights(1, 1, 0, 0, 0, 0, 0, 0)
        .pod(cpu=1000, memory=GI)
        .pod(memory=2 * GI)
        .pod()  # requests nothing: BalancedAllocation skips it, and so does Fit
    )
    result = kernel(*case.build())
    # test_balanced_allocation's figures, counted twice.
    assert result.total.tolist() == [[174, 162, 0], [200, 124, 124], [0, 0, 0]]
    np.testing.assert_array_equal(
        result.top_scores[:, :, c.FIT], result.top_scores[:, :, c.BALANCED]
    )


@KERNELS
def test_zone_health_is_each_nodes_own_score_weighed(kernel: Kernel) -> None:
    case = KernelCase(3).zone_scores([100, 14, 61]).weights(*only(c.ZONE_HEALTH)).pod(cpu=100)
    result = kernel(*case.build())
    # Not normalised over the feasible nodes: a factor of 1 is 100 wherever the others are.
    assert result.total[0].tolist() == [100, 14, 61]
    assert result.top_scores[0, :, c.ZONE_HEALTH].tolist() == [100, 61, 14]
    case = KernelCase(3).zone_scores([100, 14, 61]).weights(0, 0, 0, 0, 0, 0, 3, 0).pod(cpu=100)
    assert kernel(*case.build()).total[0].tolist() == [300, 42, 183]


@KERNELS
@pytest.mark.parametrize("pod_hash", range(8))
def test_a_low_factor_zone_loses_to_a_neutral_one(kernel: Kernel, pod_hash: int) -> None:
    # Alike nodes tie on every other score; without zone health the hash picks either.
    weights = (1, 1, 3, 2, 2, 2, 1, 1)
    case = KernelCase(2).zone_scores([14, 100]).weights(*weights).pod(cpu=100, pod_hash=pod_hash)
    result = kernel(*case.build())
    assert result.chosen.tolist() == [1]
    assert result.total[0, 1] - result.total[0, 0] == 100 - 14


@KERNELS
def test_a_neutral_zone_scores_exactly_as_without_zone_health(kernel: Kernel) -> None:
    def run(weight: int) -> c.Result:
        case = (
            KernelCase(3)
            .key("zone", [0, 1, 1])
            .row("web", [1, 0, 0])
            .requested(CPU, [0, 1000, 0])
            .weights(1, 1, 3, 2, 2, 2, weight, 1)
            .pod(cpu=500, memory=GI)
            .spread("web", "zone", hard=False)
            .member("web")
            .pod(cpu=500, memory=GI, pod_hash=8)
            .spread("web", "zone", hard=False)
            .member("web")
        )
        return kernel(*case.build())

    without, neutral = run(0), run(5)
    assert neutral.chosen.tolist() == without.chosen.tolist()
    assert neutral.top.tolist() == without.top.tolist()
    np.testing.assert_array_equal(neutral.top_scores, without.top_scores)
    assert (neutral.total - without.total).tolist() == [[500, 500, 500]] * 2


@KERNELS
def test_taint_scores_are_reversed_over_the_feasible_nodes(kernel: Kernel) -> None:
    case = (
        KernelCase(4).weights(*only(c.TAINT)).pod(cpu=100).taints([0, 1, 2, 4]).static([0, 0, 0, 1])
    )
    # The most PreferNoSchedule taints among feasible nodes is 2 (node 3 is not feasible).
    assert kernel(*case.build()).total[0].tolist() == [100, 50, 0, 0]
    case = KernelCase(2).weights(*only(c.TAINT)).pod(cpu=100)
    assert kernel(*case.build()).total[0].tolist() == [100, 100]


@KERNELS
def test_node_affinity_scores_are_normalised_to_the_best(kernel: Kernel) -> None:
    case = KernelCase(3).weights(*only(c.NODE_AFFINITY)).pod(cpu=100).node_affinity([0, 30, 60])
    assert kernel(*case.build()).total[0].tolist() == [0, 50, 100]


@KERNELS
def test_spread_scores(kernel: Kernel) -> None:
    def totals(max_skew: int) -> list[int]:
        case = (
            KernelCase(3)
            .key("zone", [0, 0, 1])
            .row("web", [2, 0, 0])
            .weights(*only(c.SPREAD))
            .pod(cpu=100)
            .spread("web", "zone", max_skew=max_skew, hard=False)
        )
        return list(kernel(*case.build()).total[0].tolist())

    # Two zones: weight log(4). Zone 0: round(2 * 1.386 + (maxSkew - 1)), zone 1: maxSkew - 1.
    # maxSkew 1: raw 3, 3, 0 -> 100 * (3 + 0 - raw) // 3.
    assert totals(1) == [0, 0, 100]
    # maxSkew 2: raw 4, 4, 1 -> 100 * (4 + 1 - raw) // 4.
    assert totals(2) == [25, 25, 100]


@KERNELS
def test_spread_scores_ignore_nodes_without_the_keys(kernel: Kernel) -> None:
    case = (
        KernelCase(3)
        .key("zone", [0, 1, -1])
        .key("host", [0, 1, 2])
        .row("web", [3, 0, 0])
        .weights(*only(c.SPREAD))
        .pod(cpu=100)
        .spread("web", "host", max_skew=3, hard=False, hostname=True)
        .spread("web", "zone", max_skew=5, hard=False)
    )
    result = kernel(*case.build())
    # Node 2 lacks the zone: ignored, 0, and not counted in the hostname weight either. Two
    # nodes scored, two zones: both weights log(4) = 1.386 (log(5) would make node 0 15).
    # Node 0: 3 * 1.386 + 2 + 3 * 1.386 + 4 = 14.3 -> 14; node 1: 2 + 4 = 6.
    # Normalised: 100 * (14 + 6 - raw) // 14.
    assert result.total[0].tolist() == [42, 100, 0]


@KERNELS
def test_hostname_spread_counts_per_node(kernel: Kernel) -> None:
    case = (
        KernelCase(4)
        .key("host", [0, 1, 2, 3])
        .row("web", [0, 1, 3, 0])
        .weights(*only(c.SPREAD))
        .pod(cpu=100)
        .static([0, 0, 0, 1])
        .spread("web", "host", hard=False, hostname=True)
    )
    result = kernel(*case.build())
    # Three feasible nodes: weight log(5) = 1.609; raw 0, round(1.609) = 2, round(4.828) = 5.
    assert result.total[0].tolist() == [100, 60, 0, 0]


@KERNELS
def test_inter_pod_preferences_are_normalised_between_min_and_max(kernel: Kernel) -> None:
    case = (
        KernelCase(3)
        .key("zone", [0, 0, 1])
        .key("host", [0, 1, 2])
        .row("web", [2, 0, 0])
        .row("cache", [0, 0, 1])
        .weights(*only(c.INTER_POD))
        .pod(cpu=100)
        .preferred("web", "zone", 5)  # zone 0: 2 web pods * 5 on nodes 0 and 1
        .preferred("web", "host", 3)  # node 0: 2 * 3
        .preferred("cache", "host", -6)  # node 2: 1 * -6
    )
    # Raw 16, 10, -6: int(100 * (raw + 6) / 22) -> 100, int(72.7) = 72, 0.
    assert kernel(*case.build()).total[0].tolist() == [100, 72, 0]
    flat = KernelCase(2).key("zone", [0, 0]).row("web", [1, 1]).weights(*only(c.INTER_POD))
    assert kernel(*flat.pod(cpu=100).preferred("web", "zone", 5).build()).total[0].tolist() == [
        0,
        0,
    ]


@KERNELS
def test_ties_go_to_the_highest_hash_of_pod_and_node(kernel: Kernel) -> None:
    hashes = [11, 22, 33, 44, 55]
    case = KernelCase(5).hashes(hashes).pod(cpu=100, pod_hash=12345)
    result = kernel(*case.build())
    ranked = sorted(range(5), key=lambda n: splitmix(hashes[n], 12345), reverse=True)
    assert result.chosen.tolist() == [ranked[0]]
    assert result.top[0].tolist() == ranked[:3]
    assert len(set(result.total[0].tolist())) == 1


@KERNELS
def test_ties_among_many_nodes(kernel: Kernel) -> None:
    # Past the first few dozen nodes the best are screened a block at a time: a node that
    # only ties with the third best must still be looked at.
    hashes = [(7919 * n) % 1000 for n in range(200)]
    result = kernel(*KernelCase(200).hashes(hashes).pod(cpu=100, pod_hash=3).build())
    ranked = sorted(range(200), key=lambda n: splitmix(hashes[n], 3), reverse=True)
    assert result.top[0].tolist() == ranked[:3]


@KERNELS
def test_negative_raw_scores_follow_python_floor_division(kernel: Kernel) -> None:
    # Never sent by the framework, but defined: negative maxima divide as Python's // does.
    case = (
        KernelCase(2)
        .key("zone", [0, 1])
        .row("web", [0, 0])
        .pod(cpu=100)
        .taints([-1, -2])
        .spread("web", "zone", max_skew=0, hard=False)
    )
    result = kernel(*case.build())
    # Taint: high -1; 100 - (100 * -1) // -1 = 0 and 100 - (-200 // -1) = -100.
    # Spread: every raw score floor(0 - 1 + 0.5) = -1 = low = high: 100 * -1 // -1 = 100.
    assert result.top_scores[0, :2, c.TAINT].tolist() == [0, -100]
    assert result.top_scores[0, :2, c.SPREAD].tolist() == [100, 100]


@KERNELS
def test_the_default_weights_add_up(kernel: Kernel) -> None:
    built = (
        KernelCase(2)
        .key("zone", [0, 1])
        .row("web", [1, 0])
        .pod(cpu=1000, memory=2 * GI)
        .taints([1, 0])
        .node_affinity([10, 0])
        .spread("web", "zone", hard=False)
        .dra([1, 4])
        .build()
    )
    result = kernel(*built)
    # Fit 75 and balanced 100 on both; taint 0 / 100; node affinity 100 / 0; spread raw
    # round(log 4) = 1 / 0 -> 0 / 100; no inter-pod terms; ZoneHealth neutral (100) and
    # weighed 0; no image on either node; no volume; DynamicResources raw 1 / 4 -> 25 / 100.
    # Weights 1, 1, 3, 2, 2, 2, 0, 1, 1, 2.
    assert result.top_scores[0].tolist() == [
        [75, 100, 100, 0, 100, 0, 100, 0, 0, 100],
        [75, 100, 0, 100, 0, 0, 100, 0, 0, 25],
        [0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    ]
    assert result.total[0].tolist() == [
        75 + 100 + 2 * 100 + 2 * 25,
        75 + 100 + 3 * 100 + 2 * 100 + 2 * 100,
    ]
    assert result.chosen.tolist() == [1]


# Where the reference departs from kube-scheduler ------------------------------------------


def test_system_default_spreading_skips_a_missing_zone_on_the_node() -> None:
    case = (
        KernelCase(3)
        .key("zone", [0, 1, -1])
        .key("host", [0, 1, 2])
        .row("web", [1, 0, 0])
        .weights(*only(c.SPREAD))
        .pod(cpu=100)
        .spread("web", "host", max_skew=3, hard=False, hostname=True)
        .spread("web", "zone", max_skew=5, hard=False)
        .system_default_spread()
    )
    result = reference.run(*case.build())
    # Three nodes scored; the host weight is log(3 + 2) and so is the zone's (zones 0, 1 and
    # the "" of node 2). Raw: node 0 1.61 + 2 + 1.61 + 4 -> 9; node 1 2 + 4 -> 6; node 2 has
    # no zone, so kube adds the host term alone: 2. Normalised 100 * (9 + 2 - raw) // 9.
    # (The reference adds 0 * log 5 + 4 for the "" zone: raw 6, and [66, 100, 100].)
    assert result.total[0].tolist() == [22, 55, 100]
