"""NodeResourcesBalancedAllocation from kube-scheduler v1.36 (``Batch.balanced_change``): the
change in balance the pod brings, 50 + (50 + with - without) / 2, by hand on both kernels and
the compiled kernel against the reference on random input."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plumb.kernel import compiled, reference
from plumb.kernel import contract as c
from tests.support.kernel_builders import CPU, GI, GPU, MEMORY, KernelCase, assert_same, only
from tests.unit.kernel.test_compiled import kernel_inputs

Kernel = c.Kernel
KERNELS = pytest.mark.parametrize("kernel", [reference.run, compiled.run], ids=["ref", "numba"])


def _changed(case: KernelCase) -> tuple[c.Cluster, c.Batch]:
    cluster, batch = case.build()
    return cluster, dataclasses.replace(batch, balanced_change=True)


def _four_nodes() -> KernelCase:
    # 4 cpu, 8Gi each: node 0 half used on both, node 1 mostly cpu, node 2 empty, node 3
    # mostly memory.
    return (
        KernelCase(4)
        .requested(CPU, [2000, 2500, 0, 0])
        .requested(MEMORY, [4 * GI, GI // 2, 0, 6 * GI])
        .weights(*only(c.BALANCED))
        .pod(cpu=1000, memory=GI)
    )


@KERNELS
def test_up_to_v1_35_the_balance_with_the_pod_is_the_score(kernel: Kernel) -> None:
    # With the pod: node 0 .75 and .625 -> (1 - .0625) * 100 = 93; node 1 .875 and .1875 ->
    # 65; node 2 .25 and .125 -> 93; node 3 .25 and .875 -> 68.
    result = kernel(*_four_nodes().build())
    assert result.total[0].tolist() == [93, 65, 93, 68]
    assert result.chosen.tolist() == [0]  # 0 and 2 tie: the tie-break picks node 0


@KERNELS
def test_from_v1_36_the_change_in_balance_is_the_score(kernel: Kernel) -> None:
    # Without the pod: node 0 .5 and .5 -> 100, node 1 .625 and .0625 -> 71, node 2 (nothing
    # requested) 100, node 3 0 and .75 -> 62. 50 + (50 + with - without) / 2: node 0
    # 50 + 43 / 2 = 71, node 1 50 + 44 / 2 = 72, node 2 71, node 3 50 + 56 / 2 = 78.
    result = kernel(*_changed(_four_nodes()))
    assert result.total[0].tolist() == [71, 72, 71, 78]
    assert result.chosen.tolist() == [3]
    assert result.top_scores[0, :, c.BALANCED].tolist() == [78, 72, 71]


@KERNELS
def test_the_change_is_scored_again_after_each_placement_of_a_batch(kernel: Kernel) -> None:
    # Three replicas of 1 cpu and 1Gi on two empty nodes: each goes where adding it keeps
    # the balance best. The first: both 71 (tie-break). Then the node it took has .25 and
    # .125 without (93) and .5 and .25 with (87): 50 + 44 / 2 = 72; the other 71.
    case = KernelCase(2).weights(*only(c.BALANCED))
    for b in range(3):
        case = case.pod(cpu=1000, memory=GI, pod_hash=b)
    result = kernel(*_changed(case))
    first = int(result.chosen[0])
    assert result.total[0].tolist() == [71, 71]
    assert result.total[1, first] == 72
    assert result.total[1, 1 - first] == 71
    assert result.chosen[1] == first


@KERNELS
def test_the_change_over_three_resources_reads_the_same_ones_without_the_pod(
    kernel: Kernel,
) -> None:
    case = (
        KernelCase(1)
        .allocatable(GPU, [4])
        .requested(CPU, [2000])
        .requested(GPU, [1])
        .balanced_resources([CPU, MEMORY, GPU])
        .weights(*only(c.BALANCED))
        .pod(cpu=1000, memory=4 * GI, gpu=1)
    )
    # With: .75, .5, .5 -> deviation .1179 -> 88. Without: .5, 0, .25 -> .2041 -> 79.
    # 50 + (50 + 88 - 79) / 2 = 79; up to v1.35, 88.
    assert kernel(*case.build()).total[0].tolist() == [88]
    assert kernel(*_changed(case)).total[0].tolist() == [79]


@KERNELS
def test_a_resource_the_pod_does_not_request_is_left_out_of_both_balances(
    kernel: Kernel,
) -> None:
    # The gpu (optional, not requested) counts in neither: with .75, .5 -> 87, without .5, 0
    # -> 75; 50 + 62 / 2 = 81.
    case = (
        KernelCase(1)
        .allocatable(GPU, [4])
        .requested(CPU, [2000])
        .requested(GPU, [4])
        .balanced_resources([CPU, MEMORY, GPU])
        .weights(*only(c.BALANCED))
        .pod(cpu=1000, memory=4 * GI)
    )
    assert kernel(*_changed(case)).total[0].tolist() == [81]


@KERNELS
def test_balanced_allocation_as_the_fit_strategy_scores_the_change_too(kernel: Kernel) -> None:
    case = _four_nodes().strategy(c.BALANCED_ALLOCATION).weights(1, 1, 0, 0, 0, 0, 0, 0)
    case = case.pod()  # requests nothing: both skip it
    result = kernel(*_changed(case))
    assert result.total.tolist() == [[142, 144, 142, 156], [0, 0, 0, 0]]
    np.testing.assert_array_equal(
        result.top_scores[:, :, c.FIT], result.top_scores[:, :, c.BALANCED]
    )


def _with_change(inputs: tuple[c.Cluster, c.Batch]) -> tuple[c.Cluster, c.Batch]:
    cluster, batch = inputs
    return cluster, dataclasses.replace(batch, balanced_change=True)


@settings(max_examples=120, deadline=None)
@given(kernel_inputs())
def test_numba_scores_the_change_as_the_reference(inputs: tuple[c.Cluster, c.Batch]) -> None:
    cluster, batch = _with_change(inputs)
    assert_same(compiled.run(cluster, batch), reference.run(cluster, batch))


@settings(max_examples=40, deadline=None)
@given(kernel_inputs(max_pods=6, replicas=True))
def test_numba_scores_the_change_as_the_reference_for_replicas(
    inputs: tuple[c.Cluster, c.Batch],
) -> None:
    cluster, batch = _with_change(inputs)
    assert_same(compiled.run(cluster, batch), reference.run(cluster, batch))


@pytest.mark.parametrize(
    "strategy",
    c.FIT_STRATEGIES,
    ids=["LeastAllocated", "MostAllocated", "BalancedAllocation", "RequestedToCapacityRatio"],
)
@settings(max_examples=40, deadline=None)
@given(inputs=kernel_inputs(max_pods=6), balanced_weight=st.integers(1, 10))
def test_numba_scores_the_change_as_the_reference_with_each_strategy(
    strategy: int, inputs: tuple[c.Cluster, c.Batch], balanced_weight: int
) -> None:
    cluster, batch = _with_change(inputs)
    weights = batch.weights.copy()
    weights[c.BALANCED] = balanced_weight
    batch = dataclasses.replace(batch, fit_strategy=strategy, weights=weights)
    assert_same(compiled.run(cluster, batch), reference.run(cluster, batch))


@settings(max_examples=20, deadline=None)
@given(kernel_inputs(huge=True))
def test_numba_scores_the_change_as_the_reference_on_huge_quantities(
    inputs: tuple[c.Cluster, c.Batch],
) -> None:
    cluster, batch = _with_change(inputs)
    assert_same(compiled.run(cluster, batch), reference.run(cluster, batch))


def test_a_batch_cut_in_parts_keeps_the_switch() -> None:
    _, batch = _changed(_four_nodes().pod(cpu=100))
    assert c.part(batch, 1, 2).balanced_change is True


def test_go_division_truncates_towards_zero() -> None:
    assert [reference.go_div(x, 2) for x in (-3, -1, 0, 1, 3)] == [-1, 0, 0, 0, 1]
