"""Scores that changed between kube-scheduler v1.34 and v1.37, through the framework: the
release a profile decides as (``scoring.Profile.kube``) picks NodeResourcesBalancedAllocation's
formula, on small hand-made clusters with both kernels."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from plumb.backend.cache import clustercache as cache_module
from plumb.framework import cycle, emulation, scoring
from plumb.kernel import compiled, contract, reference
from plumb_dev.testing.builders import PodBuilder, make_node, make_pod
from tests.support.small_clusters import cluster, pod

Kernel = contract.Kernel
KERNELS = pytest.mark.parametrize("kernel", [reference.run, compiled.run], ids=["ref", "numba"])
RELEASES = pytest.mark.parametrize("minor", emulation.MINORS)


def _decide(
    c: cache_module.Cache, builders: Sequence[PodBuilder], minor: int, kernel: Kernel
) -> list[cycle.Decision]:
    pods = [pod(builder, f"uid-{i}") for i, builder in enumerate(builders)]
    profile = scoring.Profile(kube=emulation.emulate(minor))
    prepared = cycle.prepare(pods, c.snapshot(), c, profile)
    assert prepared.compiled is not None
    batch = prepared.compiled.batch
    assert batch.balanced_change is (minor >= 36)
    return list(cycle.explain(prepared.compiled, kernel(prepared.compiled.cluster, batch)))


def _balanced_cluster() -> cache_module.Cache:
    # Two nodes of 4 cpu and 8Gi: "even" holds 2 cpu and 4Gi, "cpu-heavy" 2.5 cpu and 512Mi.
    return cluster(
        [
            make_node("even").capacity(cpu="4", memory="8Gi"),
            make_node("cpu-heavy").capacity(cpu="4", memory="8Gi"),
        ],
        bound=[
            make_pod("half").req(cpu="2", memory="4Gi").node("even"),
            make_pod("cpu").req(cpu="2500m", memory="512Mi").node("cpu-heavy"),
        ],
    )


@KERNELS
@RELEASES
def test_balanced_allocation_picks_a_node_per_release(minor: int, kernel: Kernel) -> None:
    # A pod of 1 cpu and 2Gi. "even": .75 and .75 with it (100), .5 and .5 without (100).
    # "cpu-heavy": .875 and .3125 with it, .625 and .0625 without (both 71). LeastAllocated:
    # "even" (25 + 25) / 2 = 25, "cpu-heavy" (12 + 68) / 2 = 40.
    # Up to v1.35: even 25 + 100 = 125, cpu-heavy 40 + 71 = 111.
    # From v1.36 neither node's balance changes, 75 each: even 100, cpu-heavy 115.
    (decision,) = _decide(
        _balanced_cluster(), [make_pod("web").req(cpu="1", memory="2Gi")], minor, kernel
    )
    scores = {cand.node: cand.scores[contract.BALANCED] for cand in decision.candidates}
    totals = {cand.node: cand.total for cand in decision.candidates}
    if minor < 36:
        assert scores == {"even": 100, "cpu-heavy": 71}
        assert decision.node == "even"
    else:
        assert scores == {"even": 75, "cpu-heavy": 75}
        assert decision.node == "cpu-heavy"
    assert abs(totals["even"] - totals["cpu-heavy"]) >= 14
