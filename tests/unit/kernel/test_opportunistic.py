"""Hand-checked examples of kube-scheduler's OpportunisticBatching in the kernel (contract.Batch
.continues), run against the reference and the compiled kernel.

The scene of docs/versions.md ("Opportunistic batching"): four nodes a, b, c, d that fit one
pod each; PreferNoSchedule taints not tolerated 0, 1, 0, 2; preferred node-affinity weights
100, 50, 0, 0; only TaintToleration (3) and NodeAffinity (2) weigh. The first pod scores
a 500, b 250, c 300, d 0; scored afresh without a, the second scores b 350, c 300, d 0.
"""

from __future__ import annotations

import numpy as np
import pytest

from plumb.kernel import compiled, reference
from plumb.kernel import contract as c
from tests.support.kernel_builders import KernelCase

Kernel = c.Kernel
KERNELS = pytest.mark.parametrize("kernel", [reference.run, compiled.run], ids=["ref", "numba"])
A, B, C, D = range(4)
TAINTS = [0, 1, 0, 2]
PREFERRED = [100, 50, 0, 0]


def scene(pods: int, *, continuing: bool, cpu: int = 3000) -> KernelCase:
    """``pods`` alike pods of ``cpu`` millicores on the four 4-cpu nodes, each after the first
    continuing the one before it when ``continuing``."""
    case = KernelCase(4).weights(0, 0, 3, 2, 0, 0, 0, 0, 0)
    for i in range(pods):
        case.pod(cpu=cpu, pod_hash=7 + i).taints(TAINTS).node_affinity(PREFERRED)
        if continuing and i:
            case.continues()
    return case


@KERNELS
def test_a_pod_scored_afresh_sees_the_normalisation_without_the_full_node(kernel: Kernel) -> None:
    result = kernel(*scene(2, continuing=False).build())
    assert result.chosen.tolist() == [A, B]
    assert result.hinted.tolist() == [False, False]
    assert [result.total[1, n] for n in (B, C, D)] == [350, 300, 0]


@KERNELS
def test_the_next_pod_takes_the_next_node_of_the_first_pods_scores(kernel: Kernel) -> None:
    result = kernel(*scene(3, continuing=True).build())
    # c (300) before b (250) by the first pod's totals; then b, the next in that ranking.
    assert result.chosen.tolist() == [A, C, B]
    assert result.hinted.tolist() == [False, True, True]
    # The hinted pods' own scores are still reported: the second's best was b.
    assert result.top[1].tolist() == [B, C, D]
    assert result.top[2].tolist() == [B, D, -1]


@KERNELS
def test_a_pod_whose_predecessor_node_still_fits_it_is_scored_afresh(kernel: Kernel) -> None:
    # Pods of 1500m: a takes two. Its scores with the first pod placed are the fresh ones.
    result = kernel(*scene(3, continuing=True, cpu=1500).build())
    assert result.chosen.tolist() == [A, A, C]
    # The third finds a full: it takes the next of the second pod's ranking (c 300, b 250).
    assert result.hinted.tolist() == [False, False, True]


@KERNELS
def test_a_hint_that_fails_the_filters_leaves_the_pod_scored_afresh(kernel: Kernel) -> None:
    # The second pod may not go to c (a static filter): the hint c is dropped, b is scored
    # best, and its ranking (d alone) is the third pod's.
    case = scene(3, continuing=True)
    case._pods[1].static = [0, 0, 1, 0]
    result = kernel(*case.build())
    assert result.chosen.tolist() == [A, B, D]
    assert result.hinted.tolist() == [False, False, True]


@KERNELS
def test_after_a_pod_that_fit_nowhere_the_next_is_scored_afresh(kernel: Kernel) -> None:
    case = scene(1, continuing=False)
    case.pod(cpu=5000, pod_hash=8).taints(TAINTS).node_affinity(PREFERRED).continues()
    case.pod(cpu=3000, pod_hash=9).taints(TAINTS).node_affinity(PREFERRED).continues()
    result = kernel(*case.build())
    assert result.chosen.tolist() == [A, -1, B]
    assert not result.hinted.any()


@KERNELS
def test_the_first_pod_of_a_batch_continues_nothing(kernel: Kernel) -> None:
    case = scene(1, continuing=False).continues()
    result = kernel(*case.build())
    assert result.chosen.tolist() == [A]
    assert not result.hinted.any()


@KERNELS
def test_ties_in_the_ranking_go_by_the_hash_of_the_pod_that_made_it(kernel: Kernel) -> None:
    # Three alike nodes after the first: the second pod takes the one the first pod ranked
    # next, not its own favourite among them.
    case = KernelCase(4).weights(0, 0, 3, 2, 0, 0, 0, 0, 0)
    case.pod(cpu=3000, pod_hash=7).node_affinity([100, 0, 0, 0])
    case.pod(cpu=3000, pod_hash=8).node_affinity([100, 0, 0, 0]).continues()
    result = kernel(*case.build())
    first = reference.mix(case.build()[0].name_hashes, np.uint64(7))
    expected = max((B, C, D), key=lambda n: int(first[n]))
    assert result.chosen.tolist() == [A, expected]
    assert result.hinted.tolist() == [False, True]
