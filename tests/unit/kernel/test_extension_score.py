"""Hand-checked examples of the Python score plugins' score in the kernel (contract.Batch
.extension_score): added to each feasible node's total as it is, negative too, in the ties and in
OpportunisticBatching's kept ranking, never a column of ``top_scores``; run against the reference
and the compiled kernel, which must also agree array for array.

The scene: three nodes alike but for a preferred node affinity of 100 on node 0, which alone
weighs (2): without the plugins, node 0 totals 200 and the others 0.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from plumb.kernel import compiled, reference
from plumb.kernel import contract as c
from tests.support.kernel_builders import KernelCase, assert_same

Kernel = c.Kernel
KERNELS = pytest.mark.parametrize("kernel", [reference.run, compiled.run], ids=["ref", "numba"])
PREFERRED = [100, 0, 0]


def scene(extension: list[int] | None = None, static: list[int] | None = None) -> KernelCase:
    case = KernelCase(3).weights(0, 0, 0, 2).pod(cpu=100).node_affinity(PREFERRED)
    if static is not None:
        case.static(static)
    return case.extension(extension) if extension is not None else case


def decide(kernel: Kernel, case: KernelCase) -> c.Result:
    """The kernel's result, checked equal to the other kernel's."""
    cluster, batch = case.build()
    result = kernel(cluster, batch)
    assert_same(compiled.run(cluster, batch), reference.run(cluster, batch))
    return result


@KERNELS
def test_the_extension_score_is_added_to_the_totals_and_changes_the_choice(
    kernel: Kernel,
) -> None:
    assert decide(kernel, scene()).chosen.tolist() == [0]
    result = decide(kernel, scene([0, 250, 150]))
    assert result.total.tolist() == [[200, 250, 150]]
    assert result.chosen.tolist() == [1]
    assert result.top.tolist() == [[1, 0, 2]]
    # No column of its own: the per-plugin scores are SCORE_PLUGINS' alone, and weighed they
    # sum to the totals less the extension score.
    assert result.top_scores.shape == (1, c.TOP, len(c.SCORE_PLUGINS))
    assert result.top_scores[0, :, c.NODE_AFFINITY].tolist() == [0, 100, 0]
    weights = scene().build()[1].weights
    assert (result.top_scores[0] @ weights).tolist() == [0, 200, 0]


@KERNELS
def test_totals_the_extension_score_ties_go_by_the_tie_break_hash(kernel: Kernel) -> None:
    case = scene([0, 200, 100])
    result = decide(kernel, case)
    assert result.total.tolist() == [[200, 200, 100]]
    ties = reference.mix(case.build()[0].name_hashes, np.uint64(7))
    first, second = sorted((0, 1), key=lambda n: int(ties[n]), reverse=True)
    assert result.chosen.tolist() == [first]
    assert result.top.tolist() == [[first, second, 2]]


@KERNELS
def test_negative_extension_scores_count_and_infeasible_nodes_total_zero(kernel: Kernel) -> None:
    result = decide(kernel, scene([-500, 10**12, -1], static=[0, 1, 0]))
    # Node 1 fails a static filter: its score is not read, its total is 0.
    assert result.total.tolist() == [[-300, 0, -1]]
    assert result.chosen.tolist() == [2]
    assert result.top.tolist() == [[2, 0, -1]]


@KERNELS
def test_every_node_below_zero_still_places_the_pod(kernel: Kernel) -> None:
    result = decide(kernel, scene([-(10**15), -(10**15) + 1, -(10**15) - 300]))
    assert result.total.tolist() == [[-(10**15) + 200, -(10**15) + 1, -(10**15) - 300]]
    assert result.chosen.tolist() == [0]


@KERNELS
def test_a_batch_scored_by_no_plugin_decides_as_without_the_row(kernel: Kernel) -> None:
    # extension_scored False: a row of zeros, which the kernels need not read.
    cluster, batch = scene([0, 0, 0]).build()
    assert batch.extension_scored
    unscored = dataclasses.replace(batch, extension_scored=False)
    assert_same(kernel(cluster, unscored), kernel(cluster, batch))
    assert kernel(cluster, unscored).total.tolist() == [[200, 0, 0]]


# OpportunisticBatching (see test_opportunistic.py's scene): four nodes that fit one pod each;
# taints not tolerated 0, 1, 0, 2 and preferred node-affinity weights 100, 50, 0, 0 weighing 3
# and 2: the first pod scores a 500, b 250, c 300, d 0 without the plugins.
A, B, C, D = range(4)
TAINTS = [0, 1, 0, 2]
AFFINITY = [100, 50, 0, 0]


def batching(*extensions: list[int]) -> KernelCase:
    """A pod of 3000m per row of extension scores, each after the first continuing the one
    before it."""
    case = KernelCase(4).weights(0, 0, 3, 2)
    for i, extension in enumerate(extensions):
        case.pod(cpu=3000, pod_hash=7 + i).taints(TAINTS).node_affinity(AFFINITY)
        case.extension(extension)
        if i:
            case.continues()
    return case


@KERNELS
def test_the_kept_ranking_holds_the_totals_with_the_extension_score(kernel: Kernel) -> None:
    # The first pod's plugins lift b to 350, above c (300): the second pod takes b from the
    # ranking although its own plugins favour c, and the third takes c.
    nothing = [0, 0, 0, 0]
    result = decide(kernel, batching([0, 100, 0, 0], [0, 0, 1000, 0], nothing))
    assert result.total[0].tolist() == [500, 350, 300, 0]
    assert result.chosen.tolist() == [A, B, C]
    assert result.hinted.tolist() == [False, True, True]
    # The hinted pod's own scores, its plugins' included, are still reported.
    assert result.top[1].tolist() == [C, B, D]
    assert result.total[1, C] == 1300


@KERNELS
def test_without_the_extension_score_the_ranking_is_the_plugins_alone(kernel: Kernel) -> None:
    nothing = [0, 0, 0, 0]
    result = decide(kernel, batching(nothing, nothing, nothing))
    assert result.chosen.tolist() == [A, C, B]
    assert result.hinted.tolist() == [False, True, True]


@KERNELS
def test_a_negative_extension_score_reorders_the_kept_ranking(kernel: Kernel) -> None:
    # c drops to -200 in the first pod's ranking: b, then d (0), then c.
    nothing = [0, 0, 0, 0]
    result = decide(kernel, batching([0, 0, -500, 0], nothing, nothing, nothing))
    assert result.total[0].tolist() == [500, 250, -200, 0]
    assert result.chosen.tolist() == [A, B, D, C]
    assert result.hinted.tolist() == [False, True, True, True]
