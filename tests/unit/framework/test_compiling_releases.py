"""Scores and filters that changed between kube-scheduler v1.34 and v1.37, through the
framework: the release a profile decides as (``scoring.Profile.kube``) picks
NodeResourcesBalancedAllocation's formula and which namespaces the incoming pod's
namespaceSelector matches for InterPodAffinity, on small hand-made clusters with both
kernels."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

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


# InterPodAffinity's namespaceSelector ----------------------------------------------------------

ZONE = "topology.kubernetes.io/zone"
NOT_PROD = [{"key": "env", "operator": "NotIn", "values": ["prod"]}]
NO_ENV = [{"key": "env", "operator": "DoesNotExist"}]


def _term(app: str, namespace_expressions: Sequence[Mapping[str, object]]) -> dict[str, Any]:
    return {
        "topologyKey": ZONE,
        "labelSelector": {"matchLabels": {"app": app}},
        "namespaceSelector": {"matchExpressions": list(namespace_expressions)},
    }


def _with_term(
    builder: PodBuilder, kind: str, term: Mapping[str, Any], weight: int = 0
) -> PodBuilder:
    """``builder`` with one more pod (anti-)affinity term (``kind``: podAffinity or
    podAntiAffinity), required, or preferred of ``weight`` (the builder's own terms take
    matchLabels only as a namespaceSelector)."""
    affinity = builder._spec.setdefault("affinity", {}).setdefault(kind, {})
    if weight:
        entry = {"weight": weight, "podAffinityTerm": dict(term)}
        affinity.setdefault("preferredDuringSchedulingIgnoredDuringExecution", []).append(entry)
    else:
        affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", []).append(dict(term))
    return builder


def _two_zones(resident: PodBuilder) -> cache_module.Cache:
    # "a1" in zone a is the roomier node (its neighbour "b1" holds 2 of its 4 cpus): other
    # things equal, a pod goes there.
    c = cluster(
        [make_node("a1").zone("a"), make_node("b1").zone("b")],
        bound=[resident, make_pod("filler", "plain").req(cpu="2", memory="8Gi").node("b1")],
    )
    c.set_namespace("prod", {"env": "prod"})
    c.set_namespace("dev", {"env": "dev"})
    c.set_namespace("plain", {})
    return c


@KERNELS
@RELEASES
def test_anti_affinity_to_namespaces_not_prod_counts_prod_up_to_v1_36(
    minor: int, kernel: Kernel
) -> None:
    # A cache pod of namespace prod runs in zone a. The incoming pod (namespace dev) keeps
    # away from cache pods in namespaces whose env is not prod: from v1.37 that is dev and
    # plain only, and zone a is fine; up to v1.36 the selector, which an empty label set
    # satisfies, matched every namespace's pods: zone a is out.
    c = _two_zones(make_pod("cache", "prod").label("app", "cache").node("a1"))
    incoming = _with_term(
        make_pod("web", "dev").req(cpu="100m"), "podAntiAffinity", _term("cache", NOT_PROD)
    )
    (decision,) = _decide(c, [incoming], minor, kernel)
    assert (decision.node, decision.feasible) == (("a1", 2) if minor >= 37 else ("b1", 1))


@KERNELS
@RELEASES
def test_affinity_to_namespaces_not_prod_finds_nothing_from_v1_37(
    minor: int, kernel: Kernel
) -> None:
    # The incoming pod (namespace prod, app web) needs a web pod of a namespace whose env is
    # not prod in its zone. Only a web pod of prod runs (zone a). Up to v1.36 it counts: zone
    # a. From v1.37 nothing matches, and the pod does not match its own term (its namespace
    # is prod): no node.
    c = _two_zones(make_pod("web-0", "prod").label("app", "web").node("a1"))
    incoming = _with_term(
        make_pod("web-1", "prod").label("app", "web").req(cpu="100m"),
        "podAffinity",
        _term("web", NOT_PROD),
    )
    (decision,) = _decide(c, [incoming], minor, kernel)
    if minor >= 37:
        assert decision.node is None
        assert decision.message == (
            "0/2 nodes are available: 2 node(s) didn't match pod affinity rules."
        )
    else:
        assert (decision.node, decision.feasible) == ("a1", 1)


@KERNELS
@RELEASES
def test_the_first_pod_of_its_kind_matches_its_own_term_up_to_v1_36(
    minor: int, kernel: Kernel
) -> None:
    # No web pod runs anywhere: the first-pod rule lets a pod that matches its own terms go
    # to any node with the key. Its namespace (prod) is not among those its selector matches:
    # from v1.37 it does not match its own term, and waits.
    c = _two_zones(make_pod("other", "dev").label("app", "other").node("b1"))
    incoming = _with_term(
        make_pod("web-1", "prod").label("app", "web").req(cpu="100m"),
        "podAffinity",
        _term("web", NOT_PROD),
    )
    (decision,) = _decide(c, [incoming], minor, kernel)
    assert decision.node == (None if minor >= 37 else "a1")


@KERNELS
@RELEASES
def test_preferred_affinity_to_namespaces_without_env_draws_to_prod_up_to_v1_36(
    minor: int, kernel: Kernel
) -> None:
    # A cache pod of prod runs in zone b (the fuller zone). The incoming pod prefers (weight
    # 100) zones with cache pods of namespaces without an env label: up to v1.36 every
    # namespace's (zone b: InterPodAffinity 100 against 0, weighing 2); from v1.37 only
    # plain's, and there are none: the roomier a1.
    c = _two_zones(make_pod("cache", "prod").label("app", "cache").node("b1"))
    incoming = _with_term(
        make_pod("web", "dev").req(cpu="100m"), "podAffinity", _term("cache", NO_ENV), weight=100
    )
    (decision,) = _decide(c, [incoming], minor, kernel)
    scores = {cand.node: cand.scores[contract.INTER_POD] for cand in decision.candidates}
    if minor >= 37:
        assert (decision.node, scores) == ("a1", {"a1": 0, "b1": 0})
    else:
        assert (decision.node, scores) == ("b1", {"a1": 0, "b1": 100})


@KERNELS
@RELEASES
def test_existing_pods_anti_affinity_reads_the_incoming_pods_namespace_in_every_release(
    minor: int, kernel: Kernel
) -> None:
    # The existing cache pod (zone a) keeps web pods of namespaces whose env is not prod out
    # of its zone. Its term is matched with the incoming pod's namespace labels (prod) in
    # every release: the incoming web pod of prod may go there.
    resident = _with_term(
        make_pod("cache", "dev").label("app", "cache").node("a1"),
        "podAntiAffinity",
        _term("web", NOT_PROD),
    )
    c = _two_zones(resident)
    (decision,) = _decide(
        c, [make_pod("web", "prod").label("app", "web").req(cpu="100m")], minor, kernel
    )
    assert (decision.node, decision.feasible) == ("a1", 2)
