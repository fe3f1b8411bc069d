"""PodTopologySpread through the scheduling cycle: where pods land and what the scheduler says,
as kube-scheduler v1.34 decides (plugins/podtopologyspread: filtering.go, scoring.go, common.go)
and as https://kubernetes.io/docs/concepts/scheduling-eviction/topology-spread-constraints/
documents it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest

from plumb.backend.cache import clustercache as cache_module
from plumb.framework import cycle
from plumb.framework.plugins import nodeaffinity, podtopologyspread
from plumb.kernel import contract
from plumb_dev.testing.builders import (
    HOSTNAME_LABEL,
    ZONE_LABEL,
    NodeBuilder,
    PodBuilder,
    expr,
    make_node,
    make_pod,
)
from tests.support.small_clusters import cluster, one_at_a_time, pod, schedule

WEB = {"app": "web"}
SKEW = podtopologyspread.CONSTRAINTS_NOT_MATCH
MISSING = podtopologyspread.MISSING_LABEL
NODE_AFFINITY = nodeaffinity.MISMATCH


def web(name: str = "web") -> PodBuilder:
    return make_pod(name).label("app", "web")


def web_on(node: str, name: str = "resident") -> PodBuilder:
    return web(name).node(node)


def zoned(*zones: str) -> list[NodeBuilder]:
    """One node per zone, named after it: zone "a" holds node "a1"."""
    return [make_node(f"{zone}1").zone(zone) for zone in zones]


# Filter: skew ----------------------------------------------------------------------------------


def test_max_skew_1_fills_three_zones_evenly() -> None:
    # Zone a's nodes are 16 times bigger: scoring alone would put every pod there.
    nodes = [make_node(f"a{i}").zone("a").capacity(cpu="64") for i in range(2)]
    nodes += [make_node(f"{z}{i}").zone(z).capacity(cpu="4") for z in "bc" for i in range(2)]
    zone_of = {f"{z}{i}": z for z in "abc" for i in range(2)}
    pending = [web(f"web-{i}").req(cpu="1").spread(ZONE_LABEL, 1, selector=WEB) for i in range(9)]

    placed = one_at_a_time(cluster(nodes), pending)

    assert None not in placed
    for count in range(1, 10):
        per_zone = Counter(zone_of[str(node)] for node in placed[:count])
        assert max(per_zone.values()) - min(per_zone.get(z, 0) for z in "abc") <= 1
    assert Counter(zone_of[str(node)] for node in placed) == {"a": 3, "b": 3, "c": 3}
    # The control: without the constraint they all pile into zone a.
    unconstrained = one_at_a_time(cluster(nodes), (web(f"web-{i}").req(cpu="1") for i in range(9)))
    assert {zone_of[str(node)] for node in unconstrained} == {"a"}


def test_a_batch_fills_zones_exactly_as_one_at_a_time() -> None:
    nodes = [make_node(f"{z}{i}").zone(z).capacity(cpu="4") for z in "abc" for i in range(2)]
    pending = [web(f"web-{i}").req(cpu="1").spread(ZONE_LABEL, 1, selector=WEB) for i in range(12)]
    bound = [web_on("a0")]

    sequential = one_at_a_time(cluster(nodes, bound), pending)
    c = cluster(nodes, bound)
    decisions, deferred = cycle.schedule_batch(
        [pod(b, f"pending-{i}") for i, b in enumerate(pending)], c.snapshot(), c
    )
    assert deferred == ()
    assert [d.node for d in decisions] == sequential
    assert None not in sequential


def test_a_zone_at_max_skew_is_rejected_with_kube_schedulers_text() -> None:
    # 2/0/0 with maxSkew 1: zone a would go to 3 - 0 = 3; zones b and c have no room.
    nodes = [
        make_node("a1").zone("a").capacity(cpu="8"),
        make_node("b1").zone("b").capacity(cpu="1"),
        make_node("c1").zone("c").capacity(cpu="1"),
    ]
    c = cluster(nodes, [web_on("a1", "r1"), web_on("a1", "r2")])
    decision = schedule(c, web().req(cpu="2").spread(ZONE_LABEL, 1, selector=WEB))
    assert decision.node is None
    assert decision.message == (
        "0/3 nodes are available: 1 node(s) didn't match pod topology spread constraints, "
        "2 Insufficient cpu."
    )
    assert decision.reasons == {SKEW: 1, "Insufficient cpu": 2}


def test_the_docs_example_2_2_1_only_the_short_zone_takes_the_pod() -> None:
    # The API reference's example: 2/2/1 with maxSkew 1 goes to zone3; with maxSkew 2 anywhere.
    nodes = zoned("a", "b", "c")
    layout = {"a1": 2, "b1": 2, "c1": 1}
    bound = [web_on(n, f"r-{n}-{i}") for n, count in layout.items() for i in range(count)]
    c = cluster(nodes, bound)
    tight = schedule(c, web().spread(ZONE_LABEL, 1, selector=WEB))
    assert (tight.node, tight.feasible) == ("c1", 1)
    assert schedule(c, web().spread(ZONE_LABEL, 2, selector=WEB)).feasible == 3


def test_only_pods_of_the_pods_own_namespace_are_counted() -> None:
    def in_namespace(namespace: str) -> list[PodBuilder]:
        return [make_pod(f"r{i}", namespace).label("app", "web").node("a1") for i in range(3)]

    spread = web().spread(ZONE_LABEL, 1, selector=WEB)
    assert schedule(cluster(zoned("a", "b"), in_namespace("other")), spread).feasible == 2
    decision = schedule(cluster(zoned("a", "b"), in_namespace("default")), spread)
    assert (decision.node, decision.feasible) == ("b1", 1)


def test_every_hard_constraint_must_hold() -> None:
    # Zones are 1/1, so zone spread allows every node; hostname spread allows only empty a2.
    nodes = [make_node(n).zone("a") for n in ("a1", "a2")] + [make_node("b1").zone("b")]
    c = cluster(nodes, [web_on("a1"), web_on("b1", "r2")])
    decision = schedule(
        c, web().spread(ZONE_LABEL, 1, selector=WEB).spread(HOSTNAME_LABEL, 1, selector=WEB)
    )
    assert (decision.node, decision.feasible) == ("a2", 1)


# Filter: the topology key ----------------------------------------------------------------------


def test_a_node_without_the_zone_label_fails_with_missing_required_label() -> None:
    nodes = [
        make_node("a1").zone("a").capacity(cpu="1"),
        make_node("b1").zone("b").capacity(cpu="1"),
        make_node("bare").capacity(cpu="8"),
    ]
    decision = schedule(cluster(nodes), web().req(cpu="2").spread(ZONE_LABEL, 1, selector=WEB))
    assert decision.node is None
    assert decision.message == (
        "0/3 nodes are available: 1 node(s) didn't match pod topology spread constraints "
        "(missing required label), 2 Insufficient cpu."
    )
    assert decision.reasons == {MISSING: 1, "Insufficient cpu": 2}


def test_pods_on_a_node_without_the_key_do_not_count() -> None:
    c = cluster([*zoned("a", "b"), make_node("bare")], [web_on("bare", f"r{i}") for i in range(3)])
    decision = schedule(c, web().spread(ZONE_LABEL, 1, selector=WEB))
    assert decision.node in {"a1", "b1"}
    assert decision.feasible == 2


def test_schedule_anyway_does_not_reject_a_node_without_the_key() -> None:
    c = cluster([*zoned("a", "b"), make_node("bare")])
    decision = schedule(c, web().spread(ZONE_LABEL, 1, when="ScheduleAnyway", selector=WEB))
    assert decision.feasible == 3


# minDomains ------------------------------------------------------------------------------------


def test_min_domains_above_the_domain_count_makes_the_global_minimum_zero() -> None:
    # 2 zones, minDomains 3: the global minimum stays 0, so a zone holding one pod takes no more.
    pending = [web(f"web-{i}").spread(ZONE_LABEL, 1, selector=WEB, min_domains=3) for i in range(3)]
    placed = one_at_a_time(cluster(zoned("a", "b")), pending)
    assert sorted(str(node) for node in placed[:2]) == ["a1", "b1"]
    assert placed[2] is None
    # The control: with minDomains met the third pod fits (1/1 has minimum 1).
    unlimited = [web(f"web-{i}").spread(ZONE_LABEL, 1, selector=WEB) for i in range(3)]
    assert None not in one_at_a_time(cluster(zoned("a", "b")), unlimited)


def test_min_domains_rejects_every_zone_holding_max_skew() -> None:
    c = cluster(zoned("a", "b"), [web_on("a1"), web_on("b1", "r2")])
    decision = schedule(c, web().spread(ZONE_LABEL, 1, selector=WEB, min_domains=3))
    assert decision.node is None
    assert decision.message == (
        "0/2 nodes are available: 2 node(s) didn't match pod topology spread constraints."
    )
    # minDomains equal to the number of domains is met: the minimum is 1 again.
    assert schedule(c, web().spread(ZONE_LABEL, 1, selector=WEB, min_domains=2)).feasible == 2


def test_min_domains_counts_only_eligible_domains() -> None:
    # Three zones, but nodeAffinity leaves two eligible: minDomains 3 is not met.
    c = cluster(zoned("a", "b", "c"), [web_on("a1"), web_on("b1", "r2")])
    builder = web().node_affinity(expr(ZONE_LABEL, "In", "a", "b"))
    decision = schedule(c, builder.spread(ZONE_LABEL, 1, selector=WEB, min_domains=3))
    assert decision.node is None
    assert decision.reasons == {SKEW: 2, NODE_AFFINITY: 1}


# nodeAffinityPolicy ----------------------------------------------------------------------------


Restriction = Callable[[PodBuilder], PodBuilder]
SELECTS_A_AND_B = [
    pytest.param(lambda b: b.node_selector("pool", "x"), id="nodeSelector"),
    pytest.param(lambda b: b.node_affinity(expr(ZONE_LABEL, "In", "a", "b")), id="nodeAffinity"),
]


def _pools() -> cache_module.Cache:
    nodes = [
        make_node("a1").zone("a").label("pool", "x"),
        make_node("b1").zone("b").label("pool", "x"),
        make_node("c1").zone("c").label("pool", "y"),
    ]
    return cluster(nodes, [web_on("a1"), web_on("b1", "r2")])


PINS_A1_AND_B1 = pytest.param(
    lambda b: b.node_affinity(fields=[expr("metadata.name", "In", "a1")]).node_affinity(
        fields=[expr("metadata.name", "In", "b1")]
    ),
    id="matchFields",
)


@pytest.mark.parametrize("restrict", [*SELECTS_A_AND_B, PINS_A1_AND_B1])
def test_node_affinity_policy_honor_leaves_excluded_zones_out(restrict: Restriction) -> None:
    # Honor (the default): zone c is outside the pod's node affinity, so the minimum is 1.
    for policy in (None, "Honor"):
        builder = web().spread(ZONE_LABEL, 1, selector=WEB, node_affinity_policy=policy)
        decision = schedule(_pools(), restrict(builder))
        assert decision.node in {"a1", "b1"}
        assert decision.feasible == 2


@pytest.mark.parametrize("restrict", SELECTS_A_AND_B)
def test_node_affinity_policy_ignore_counts_excluded_zones(restrict: Restriction) -> None:
    # Ignore: empty zone c counts, the minimum is 0, and zones a and b are at maxSkew.
    builder = web().spread(ZONE_LABEL, 1, selector=WEB, node_affinity_policy="Ignore")
    decision = schedule(_pools(), restrict(builder))
    assert decision.node is None
    assert decision.message == (
        "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
        "2 node(s) didn't match pod topology spread constraints."
    )


def test_node_affinity_policy_honor_leaves_out_excluded_nodes_of_an_included_zone() -> None:
    # Zone a has a pool-x node and a pool-y node; the web pods on the pool-y node do not count.
    nodes = [
        make_node("a1").zone("a").label("pool", "x"),
        make_node("a2").zone("a").label("pool", "y"),
        make_node("b1").zone("b").label("pool", "x"),
    ]
    bound = [web_on("a2", "r1"), web_on("a2", "r2")]
    honor = web().node_selector("pool", "x").spread(ZONE_LABEL, 1, selector=WEB)
    assert schedule(cluster(nodes, bound), honor).feasible == 2
    ignore = web().node_selector("pool", "x")
    ignore.spread(ZONE_LABEL, 1, selector=WEB, node_affinity_policy="Ignore")
    decision = schedule(cluster(nodes, bound), ignore)
    assert (decision.node, decision.feasible) == ("b1", 1)


# nodeTaintsPolicy ------------------------------------------------------------------------------


def _tainted_c() -> cache_module.Cache:
    nodes = [*zoned("a", "b"), make_node("c1").zone("c").taint("dedicated", "infra")]
    return cluster(nodes, [web_on("a1"), web_on("b1", "r2")])


def test_node_taints_policy_ignore_counts_a_tainted_zone_and_it_can_block() -> None:
    for policy in (None, "Ignore"):
        decision = schedule(
            _tainted_c(), web().spread(ZONE_LABEL, 1, selector=WEB, node_taints_policy=policy)
        )
        assert decision.node is None
        assert decision.message == (
            "0/3 nodes are available: 1 node(s) had untolerated taint(s), "
            "2 node(s) didn't match pod topology spread constraints."
        )


def test_node_taints_policy_honor_leaves_a_tainted_zone_out() -> None:
    decision = schedule(
        _tainted_c(), web().spread(ZONE_LABEL, 1, selector=WEB, node_taints_policy="Honor")
    )
    assert decision.node in {"a1", "b1"}
    assert decision.feasible == 2


def test_node_taints_policy_honor_counts_a_tainted_zone_the_pod_tolerates() -> None:
    builder = web().spread(ZONE_LABEL, 1, selector=WEB, node_taints_policy="Honor")
    decision = schedule(_tainted_c(), builder.toleration("dedicated", operator="Exists"))
    assert (decision.node, decision.feasible) == ("c1", 1)


def test_node_taints_policy_honor_ignores_prefer_no_schedule_taints() -> None:
    # Only NoSchedule and NoExecute taints take a node out (DoNotScheduleTaintsFilterFunc).
    nodes = [*zoned("a", "b"), make_node("c1").zone("c").taint("spot", "", "PreferNoSchedule")]
    c = cluster(nodes, [web_on("a1"), web_on("b1", "r2")])
    decision = schedule(c, web().spread(ZONE_LABEL, 1, selector=WEB, node_taints_policy="Honor"))
    assert (decision.node, decision.feasible) == ("c1", 1)


# Cordoned nodes --------------------------------------------------------------------------------


def test_a_cordoned_node_still_counts_towards_skew() -> None:
    # The classic surprise: cordoning the only node of zone c blocks zones a and b.
    nodes = [*zoned("a", "b"), make_node("c1").zone("c").unschedulable()]
    c = cluster(nodes, [web_on("a1"), web_on("b1", "r2")])
    decision = schedule(c, web().spread(ZONE_LABEL, 1, selector=WEB))
    assert decision.node is None
    assert decision.message == (
        "0/3 nodes are available: 1 node(s) were unschedulable, "
        "2 node(s) didn't match pod topology spread constraints."
    )


def test_a_cordoned_node_with_the_unschedulable_taint_is_left_out_under_honor() -> None:
    # The node lifecycle controller taints cordoned nodes; nodeTaintsPolicy Honor then drops it.
    cordoned = make_node("c1").zone("c").unschedulable()
    nodes = [*zoned("a", "b"), cordoned.taint("node.kubernetes.io/unschedulable")]
    c = cluster(nodes, [web_on("a1"), web_on("b1", "r2")])
    decision = schedule(c, web().spread(ZONE_LABEL, 1, selector=WEB, node_taints_policy="Honor"))
    assert decision.node in {"a1", "b1"}
    assert decision.feasible == 2


# matchLabelKeys --------------------------------------------------------------------------------


def _rollout() -> cache_module.Cache:
    # Revision v1 runs in zones b and c; the first pod of v2 has landed in zone a.
    bound = [
        web_on("b1", "old-b").label("pod-template-hash", "v1"),
        web_on("c1", "old-c").label("pod-template-hash", "v1"),
        web_on("a1", "new-a").label("pod-template-hash", "v2"),
    ]
    return cluster(zoned("a", "b", "c"), bound)


def test_match_label_keys_counts_only_the_pods_of_the_same_revision() -> None:
    builder = web().label("pod-template-hash", "v2")
    decision = schedule(
        _rollout(),
        builder.spread(ZONE_LABEL, 1, selector=WEB, match_label_keys=["pod-template-hash"]),
    )
    assert decision.node in {"b1", "c1"}
    assert decision.feasible == 2
    # The control: counting every web pod, the zones are 1/1/1 and all three may take it.
    plain = schedule(
        _rollout(), web().label("pod-template-hash", "v2").spread(ZONE_LABEL, 1, selector=WEB)
    )
    assert plain.feasible == 3


def test_match_label_keys_spreads_the_new_revision_on_its_own() -> None:
    pending = [
        web(f"new-{i}")
        .label("pod-template-hash", "v2")
        .spread(ZONE_LABEL, 1, selector=WEB, match_label_keys=["pod-template-hash"])
        for i in range(5)
    ]
    placed = one_at_a_time(_rollout(), pending)
    # With new-a, 6 pods of v2 over 3 zones: 2 each.
    assert Counter([*placed, "a1"]) == {"a1": 2, "b1": 2, "c1": 2}


def test_match_label_keys_the_pod_does_not_carry_are_ignored() -> None:
    # Without a pod-template-hash label the constraint counts every web pod: zones are 1/1/1.
    builder = web().spread(ZONE_LABEL, 1, selector=WEB, match_label_keys=["pod-template-hash"])
    assert schedule(_rollout(), builder).feasible == 3


# What counts -----------------------------------------------------------------------------------


def test_terminating_pods_are_not_counted() -> None:
    dying = [web_on("a1", f"dying-{i}").terminating() for i in range(2)]
    decision = schedule(cluster(zoned("a", "b"), dying), web().spread(ZONE_LABEL, 1, selector=WEB))
    assert decision.feasible == 2
    # The control: the same pods alive fill zone a up to maxSkew.
    alive = [web_on("a1", f"alive-{i}") for i in range(2)]
    decision = schedule(cluster(zoned("a", "b"), alive), web().spread(ZONE_LABEL, 1, selector=WEB))
    assert (decision.node, decision.feasible) == ("b1", 1)


def test_a_pod_stops_counting_once_its_deletion_starts() -> None:
    # A rolling update: the watch reports the old pod again, now with a deletionTimestamp.
    c = cluster(zoned("a", "b"), [web_on("b1", "peer")])
    c.add_pod(pod(web_on("a1", "old"), "old-uid"))
    spread = web().spread(ZONE_LABEL, 1, selector=WEB)
    assert schedule(c, spread).feasible == 2
    c.add_pod(pod(web_on("a1", "old").terminating(), "old-uid"))
    decision = schedule(c, spread)
    assert (decision.node, decision.feasible) == ("a1", 1)
    c.add_pod(pod(web_on("a1", "new"), "new-uid"))
    assert schedule(c, spread).feasible == 2


def test_a_selector_that_does_not_match_the_pod_itself_adds_no_self_match() -> None:
    # Zone a holds one db pod: 1 + 0 - 0 = 1 <= maxSkew for a web pod that spreads the dbs.
    c = cluster(zoned("a", "b"), [make_pod("db").label("app", "db").node("a1")])
    decision = schedule(c, web().spread(ZONE_LABEL, 1, selector={"app": "db"}))
    assert decision.feasible == 2
    # A db pod matches its own selector: 1 + 1 - 0 = 2 > 1 in zone a.
    own = schedule(
        c, make_pod("db-2").label("app", "db").spread(ZONE_LABEL, 1, selector={"app": "db"})
    )
    assert (own.node, own.feasible) == ("b1", 1)


def test_match_expressions_select_the_counted_pods() -> None:
    c = cluster(zoned("a", "b"), [web_on("a1"), make_pod("api").label("app", "api").node("b1")])
    either = [expr("app", "In", "web", "api")]
    decision = schedule(c, web().spread(ZONE_LABEL, 1, expressions=either))
    assert decision.feasible == 2  # 1/1: both zones at the minimum
    only_web = [expr("app", "NotIn", "api")]
    assert schedule(c, web().spread(ZONE_LABEL, 1, expressions=only_web)).node == "b1"


def test_a_constraint_without_a_label_selector_counts_nothing() -> None:
    # A nil labelSelector selects no pod (labels.Nothing()): no counts and no self-match.
    c = cluster(zoned("a", "b"), [web_on("a1", f"r{i}") for i in range(3)])
    assert schedule(c, web().spread(ZONE_LABEL, 1)).feasible == 2


def test_an_empty_label_selector_counts_no_existing_pods() -> None:
    c = cluster(zoned("a", "b"), [web_on("a1", f"r{i}") for i in range(3)])
    assert schedule(c, web().spread(ZONE_LABEL, 1, selector={})).feasible == 2


# ScheduleAnyway --------------------------------------------------------------------------------


def test_schedule_anyway_never_blocks() -> None:
    nodes = [
        make_node("a1").zone("a").capacity(cpu="8"),
        make_node("b1").zone("b").capacity(cpu="1"),
        make_node("c1").zone("c").capacity(cpu="1"),
    ]
    c = cluster(nodes, [web_on("a1", f"r{i}") for i in range(3)])
    soft = schedule(
        c, web().req(cpu="2").spread(ZONE_LABEL, 1, when="ScheduleAnyway", selector=WEB)
    )
    assert soft.node == "a1"
    hard = schedule(c, web().req(cpu="2").spread(ZONE_LABEL, 1, selector=WEB))
    assert hard.node is None


def test_schedule_anyway_prefers_the_emptier_domain_over_free_resources() -> None:
    # Zone b holds no web pod but a busy api pod: resources alone prefer zones a or c.
    bound = [
        web_on("a1", "r1"),
        web_on("a1", "r2"),
        web_on("c1", "r3"),
        make_pod("api").label("app", "api").req(cpu="1").node("b1"),
    ]
    c = cluster(zoned("a", "b", "c"), bound)
    assert schedule(c, web()).node != "b1"
    soft = web().spread(ZONE_LABEL, 1, when="ScheduleAnyway", selector=WEB)
    decision = schedule(c, soft)
    assert decision.node == "b1"
    assert decision.feasible == 3
    best = decision.candidates[0]
    assert best.node == "b1"
    assert best.scores[contract.SPREAD] == 100


def test_schedule_anyway_scores_a_node_without_the_key_lowest() -> None:
    # With constraints of its own, a pod's soft spread ignores nodes lacking the key: they
    # score 0, below a node whose zone already holds three matching pods.
    c = cluster([*zoned("a"), make_node("bare")], [web_on("a1", f"r{i}") for i in range(3)])
    assert schedule(c, web()).node == "bare"
    decision = schedule(c, web().spread(ZONE_LABEL, 1, when="ScheduleAnyway", selector=WEB))
    assert decision.node == "a1"
    assert [(cand.node, cand.scores[contract.SPREAD]) for cand in decision.candidates] == [
        ("a1", 100),
        ("bare", 0),
    ]


def test_schedule_anyway_spreads_a_series_across_zones() -> None:
    nodes = [make_node(f"{z}{i}").zone(z) for z in "abc" for i in range(2)]
    pending = [
        web(f"web-{i}").req(cpu="100m").spread(ZONE_LABEL, 1, when="ScheduleAnyway", selector=WEB)
        for i in range(6)
    ]
    placed = one_at_a_time(cluster(nodes), pending)
    assert Counter(str(node)[0] for node in placed) == {"a": 2, "b": 2, "c": 2}
