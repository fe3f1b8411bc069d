"""Tests for plumb.framework.scoring and what compiling makes of a profile: a SchedulingPolicy's
strategy and zone factors reach the kernel, and the candidates' scores show them."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from plumb.backend.cache import clustercache as cache_module
from plumb.framework import compiling, cycle, scoring
from plumb.kernel import compiled, contract, reference
from plumb_dev.testing.builders import ZONE_LABEL, make_node, make_pod
from tests.support.small_clusters import cluster, pod

Kernel = contract.Kernel
KERNELS = pytest.mark.parametrize("kernel", [reference.run, compiled.run], ids=["ref", "numba"])
NOT_READY = math.exp(-2)  # a zone whose nodes are all NotReady


def _decide(
    kernel: Kernel,
    c: cache_module.Cache,
    count: int,
    profile: scoring.Profile,
    cpu: str = "500m",
) -> list[cycle.Decision]:
    """``count`` alike pods decided in one batch under ``profile``."""
    builders = [make_pod(f"web-{i}").req(cpu=cpu, memory="512Mi") for i in range(count)]
    pods = [pod(builder, f"uid-{i}") for i, builder in enumerate(builders)]
    prepared = cycle.prepare(pods, c.snapshot(), c, profile)
    assert prepared.compiled is not None
    result = kernel(prepared.compiled.cluster, prepared.compiled.batch)
    return cycle.explain(prepared.compiled, result)


def _scores(decision: cycle.Decision, plugin: str) -> dict[str, int]:
    index = contract.SCORE_PLUGINS.index(plugin)
    return {candidate.node: candidate.scores[index] for candidate in decision.candidates}


@KERNELS
def test_most_allocated_packs_pods_that_least_allocated_spreads(kernel: Kernel) -> None:
    nodes = [make_node(name).capacity(cpu="4", memory="8Gi") for name in ("n-a", "n-b")]
    packed = _decide(kernel, cluster(nodes), 4, scoring.Profile(strategy=scoring.MOST_ALLOCATED))
    spread = _decide(kernel, cluster(nodes), 4, scoring.DEFAULT)
    assert len({d.node for d in packed}) == 1
    assert Counter(d.node for d in spread) == Counter({"n-a": 2, "n-b": 2})


@KERNELS
def test_balanced_allocation_makes_the_fit_score_the_balance_score(kernel: Kernel) -> None:
    nodes = [
        make_node("n-a").capacity(cpu="4", memory="8Gi"),
        make_node("n-b").capacity(cpu="8", memory="4Gi"),
        make_node("n-c").capacity(cpu="2", memory="16Gi"),
    ]
    profile = scoring.Profile(strategy=scoring.BALANCED_ALLOCATION)
    (decision,) = _decide(kernel, cluster(nodes), 1, profile, cpu="1")
    fit = _scores(decision, "NodeResourcesFit")
    assert fit == _scores(decision, "NodeResourcesBalancedAllocation")
    assert len(set(fit.values())) > 1  # the nodes differ, so the test can tell


def _zones() -> cache_module.Cache:
    return cluster(
        [
            make_node("n-a").zone("a").capacity(cpu="4", memory="8Gi"),
            make_node("n-b").zone("b").capacity(cpu="4", memory="8Gi"),
            make_node("n-c").zone("c").capacity(cpu="4", memory="8Gi"),
            make_node("n-none").capacity(cpu="4", memory="8Gi"),  # no zone label
        ]
    )


def _zone_profile(weight: int) -> scoring.Profile:
    weights = list(scoring.DEFAULT_WEIGHTS)
    weights[contract.ZONE_HEALTH] = weight
    # c has no factor: no fresh data, as the zone feed leaves it, or a zone it never saw.
    factors = {"a": NOT_READY, "b": 1.0}
    return scoring.Profile(weights=tuple(weights), zone_key=ZONE_LABEL, zone_factors=factors)


def test_zone_scores_are_the_factor_in_percent_and_100_where_nothing_is_known() -> None:
    snap = _zones().snapshot()
    scores = compiling.zone_scores(_zone_profile(1), snap)
    assert dict(zip(snap.names, scores.tolist(), strict=True)) == {
        "n-a": 14,  # round(100 * e^-2) = round(13.53)
        "n-b": 100,
        "n-c": 100,
        "n-none": 100,
    }
    assert compiling.zone_scores(scoring.DEFAULT, snap).tolist() == [100] * 4


@KERNELS
def test_a_low_factor_zone_loses_and_zones_without_a_factor_score_as_without_zone_health(
    kernel: Kernel,
) -> None:
    with_health = _decide(kernel, _zones(), 3, _zone_profile(10))
    assert "n-a" not in {d.node for d in with_health}
    # The first pod's best three: every node but a, each with ZoneHealth 100 (weight 10).
    first = with_health[0]
    assert _scores(first, "ZoneHealth") == {"n-b": 100, "n-c": 100, "n-none": 100}
    # The nodes are alike but for zone health: without it they tie, and with it the neutral
    # ones score exactly 10 * 100 more, c (no factor) and the unlabelled node as b (factor 1).
    without = _decide(kernel, _zones(), 1, _zone_profile(0))[0]
    assert len({c.total for c in without.candidates}) == 1
    plain = without.candidates[0].total
    assert {c.node: c.total for c in first.candidates} == {
        "n-b": plain + 1000,
        "n-c": plain + 1000,
        "n-none": plain + 1000,
    }


@KERNELS
def test_a_neutral_factor_changes_no_placement(kernel: Kernel) -> None:
    neutral = scoring.Profile(
        weights=(*scoring.DEFAULT_WEIGHTS[:-1], 7),
        zone_key=ZONE_LABEL,
        zone_factors={"a": 1.0, "b": 1.0},
    )
    assert [d.node for d in _decide(kernel, _zones(), 6, neutral)] == [
        d.node for d in _decide(kernel, _zones(), 6, scoring.DEFAULT)
    ]
