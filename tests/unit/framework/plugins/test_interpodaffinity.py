"""InterPodAffinity through the scheduling cycle: where pods land and what the scheduler says,
as kube-scheduler v1.34 decides (plugins/interpodaffinity: filtering.go, scoring.go) and as
https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#inter-pod-affinity-and-anti-affinity
documents it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from plumb.backend.cache import clustercache as cache_module
from plumb.framework.plugins import interpodaffinity
from plumb.kernel import contract
from plumb_dev.testing.builders import (
    HOSTNAME_LABEL,
    ZONE_LABEL,
    NodeBuilder,
    PodBuilder,
    make_node,
    make_pod,
)
from tests.support.small_clusters import cluster, one_at_a_time, pod, schedule

WEB = {"app": "web"}
CACHE = {"app": "cache"}
AFFINITY = interpodaffinity.AFFINITY_RULES_NOT_MATCH
ANTI_AFFINITY = interpodaffinity.ANTI_AFFINITY_RULES_NOT_MATCH
EXISTING_ANTI_AFFINITY = interpodaffinity.EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH


def web(name: str = "web", namespace: str = "default") -> PodBuilder:
    return make_pod(name, namespace).label("app", "web")


def cache_pod(node: str, name: str = "cache", namespace: str = "default") -> PodBuilder:
    return make_pod(name, namespace).label("app", "cache").node(node)


def zoned(*names: str) -> list[NodeBuilder]:
    """Nodes named "<zone><n>" in that zone: "b2" is the second node of zone b."""
    return [make_node(name).zone(name[0]) for name in names]


# Required affinity -----------------------------------------------------------------------------


def test_required_affinity_goes_to_the_zone_where_a_matching_pod_runs() -> None:
    c = cluster(zoned("a1", "a2", "b1", "b2", "c1"), [cache_pod("b2")])
    decision = schedule(c, web().affinity(ZONE_LABEL, CACHE))
    assert decision.node in {"b1", "b2"}
    assert decision.feasible == 2


def test_required_affinity_by_hostname_goes_to_the_very_node() -> None:
    c = cluster(zoned("a1", "a2", "b1"), [cache_pod("a2")])
    decision = schedule(c, web().affinity(HOSTNAME_LABEL, CACHE))
    assert (decision.node, decision.feasible) == ("a2", 1)


def test_required_affinity_to_pods_that_run_nowhere() -> None:
    decision = schedule(cluster(zoned("a1", "b1", "c1")), web().affinity(ZONE_LABEL, CACHE))
    assert decision.node is None
    assert decision.message == "0/3 nodes are available: 3 node(s) didn't match pod affinity rules."


def test_required_affinity_when_the_matching_zone_is_full() -> None:
    nodes = [*zoned("a1", "b1"), make_node("c1").zone("c").capacity(cpu="1")]
    c = cluster(nodes, [cache_pod("c1").req(cpu="1")])
    decision = schedule(c, web().req(cpu="500m").affinity(ZONE_LABEL, CACHE))
    assert decision.node is None
    assert decision.message == (
        "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match pod affinity rules."
    )


def test_a_node_without_the_topology_key_fails_affinity() -> None:
    c = cluster([*zoned("a1"), make_node("bare")], [cache_pod("a1"), cache_pod("bare", "c2")])
    decision = schedule(c, web().affinity(ZONE_LABEL, CACHE))
    assert (decision.node, decision.feasible) == ("a1", 1)


def test_two_affinity_terms_need_one_pod_matching_both() -> None:
    # kube-scheduler counts pods that match ALL the incoming pod's affinity terms: a cache pod
    # in zone b and a tier=fast pod on b1 do not make b1 satisfy {cache by zone, fast by host}.
    bound = [cache_pod("b1"), make_pod("fast").label("tier", "fast").node("b1")]
    c = cluster(zoned("a1", "b1", "b2"), bound)
    both = web().affinity(ZONE_LABEL, CACHE).affinity(HOSTNAME_LABEL, {"tier": "fast"})
    decision = schedule(c, both)
    assert decision.node is None
    assert decision.reasons == {AFFINITY: 3}
    # One pod that is both a cache and fast satisfies both terms, on its own node only.
    c.add_pod(pod(cache_pod("b2", "fast-cache").label("tier", "fast"), "fast-cache"))
    decision = schedule(c, both)
    assert (decision.node, decision.feasible) == ("b2", 1)


def test_a_term_without_a_label_selector_matches_no_pod() -> None:
    c = cluster(zoned("a1", "b1"), [web().node("a1")])
    decision = schedule(c, web().affinity(ZONE_LABEL, None))
    assert decision.reasons == {AFFINITY: 2}
    # Anti-affinity without a selector keeps out nothing.
    assert schedule(c, web().affinity(ZONE_LABEL, None, anti=True)).feasible == 2


# The first pod of a series ---------------------------------------------------------------------


def test_first_pod_with_affinity_to_its_own_labels_schedules_anywhere() -> None:
    decision = schedule(cluster(zoned("a1", "b1", "c1")), web().affinity(ZONE_LABEL, WEB))
    assert decision.node is not None
    assert decision.feasible == 3


def test_the_series_follows_the_first_pod_into_its_zone() -> None:
    nodes = zoned("a1", "a2", "b1", "b2", "c1", "c2")
    pending = [web(f"web-{i}").req(cpu="1").affinity(ZONE_LABEL, WEB) for i in range(6)]
    placed = one_at_a_time(cluster(nodes), pending)
    assert None not in placed
    assert len({str(node)[0] for node in placed}) == 1


def test_first_pod_rule_does_not_apply_once_a_matching_pod_exists_elsewhere() -> None:
    nodes = [*zoned("a1", "b1"), make_node("c1").zone("c").capacity(cpu="1")]
    c = cluster(nodes, [web().req(cpu="1").node("c1")])
    decision = schedule(c, web().req(cpu="500m").affinity(ZONE_LABEL, WEB))
    assert decision.node is None
    assert decision.message == (
        "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match pod affinity rules."
    )


def test_first_pod_rule_needs_the_pod_to_match_its_own_terms() -> None:
    # Its term looks in namespace "other"; the pod itself lives in "default".
    own_labels_elsewhere = web().affinity(ZONE_LABEL, WEB, namespaces=["other"])
    decision = schedule(cluster(zoned("a1", "b1")), own_labels_elsewhere)
    assert decision.reasons == {AFFINITY: 2}


def test_first_pod_rule_still_needs_the_topology_key() -> None:
    nodes = [make_node("a1").zone("a").capacity(cpu="1"), make_node("bare")]
    c = cluster(nodes, [make_pod("hog").req(cpu="1").node("a1")])
    decision = schedule(c, web().req(cpu="500m").affinity(ZONE_LABEL, WEB))
    assert decision.message == (
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match pod affinity rules."
    )


def test_matching_pods_only_on_nodes_without_the_key_leave_the_first_pod_rule_open() -> None:
    # kube-scheduler counts matches per topology pair; a node without the key adds no pair.
    c = cluster([*zoned("a1", "b1"), make_node("bare")], [web().node("bare")])
    decision = schedule(c, web().affinity(ZONE_LABEL, WEB))
    assert decision.node in {"a1", "b1"}
    assert decision.feasible == 2


# Required anti-affinity ------------------------------------------------------------------------


def test_hostname_anti_affinity_places_one_per_node_then_stops() -> None:
    pending = [web(f"web-{i}").affinity(HOSTNAME_LABEL, WEB, anti=True) for i in range(4)]
    c = cluster(zoned("a1", "b1", "c1"))
    placed = one_at_a_time(c, pending[:3])
    assert sorted(str(node) for node in placed) == ["a1", "b1", "c1"]
    decision = schedule(c, pending[3], "pending-3")
    assert decision.node is None
    assert decision.message == (
        "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules."
    )


def test_zone_anti_affinity_keeps_a_whole_zone_out() -> None:
    c = cluster(zoned("a1", "a2", "b1", "b2"), [web().node("a1")])
    decision = schedule(c, web().affinity(ZONE_LABEL, WEB, anti=True))
    assert decision.node in {"b1", "b2"}
    assert decision.feasible == 2


def test_anti_affinity_does_not_reject_a_node_without_the_key() -> None:
    c = cluster([*zoned("a1"), make_node("bare")], [web().node("a1"), web("w2").node("bare")])
    decision = schedule(c, web().affinity(ZONE_LABEL, WEB, anti=True))
    assert (decision.node, decision.feasible) == ("bare", 1)


def test_terminating_pods_still_count_for_anti_affinity() -> None:
    # Unlike PodTopologySpread, InterPodAffinity does not skip pods being deleted.
    c = cluster(zoned("a1", "b1"), [web().node("a1").terminating()])
    decision = schedule(c, web().affinity(HOSTNAME_LABEL, WEB, anti=True))
    assert (decision.node, decision.feasible) == ("b1", 1)


# Symmetry: the existing pods' anti-affinity ----------------------------------------------------


def guard(
    node: str,
    topology_key: str = HOSTNAME_LABEL,
    *,
    namespace_selector: Mapping[str, str] | None = None,
) -> PodBuilder:
    """A pod that keeps web pods away from its domain."""
    builder = make_pod(f"guard-{node}").label("app", "guard").node(node)
    return builder.affinity(topology_key, WEB, anti=True, namespace_selector=namespace_selector)


def test_an_existing_pods_anti_affinity_rejects_a_matching_pod_without_terms() -> None:
    nodes = [make_node("n1"), make_node("n2").capacity(cpu="1"), make_node("n3").capacity(cpu="1")]
    bound = [guard("n1"), make_pod("h2").req(cpu="1").node("n2")]
    bound.append(make_pod("h3").req(cpu="1").node("n3"))
    decision = schedule(cluster(nodes, bound), web().req(cpu="500m"))
    assert decision.node is None
    assert decision.message == (
        "0/3 nodes are available: 1 node(s) didn't satisfy existing pods anti-affinity rules, "
        "2 Insufficient cpu."
    )


def test_an_existing_pods_zone_anti_affinity_keeps_the_whole_zone_out() -> None:
    c = cluster(zoned("a1", "a2", "b1"), [guard("a1", ZONE_LABEL)])
    decision = schedule(c, web())
    assert (decision.node, decision.feasible) == ("b1", 1)
    # A pod the guard's term does not match goes anywhere.
    assert schedule(c, make_pod("api").label("app", "api")).feasible == 3


def test_an_existing_pods_anti_affinity_on_a_node_without_the_key_keeps_nothing_out() -> None:
    c = cluster([*zoned("a1"), make_node("bare")], [guard("bare", ZONE_LABEL)])
    assert schedule(c, web()).feasible == 2


def test_an_existing_pods_anti_affinity_looks_in_its_own_namespace() -> None:
    c = cluster(zoned("a1", "b1"), [guard("a1")])
    assert schedule(c, web(namespace="other")).feasible == 2
    assert schedule(c, web()).feasible == 1


def test_an_existing_pods_anti_affinity_with_a_namespace_selector() -> None:
    c = cluster(zoned("a1", "b1"), [guard("a1", namespace_selector={"env": "prod"})])
    c.set_namespace("prod", {"env": "prod"})
    c.set_namespace("dev", {"env": "dev"})
    rejected = schedule(c, web(namespace="prod"))
    assert (rejected.node, rejected.feasible) == ("b1", 1)
    assert schedule(c, web(namespace="dev")).feasible == 2
    # The web pod in "default" does not match either: its term names no "default".
    assert schedule(c, web()).feasible == 2


# Namespaces ------------------------------------------------------------------------------------


def _caches_in_two_namespaces() -> cache_module.Cache:
    bound = [cache_pod("a1", "local"), cache_pod("b1", "remote", namespace="data")]
    return cluster(zoned("a1", "b1", "c1"), bound)


def test_affinity_terms_look_in_the_pods_own_namespace_by_default() -> None:
    decision = schedule(_caches_in_two_namespaces(), web().affinity(ZONE_LABEL, CACHE))
    assert (decision.node, decision.feasible) == ("a1", 1)


def test_affinity_terms_look_in_the_namespaces_they_list() -> None:
    c = _caches_in_two_namespaces()
    decision = schedule(c, web().affinity(ZONE_LABEL, CACHE, namespaces=["data"]))
    assert (decision.node, decision.feasible) == ("b1", 1)
    both = schedule(c, web().affinity(ZONE_LABEL, CACHE, namespaces=["data", "default"]))
    assert both.feasible == 2


def test_affinity_terms_look_in_namespaces_matching_the_namespace_selector() -> None:
    c = _caches_in_two_namespaces()
    by_label = web().affinity(ZONE_LABEL, CACHE, namespace_selector={"team": "data"})
    # Before the namespace is known to carry the label, no cache pod matches.
    assert schedule(c, by_label).reasons == {AFFINITY: 3}
    c.set_namespace("data", {"team": "data"})
    decision = schedule(c, by_label)
    assert (decision.node, decision.feasible) == ("b1", 1)
    # The label removed again: back to no match.
    c.set_namespace("data", {"team": "other"})
    assert schedule(c, by_label).reasons == {AFFINITY: 3}


def test_an_empty_namespace_selector_means_every_namespace() -> None:
    decision = schedule(
        _caches_in_two_namespaces(), web().affinity(ZONE_LABEL, CACHE, namespace_selector={})
    )
    assert decision.feasible == 2


def test_anti_affinity_with_a_namespace_selector() -> None:
    bound = [web("w-prod", "prod").node("a1"), web("w-dev", "dev").node("b1")]
    c = cluster(zoned("a1", "b1", "c1"), bound)
    c.set_namespace("prod", {"env": "prod"})
    c.set_namespace("dev", {"env": "dev"})
    away_from_prod = web().affinity(
        HOSTNAME_LABEL, WEB, anti=True, namespace_selector={"env": "prod"}
    )
    decision = schedule(c, away_from_prod)
    assert decision.node in {"b1", "c1"}
    assert decision.feasible == 2


# Preferred terms -------------------------------------------------------------------------------


def _busy_except(free: str, *nodes: str) -> list[PodBuilder]:
    """Heavy pods (2 of 4 cpus) on every node but ``free``: resources alone prefer ``free``."""
    return [
        make_pod(f"load-{n}").label("app", "load").req(cpu="2").node(n) for n in nodes if n != free
    ]


def test_preferred_affinity_draws_the_pod_to_the_matching_zone() -> None:
    # The cache pod's cpu makes c1 the least attractive node by resources.
    c = cluster(zoned("a1", "b1", "c1"), [cache_pod("c1").req(cpu="1")])
    assert schedule(c, web()).node != "c1"
    decision = schedule(c, web().preferred_affinity(100, ZONE_LABEL, CACHE))
    assert decision.node == "c1"
    assert decision.candidates[0].scores[contract.INTER_POD] == 100


def test_preferred_anti_affinity_pushes_the_pod_away() -> None:
    c = cluster(zoned("a1", "b1", "c1"), [*_busy_except("c1", "a1", "b1"), cache_pod("c1")])
    assert schedule(c, web()).node == "c1"
    decision = schedule(c, web().preferred_affinity(100, HOSTNAME_LABEL, CACHE, anti=True))
    assert decision.node in {"a1", "b1"}


def test_heavier_preferred_term_wins() -> None:
    bound = [cache_pod("a1"), make_pod("db").label("app", "db").node("b1")]
    c = cluster(zoned("a1", "b1", "c1"), bound)
    prefers = (
        web()
        .preferred_affinity(10, ZONE_LABEL, CACHE)
        .preferred_affinity(90, ZONE_LABEL, {"app": "db"})
    )
    assert schedule(c, prefers).node == "b1"


def test_an_existing_pods_preferred_anti_affinity_repels_a_matching_pod() -> None:
    loner = (
        make_pod("loner")
        .label("app", "loner")
        .node("c1")
        .preferred_affinity(100, HOSTNAME_LABEL, WEB, anti=True)
    )
    c = cluster(zoned("a1", "b1", "c1"), [*_busy_except("c1", "a1", "b1"), loner])
    assert schedule(c, make_pod("api").label("app", "api")).node == "c1"
    decision = schedule(c, web())
    assert decision.node in {"a1", "b1"}


def test_an_existing_pods_preferred_affinity_attracts_a_matching_pod() -> None:
    magnet = (
        make_pod("magnet")
        .label("app", "magnet")
        .req(cpu="2")
        .node("c1")
        .preferred_affinity(100, HOSTNAME_LABEL, WEB)
    )
    c = cluster(zoned("a1", "b1", "c1"), [magnet])
    assert schedule(c, make_pod("api").label("app", "api")).node != "c1"
    assert schedule(c, web()).node == "c1"


def test_an_existing_pods_required_affinity_attracts_a_matching_pod() -> None:
    # hardPodAffinityWeight (1 by default) scores the symmetric direction of required affinity.
    follower = (
        make_pod("follower")
        .label("app", "follower")
        .req(cpu="2")
        .node("c1")
        .affinity(HOSTNAME_LABEL, WEB)
    )
    c = cluster(zoned("a1", "b1", "c1"), [follower])
    assert schedule(c, make_pod("api").label("app", "api")).node != "c1"
    decision = schedule(c, web())
    assert decision.node == "c1"
    assert decision.candidates[0].scores[contract.INTER_POD] == 100


def test_preferred_anti_affinity_spreads_a_series_over_nodes() -> None:
    pending = [
        web(f"web-{i}").preferred_affinity(100, HOSTNAME_LABEL, WEB, anti=True) for i in range(8)
    ]
    placed = one_at_a_time(cluster(zoned("a1", "a2", "b1", "b2")), pending)
    assert Counter(placed) == {"a1": 2, "a2": 2, "b1": 2, "b2": 2}
