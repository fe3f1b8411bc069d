"""Tests for plumb.preemption.evaluator: whom kube-scheduler's DefaultPreemption would evict and
where, with a resource-sum ``fits`` standing in for the filters."""

from __future__ import annotations

import dataclasses
import datetime
import itertools
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plumb.backend.records import hashing, specs
from plumb.kernel import reference
from plumb.preemption import evaluator

T0 = datetime.datetime(2026, 1, 1, 10, 0, tzinfo=datetime.UTC)


def at(hours: float) -> datetime.datetime:
    return T0 + datetime.timedelta(hours=hours)


def pod(
    name: str,
    priority: int = 0,
    cpu: int = 1,
    *,
    start: float | None = 0,
    ns: str = "default",
    **extra: object,
) -> evaluator.Pod:
    """A pod asking ``cpu`` cores, started ``start`` hours after T0 (None: not started)."""
    return evaluator.Pod(
        uid=f"uid-{ns}-{name}",
        namespace=ns,
        name=name,
        priority=priority,
        requests={"cpu": cpu},
        start_time=None if start is None else at(start),
        **extra,  # type: ignore[arg-type]
    )


def node(name: str, *pods: evaluator.Pod, cpu: int = 4) -> evaluator.NodePods:
    return evaluator.NodePods(name=name, allocatable={"cpu": cpu}, pods=pods)


class SumFits:
    """Fits when the pod's cpu plus the remaining pods' cpu stays within allocatable; records
    every node it is asked about."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __call__(
        self, p: evaluator.Pod, n: evaluator.NodePods, remaining: Sequence[evaluator.Pod]
    ) -> bool:
        self.asked.append(n.name)
        used = sum(r.requests.get("cpu", 0) for r in remaining)
        return used + p.requests.get("cpu", 0) <= n.allocatable.get("cpu", 0)


def unschedulable(*nodes: evaluator.NodePods) -> dict[str, evaluator.NodeStatus]:
    return {
        n.name: evaluator.NodeStatus(
            code=evaluator.Code.UNSCHEDULABLE, reasons=("Insufficient cpu",)
        )
        for n in nodes
    }


def budget(
    allowed: int, *, ns: str = "default", app: str = "db", **extra: object
) -> evaluator.DisruptionBudget:
    selector = specs.LabelSelector((specs.Requirement("app", "In", (app,)),))
    return evaluator.DisruptionBudget(
        namespace=ns,
        selector=selector,
        disruptions_allowed=allowed,
        **extra,  # type: ignore[arg-type]
    )


def run(
    preemptor: evaluator.Pod,
    *nodes: evaluator.NodePods,
    budgets: Sequence[evaluator.DisruptionBudget] = (),
    statuses: dict[str, evaluator.NodeStatus] | None = None,
    rules: evaluator.Rules = evaluator.NO_RULES,
) -> evaluator.PreemptionVerdict:
    return evaluator.preempt(
        preemptor,
        nodes,
        unschedulable(*nodes) if statuses is None else statuses,
        budgets,
        SumFits(),
        rules=rules,
    )


def names(pods: Sequence[evaluator.Pod]) -> list[str]:
    return [p.name for p in pods]


# Victims on one node ---------------------------------------------------------------------------


def test_fewest_victims_on_a_full_node() -> None:
    outcome = run(pod("vip", 1000, cpu=2), node("n", *(pod(f"p{i}") for i in range(4))))
    assert outcome.node == "n"
    assert len(outcome.victims) == 2
    assert outcome.message == ""
    assert not outcome.clear_nomination


def test_higher_priority_is_reprieved_first() -> None:
    n = node("n", pod("low", 1, cpu=2), pod("mid", 2, cpu=2))
    assert names(run(pod("vip", 10, cpu=2), n).victims) == ["low"]


def test_earlier_start_is_reprieved_first_among_equal_priority() -> None:
    n = node("n", pod("young", 1, cpu=2, start=5), pod("old", 1, cpu=2, start=1))
    assert names(run(pod("vip", 10, cpu=2), n).victims) == ["young"]


def test_a_pod_not_started_yet_counts_as_started_now() -> None:
    n = node("n", pod("pending", 1, cpu=2, start=None), pod("old", 1, cpu=2, start=1))
    assert names(run(pod("vip", 10, cpu=2), n).victims) == ["pending"]


def test_equal_or_higher_priority_is_never_a_victim() -> None:
    n = node("n", pod("same", 10, cpu=2), pod("above", 11, cpu=1), pod("low", 9, cpu=1))
    outcome = run(pod("vip", 10, cpu=3), n)
    assert outcome.node is None
    assert outcome.rejected == {"n": ("Insufficient cpu",)}
    only_equal = node("m", pod("same", 10, cpu=4))
    outcome = run(pod("vip", 10, cpu=1), only_equal)
    assert outcome.rejected == {"m": (evaluator.NO_VICTIMS,)}


def test_victims_are_listed_most_important_first() -> None:
    n = node("n", pod("a", 1, cpu=1), pod("b", 3, cpu=1), pod("c", 2, cpu=1), pod("d", 5, cpu=1))
    outcome = run(pod("vip", 10, cpu=4), n)
    assert names(outcome.victims) == ["d", "b", "c", "a"]


# PodDisruptionBudgets --------------------------------------------------------------------------


def test_pdb_violating_victims_are_reprieved_first() -> None:
    # By importance alone "guarded" (priority 1) would go and "free" (priority 5) stay.
    guarded = pod("guarded", 1, cpu=2, labels={"app": "db"})
    n = node("n", guarded, pod("free", 5, cpu=2))
    outcome = run(pod("vip", 10, cpu=2), n, budgets=[budget(0)])
    assert names(outcome.victims) == ["free"]
    assert outcome.pdb_violations == 0


def test_budget_is_spent_by_the_most_important_pods_first() -> None:
    # One disruption allowed: "x" (priority 2) spends it, "y" (priority 1) would violate, so "y"
    # is offered back first and stays; "z" follows, and "x" goes.
    x = pod("x", 2, cpu=2, labels={"app": "db"})
    y = pod("y", 1, cpu=2, labels={"app": "db"})
    n = node("n", x, y, pod("z", 3, cpu=2), cpu=6)
    outcome = run(pod("vip", 10, cpu=2), n, budgets=[budget(1)])
    assert names(outcome.victims) == ["x"]
    assert outcome.pdb_violations == 0


def test_violations_are_counted_per_victim_beyond_the_budget() -> None:
    pods = [pod(f"db{i}", 1, cpu=1, labels={"app": "db"}) for i in range(4)]
    outcome = run(pod("vip", 10, cpu=4), node("n", *pods), budgets=[budget(1)])
    assert len(outcome.victims) == 4
    assert outcome.pdb_violations == 3


@pytest.mark.parametrize("first_violation", [False, True])
def test_a_pod_stops_at_the_first_budget_it_overdraws_from_v1_37(first_violation: bool) -> None:
    # "both" matches "none" (no disruption left) and "one" (one), in that order; "after"
    # matches "one" only. v1.34 to v1.36 spend every budget matching a pod, so "both" takes
    # "one"'s disruption and "after" violates it; v1.37 stops "both" at "none".
    both = pod("both", 2, labels={"app": "db", "tier": "x"})
    after = pod("after", 1, labels={"tier": "x"})
    none = budget(0)
    one = evaluator.DisruptionBudget(
        namespace="default",
        selector=specs.LabelSelector((specs.Requirement("tier", "In", ("x",)),)),
        disruptions_allowed=1,
    )
    violating, keeping = evaluator.split_by_budgets(
        [both, after], [none, one], first_violation=first_violation
    )
    assert names(violating) == (["both"] if first_violation else ["both", "after"])
    assert names(keeping) == (["after"] if first_violation else [])
    # In the other order "both" spends "one" before it overdraws "none": the same either way.
    violating, _ = evaluator.split_by_budgets(
        [both, after], [one, none], first_violation=first_violation
    )
    assert names(violating) == ["both", "after"]


def test_budgets_that_do_not_apply() -> None:
    db = pod("db", 1, cpu=2, labels={"app": "db"})
    n = node("n", db, pod("other", 5, cpu=2))
    empty = evaluator.DisruptionBudget(
        namespace="default", selector=specs.LabelSelector(), disruptions_allowed=0
    )
    for unrelated in (
        budget(0, ns="elsewhere"),
        budget(0, app="web"),
        budget(0, disrupted=frozenset({"db"})),
        empty,
        evaluator.DisruptionBudget(namespace="default", selector=None, disruptions_allowed=0),
    ):
        outcome = run(pod("vip", 10, cpu=2), n, budgets=[unrelated])
        assert names(outcome.victims) == ["db"], unrelated
        assert outcome.pdb_violations == 0


# Selectors that select by a label's absence: app NotIn [other], release DoesNotExist.
ABSENCE_SELECTORS = {
    "NotIn": specs.Requirement("app", "NotIn", ("other",)),
    "DoesNotExist": specs.Requirement("release", "DoesNotExist"),
}


@pytest.mark.parametrize("requirement", ABSENCE_SELECTORS.values(), ids=ABSENCE_SELECTORS.keys())
def test_pod_without_labels_is_not_protected_by_a_pdb_selecting_by_absence_as_kube_scheduler(
    requirement: specs.Requirement,
) -> None:
    # The selector alone matches a pod with no labels, but kube-scheduler's
    # filterPodsWithPDBViolation skips such a pod before any PDB is looked at. So "bare" is not
    # reprieved ahead of "labeled" (matched: it has labels, none of them app=other or release)
    # and, the less protected, goes although it is the more important (tests/integration/
    # test_preemption_parity_budgets.py shows the real kube-scheduler v1.34.4 doing the same).
    selector = specs.LabelSelector((requirement,))
    guard = evaluator.DisruptionBudget(
        namespace="default", selector=selector, disruptions_allowed=0
    )
    bare = pod("bare", 5, cpu=2)
    labeled = pod("labeled", 0, cpu=2, labels={"app": "web"})
    assert selector.matches(bare.labels)
    assert not guard.matches(bare)
    assert guard.matches(labeled)
    outcome = run(pod("vip", 10, cpu=2), node("n", bare, labeled), budgets=[guard])
    assert names(outcome.victims) == ["bare"]
    assert outcome.pdb_violations == 0


def test_node_of_an_unlabeled_victim_has_no_pdb_violation_under_a_notin_pdb() -> None:
    # The node choice follows: "a"'s victim has no labels (0 violations), "b"'s is matched (1);
    # by priority alone b would win (10 < 20).
    guard = evaluator.DisruptionBudget(
        namespace="default",
        selector=specs.LabelSelector((ABSENCE_SELECTORS["NotIn"],)),
        disruptions_allowed=0,
    )
    a = node("a", pod("bare", 20, cpu=4))
    b = node("b", pod("labeled", 10, cpu=4, labels={"app": "web"}))
    outcome = run(pod("vip", 1000, cpu=4), a, b, budgets=[guard])
    assert outcome.node == "a"
    assert names(outcome.victims) == ["bare"]
    assert {c.node: c.pdb_violations for c in outcome.candidates} == {"a": 0, "b": 1}


# Choosing the node ------------------------------------------------------------------------------


def test_fewest_pdb_violations_wins_over_lower_priority() -> None:
    a = node("a", pod("guarded", 1, cpu=4, labels={"app": "db"}))
    b = node("b", pod("important", 5, cpu=4))
    outcome = run(pod("vip", 10, cpu=4), a, b, budgets=[budget(0)])
    assert outcome.node == "b"
    by_node = {c.node: c.pdb_violations for c in outcome.candidates}
    assert by_node == {"a": 1, "b": 0}


def test_lowest_highest_victim_priority_wins_over_the_sum() -> None:
    a = node("a", pod("a1", 3, cpu=4))
    b = node("b", pod("b1", 2, cpu=2), pod("b2", 2, cpu=2))
    assert run(pod("vip", 10, cpu=4), a, b).node == "b"


def test_smallest_priority_sum_wins() -> None:
    a = node("a", pod("a1", 3, cpu=2), pod("a2", 1, cpu=2))
    b = node("b", pod("b1", 3, cpu=2), pod("b2", 2, cpu=2))
    assert run(pod("vip", 10, cpu=4), a, b).node == "a"


def test_sum_counts_each_priority_above_minus_two_to_the_31() -> None:
    # Plain sums would prefer two pods at -5 (-10) to one (-5); kube-scheduler does not.
    a = node("a", pod("a1", -5, cpu=2), pod("a2", -5, cpu=2))
    b = node("b", pod("b1", -5, cpu=4))
    assert run(pod("vip", 10, cpu=4), a, b).node == "b"


def test_fewest_victims_wins_when_sums_are_equal() -> None:
    # 5 + 2^31 == (5 + 2^31) + (-2^31 + 2^31): equal sums; the start times favour "b".
    a = node("a", pod("a1", 5, cpu=4, start=0))
    b = node("b", pod("b1", 5, cpu=2, start=9), pod("b2", -(2**31), cpu=2, start=9))
    assert run(pod("vip", 10, cpu=4), a, b).node == "a"


def test_latest_start_of_the_most_important_victims_wins() -> None:
    a = node("a", pod("a1", 3, cpu=4, start=1))
    b = node("b", pod("b1", 3, cpu=4, start=2))
    assert run(pod("vip", 10, cpu=4), a, b).node == "b"


def test_start_compared_is_the_earliest_among_the_most_important() -> None:
    # a's most important victims started at 12:00 and 09:00 (earliest 09:00), b's at 10:00.
    a = node("a", pod("a1", 3, cpu=2, start=2), pod("a2", 3, cpu=2, start=-1))
    b = node("b", pod("b1", 3, cpu=2, start=0), pod("b2", 3, cpu=2, start=0))
    assert run(pod("vip", 10, cpu=4), a, b).node == "b"


def test_start_of_less_important_victims_is_ignored() -> None:
    # Over all victims b would win (its earliest is later); over the priority-3 ones, a wins.
    a = node("a", pod("a1", 3, cpu=2, start=0), pod("a2", 1, cpu=2, start=-2))
    b = node("b", pod("b1", 3, cpu=2, start=-1), pod("b2", 1, cpu=2, start=-1.5))
    assert run(pod("vip", 10, cpu=4), a, b).node == "a"


def _hash_winner(uid: str, node_names: Sequence[str]) -> str:
    hashes = np.array([hashing.stable_hash_u64(n) for n in node_names], dtype=np.uint64)
    ties = reference.mix(hashes, hashing.stable_hash_u64(uid))
    return node_names[int(np.argmax(ties))]


def test_full_tie_goes_to_the_kernels_stable_hash_not_list_order() -> None:
    node_names = [f"node-{i}" for i in range(6)]
    winners = set()
    for uid in (f"vip-{i}" for i in range(20)):
        preemptor = evaluator.Pod(
            uid=uid, namespace="default", name="vip", priority=10, requests={"cpu": 4}
        )
        nodes = [node(n, pod(f"{n}-victim", 1, cpu=4)) for n in node_names]
        chosen = {
            run(preemptor, *order).node for order in (nodes, nodes[::-1], nodes[2:] + nodes[:2])
        }
        assert chosen == {_hash_winner(uid, node_names)}
        winners |= chosen
    assert len(winners) > 1  # the hash spreads ties, unlike "first in the list"


# Terminating pods ------------------------------------------------------------------------------


def test_terminating_pods_are_victims_again_as_in_kube_scheduler() -> None:
    n = node("n", pod("leaving", 1, cpu=2, deleting=True), pod("running", 1, cpu=2))
    outcome = run(pod("vip", 10, cpu=4), n)
    assert names(outcome.victims) == ["leaving", "running"]


def test_a_terminating_pod_counts_with_its_priority_when_nodes_are_compared() -> None:
    leaving = node("a", pod("leaving", 1, cpu=4, deleting=True))
    running = node("b", pod("running", 0, cpu=4))
    outcome = run(pod("vip", 10, cpu=4), leaving, running)
    # kube-scheduler's order: the lower highest victim priority wins, terminating or not.
    assert outcome.node == "b"
    assert names(outcome.victims) == ["running"]


def test_terminating_pods_of_higher_priority_still_take_room() -> None:
    n = node("n", pod("leaving", 20, cpu=2, deleting=True), pod("low", 1, cpu=2))
    outcome = run(pod("vip", 10, cpu=4), n)
    assert outcome.node is None


# Eligibility -----------------------------------------------------------------------------------


def test_preemption_policy_never() -> None:
    fits = SumFits()
    n = node("n", pod("low", 0, cpu=4))
    outcome = evaluator.preempt(
        pod("vip", 10, cpu=4, preemption_policy=evaluator.NEVER), [n], unschedulable(n), [], fits
    )
    assert outcome.node is None
    assert outcome.message == "preemption: not eligible due to preemptionPolicy=Never."
    assert not outcome.clear_nomination
    assert fits.asked == []


def test_not_again_while_victims_terminate_on_the_nominated_node() -> None:
    victim = pod("victim", 0, cpu=4, deleting=True, preempted=True)
    nominated = node("nominated", victim)
    other = node("other", pod("low", 0, cpu=4))
    preemptor = pod("vip", 10, cpu=4, nominated_node="nominated")
    outcome = run(preemptor, nominated, other)
    assert outcome.node is None
    assert outcome.message == (
        "preemption: not eligible due to a terminating pod on the nominated node."
    )
    # Eligible again when the nominated node can no longer help ...
    statuses = unschedulable(nominated, other)
    statuses["nominated"] = evaluator.NodeStatus(code=evaluator.Code.UNRESOLVABLE)
    assert run(preemptor, nominated, other, statuses=statuses).node == "other"
    # ... or when the terminating pod was not preempted by a scheduler, or is not below it.
    plain = node("nominated", pod("victim", 0, cpu=4, deleting=True))
    assert run(preemptor, plain, other).node is not None
    above = node("nominated", pod("victim", 10, cpu=4, deleting=True, preempted=True))
    assert run(preemptor, above, other).node == "other"


# Candidates and the message --------------------------------------------------------------------


def test_only_unschedulable_nodes_are_searched() -> None:
    fits = SumFits()
    nodes = [node(n, pod(f"{n}-low", 0, cpu=4)) for n in ("a", "b", "c")]
    statuses = {
        "a": evaluator.NodeStatus(
            code=evaluator.Code.UNRESOLVABLE, reasons=("node(s) were unschedulable",)
        ),
        "b": evaluator.NodeStatus(code=evaluator.Code.UNSCHEDULABLE, reasons=("Insufficient cpu",)),
    }
    outcome = evaluator.preempt(pod("vip", 10, cpu=4), nodes, statuses, [], fits)
    assert outcome.node == "b"
    assert set(fits.asked) == {"b"}


def test_every_candidate_is_searched_and_reported() -> None:
    nodes = [node(f"n{i:02}", pod(f"low{i}", i % 3, cpu=4)) for i in range(30)]
    outcome = run(pod("vip", 10, cpu=4), *nodes)
    assert [c.node for c in outcome.candidates] == [n.name for n in nodes]
    assert outcome.node is not None
    assert names(outcome.victims)[0].startswith("low")
    assert {c.victims[0].priority for c in outcome.candidates} == {0, 1, 2}
    assert next(c for c in outcome.candidates if c.node == outcome.node).victims[0].priority == 0


def test_no_candidate_message_in_kube_schedulers_words() -> None:
    nodes = [
        node("equal", pod("peer", 10, cpu=4)),
        node("small", pod("low", 0, cpu=1), cpu=2),
        node("tainted", pod("low", 0, cpu=4)),
        node("cordoned", pod("low", 0, cpu=4)),
    ]
    statuses = unschedulable(nodes[0], nodes[1])
    outcome = run(pod("vip", 10, cpu=4), *nodes, statuses=statuses)
    assert outcome.node is None
    assert outcome.clear_nomination
    assert outcome.message == (
        "preemption: 0/4 nodes are available: 1 Insufficient cpu, "
        "1 No preemption victims found for incoming pod, "
        "2 Preemption is not helpful for scheduling."
    )


def test_explains_gives_the_reasons_with_victims_removed() -> None:
    def explains(
        p: evaluator.Pod, n: evaluator.NodePods, remaining: Sequence[evaluator.Pod]
    ) -> Sequence[str]:
        return ("Insufficient memory",)

    n = node("n", pod("low", 0, cpu=1), cpu=2)
    outcome = evaluator.preempt(
        pod("vip", 10, cpu=4), [n], unschedulable(n), [], SumFits(), explains
    )
    assert outcome.message == "preemption: 0/1 nodes are available: 1 Insufficient memory."


def test_no_unschedulable_node_at_all() -> None:
    n = node("n", pod("low", 0, cpu=4))
    outcome = run(pod("vip", 10, cpu=4), n, statuses={})
    assert outcome.message == (
        "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    )


def test_a_node_that_needs_no_victim_is_an_error_as_in_kube_scheduler() -> None:
    roomy = node("roomy", pod("low", 0, cpu=1), cpu=8)
    outcome = run(pod("vip", 10, cpu=1), roomy)
    assert outcome.node is None
    assert outcome.message == 'preemption: expected at least one victim pod on node "roomy"'
    # Another node with a real solution wins, and the error is only recorded.
    full = node("full", pod("low", 0, cpu=4))
    outcome = run(pod("vip", 10, cpu=4), roomy, full)
    assert outcome.node == "full"


def test_no_nodes() -> None:
    assert run(pod("vip", 10)).message == "preemption: no nodes available"


# The policy's rules (spec.preemption) -----------------------------------------------------------

TEAM = "SchedulingPolicy team-a/web"


def test_an_exempt_pod_is_never_a_victim() -> None:
    # Without the rule "guaranteed" (priority 0) goes; exempt, it stays and "burstable" (priority
    # 5) goes in its place.
    guaranteed = pod("guaranteed", 0, cpu=2, qos=evaluator.GUARANTEED)
    burstable = pod("burstable", 5, cpu=2, qos=evaluator.BURSTABLE)
    n = node("n", guaranteed, burstable)
    assert names(run(pod("vip", 10, cpu=2), n).victims) == ["guaranteed"]
    exempt = node("n", dataclasses.replace(guaranteed, exempt=True), burstable)
    assert names(run(pod("vip", 10, cpu=2), exempt).victims) == ["burstable"]


def test_exempt_pods_take_their_room_in_the_fit_check() -> None:
    n = node("n", pod("kept", 0, cpu=3, exempt=True), pod("low", 0, cpu=1))
    outcome = run(pod("vip", 10, cpu=2), n)
    assert outcome.node is None
    assert outcome.rejected == {"n": ("Insufficient cpu",)}
    # Without the exemption both go and the pod fits.
    plain = node("n", pod("kept", 0, cpu=3), pod("low", 0, cpu=1))
    assert names(run(pod("vip", 10, cpu=2), plain).victims) == ["kept"]


def test_a_node_of_only_exempt_lower_pods_has_no_victims() -> None:
    n = node("n", pod("a", 0, cpu=2, exempt=True), pod("b", 1, cpu=2, exempt=True))
    outcome = run(pod("vip", 10, cpu=4), n)
    assert outcome.rejected == {"n": (evaluator.NO_VICTIMS,)}
    assert outcome.message == (
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    )


def test_same_namespace_keeps_other_tenants_pods() -> None:
    mine = pod("mine", 5, cpu=2, ns="team-a")
    theirs = pod("theirs", 0, cpu=2, ns="team-b")
    n = node("n", mine, theirs)
    preemptor = pod("vip", 10, cpu=2, ns="team-a")
    assert names(run(preemptor, n).victims) == ["theirs"]
    scoped = evaluator.Rules(same_namespace=True, source=TEAM)
    assert names(run(preemptor, n, rules=scoped).victims) == ["mine"]
    # A node holding only other tenants' pods is no candidate under the rule.
    other = node("other", pod("t1", 0, cpu=4, ns="team-b"))
    assert run(preemptor, other).node == "other"
    assert run(preemptor, other, rules=scoped).rejected == {"other": (evaluator.NO_VICTIMS,)}


def test_same_namespace_counts_other_tenants_pods_as_staying() -> None:
    n = node("n", pod("mine", 0, cpu=1, ns="team-a"), pod("theirs", 0, cpu=2, ns="team-b"))
    preemptor = pod("vip", 10, cpu=3, ns="team-a")
    assert run(preemptor, n).node == "n"
    outcome = run(preemptor, n, rules=evaluator.Rules(same_namespace=True))
    assert outcome.node is None
    assert outcome.rejected == {"n": ("Insufficient cpu",)}


def test_qos_order_evicts_best_effort_before_guaranteed() -> None:
    # Two priority-0 pods, either of which frees enough room. By kube-scheduler's order the one
    # started later goes ("guaranteed"); with QoSThenPriority the BestEffort one does.
    guaranteed = pod("guaranteed", 0, cpu=2, start=5, qos=evaluator.GUARANTEED)
    best_effort = pod("best-effort", 0, cpu=2, start=1, qos=evaluator.BEST_EFFORT)
    n = node("n", guaranteed, best_effort)
    assert names(run(pod("vip", 10, cpu=2), n).victims) == ["guaranteed"]
    ordered = run(pod("vip", 10, cpu=2), n, rules=evaluator.Rules(qos_order=True))
    assert names(ordered.victims) == ["best-effort"]


def test_qos_order_puts_the_class_before_priority() -> None:
    # A higher-priority BestEffort pod goes before a lower-priority Burstable one, which goes
    # before Guaranteed; an unknown class ranks as Burstable.
    pods = [
        pod("g", 1, cpu=1, qos=evaluator.GUARANTEED),
        pod("b", 2, cpu=1, qos=evaluator.BURSTABLE),
        pod("u", 1, cpu=1, qos=""),
        pod("e", 5, cpu=1, qos=evaluator.BEST_EFFORT),
    ]
    n = node("n", *pods)
    assert names(run(pod("vip", 10, cpu=1), n).victims) == ["u"]
    assert names(run(pod("vip", 10, cpu=1), n, rules=evaluator.Rules(qos_order=True)).victims) == [
        "e"
    ]
    assert names(run(pod("vip", 10, cpu=2), n).victims) == ["g", "u"]
    assert names(run(pod("vip", 10, cpu=2), n, rules=evaluator.Rules(qos_order=True)).victims) == [
        "u",
        "e",
    ]
    # Listed most important first by the same key.
    every = run(pod("vip", 10, cpu=4), n, rules=evaluator.Rules(qos_order=True))
    assert names(every.victims) == ["g", "b", "u", "e"]
    assert names(run(pod("vip", 10, cpu=4), n).victims) == ["e", "b", "g", "u"]


def test_qos_order_keeps_pdb_violating_pods_first_in_line_for_reprieve() -> None:
    # "guarded" is BestEffort but its budget allows no disruption: it is offered back first and
    # stays, so the Guaranteed pod goes even under QoSThenPriority.
    guarded = pod("guarded", 0, cpu=2, qos=evaluator.BEST_EFFORT, labels={"app": "db"})
    n = node("n", guarded, pod("guaranteed", 0, cpu=2, qos=evaluator.GUARANTEED))
    outcome = run(
        pod("vip", 10, cpu=2), n, budgets=[budget(0)], rules=evaluator.Rules(qos_order=True)
    )
    assert names(outcome.victims) == ["guaranteed"]
    assert outcome.pdb_violations == 0


def test_max_victims_rules_out_a_node_that_needs_more() -> None:
    many = node("many", *(pod(f"m{i}", 0, cpu=1) for i in range(4)))
    few = node("few", pod("f0", 3, cpu=2), pod("f1", 3, cpu=2))
    # kube-scheduler prefers the lower highest priority: 4 victims of priority 0 on "many".
    assert run(pod("vip", 10, cpu=4), many, few).node == "many"
    capped = run(
        pod("vip", 10, cpu=4), many, few, rules=evaluator.Rules(max_victims=2, source=TEAM)
    )
    assert capped.node == "few"
    assert names(capped.victims) == ["f0", "f1"]
    assert capped.rejected == {
        "many": (evaluator.cap_reason(evaluator.Rules(max_victims=2, source=TEAM)),)
    }


def test_beyond_the_cap_the_pod_waits_with_a_message_naming_it() -> None:
    nodes = [node(f"n{i}", *(pod(f"p{i}-{j}", 0, cpu=1) for j in range(4))) for i in range(3)]
    nodes.append(node("small", pod("s", 0, cpu=1), cpu=2))
    rules = evaluator.Rules(max_victims=3, source=TEAM)
    outcome = run(pod("vip", 10, cpu=4), *nodes, rules=rules)
    assert outcome.node is None
    assert outcome.clear_nomination
    assert outcome.message == (
        "preemption: 0/4 nodes are available: 1 Insufficient cpu, "
        "3 node(s) would need more than 3 victims "
        "(maxVictimsPerPod of SchedulingPolicy team-a/web)."
    )
    assert run(pod("vip", 10, cpu=4), *nodes, rules=evaluator.Rules(max_victims=4)).node is not None


def test_the_cap_counts_victims_after_the_reprieve() -> None:
    # 6 lower pods on the node, but only 2 must go.
    n = node("n", *(pod(f"p{i}", 0, cpu=1) for i in range(6)), cpu=6)
    outcome = run(pod("vip", 10, cpu=2), n, rules=evaluator.Rules(max_victims=2))
    assert len(outcome.victims) == 2
    assert run(pod("vip", 10, cpu=3), n, rules=evaluator.Rules(max_victims=2)).node is None


def test_cap_reason_without_a_source_and_a_cap_below_one() -> None:
    assert evaluator.cap_reason(evaluator.Rules(max_victims=1)) == (
        "node(s) would need more than 1 victims (maxVictimsPerPod)"
    )
    with pytest.raises(ValueError, match="max_victims"):
        evaluator.Rules(max_victims=0)


def test_no_rules_changes_nothing() -> None:
    n = node(
        "n", pod("a", 0, cpu=2, start=1, qos=evaluator.GUARANTEED), pod("b", 0, cpu=2, start=2)
    )
    assert run(pod("vip", 10, cpu=2), n, rules=evaluator.NO_RULES) == run(pod("vip", 10, cpu=2), n)
    search = evaluator.select_victims(pod("vip", 10, cpu=2), n, [], SumFits())
    assert search == evaluator.select_victims(
        pod("vip", 10, cpu=2), n, [], SumFits(), rules=evaluator.NO_RULES
    )


# Properties ------------------------------------------------------------------------------------

_victim_pods = st.lists(
    st.tuples(st.integers(-3, 12), st.integers(1, 4), st.integers(-5, 5), st.booleans()),
    max_size=7,
)


@settings(max_examples=150, deadline=None)
@given(
    cluster=st.lists(st.tuples(st.integers(4, 10), _victim_pods), min_size=1, max_size=4),
    priority=st.integers(0, 10),
    cpu=st.integers(1, 8),
    allowed=st.integers(0, 2),
)
def test_chosen_victims_are_minimal_and_lower_priority(
    cluster: list[tuple[int, list[tuple[int, int, int, bool]]]],
    priority: int,
    cpu: int,
    allowed: int,
) -> None:
    nodes = [
        node(
            f"n{i}",
            *(
                pod(f"p{i}-{j}", prio, size, start=start, labels={"app": "db"} if db else {})
                for j, (prio, size, start, db) in enumerate(pods)
            ),
            cpu=capacity,
        )
        for i, (capacity, pods) in enumerate(cluster)
    ]
    preemptor = pod("vip", priority, cpu)
    outcome = run(preemptor, *nodes, budgets=[budget(allowed)])
    fits = SumFits()
    for candidate in outcome.candidates:
        target = next(n for n in nodes if n.name == candidate.node)
        assert all(v.priority < priority for v in candidate.victims)
        kept = [p for p in target.pods if p not in candidate.victims]
        assert fits(preemptor, target, kept)
        for victim in candidate.victims:
            assert not fits(preemptor, target, [*kept, victim]), victim.name
    if outcome.node is None:
        # No node can make room with victims: nothing below the pod, no fit even with all of it
        # gone, or a fit with nothing gone (kube-scheduler's error).
        for n in nodes:
            lower = [p for p in n.pods if p.priority < priority]
            kept = [p for p in n.pods if p.priority >= priority]
            assert not lower or not fits(preemptor, n, kept) or fits(preemptor, n, n.pods)
        return
    chosen = next(c for c in outcome.candidates if c.node == outcome.node)
    assert all(
        (chosen.pdb_violations, chosen.victims[0].priority)
        <= (c.pdb_violations, c.victims[0].priority)
        for c in outcome.candidates
    )


def test_the_choice_does_not_depend_on_node_or_pod_order() -> None:
    base = [
        node("a", pod("a1", 1, cpu=2, start=1), pod("a2", 1, cpu=2, start=1)),
        node("b", pod("b1", 1, cpu=2, start=1), pod("b2", 1, cpu=2, start=1)),
    ]
    results = set()
    for order in itertools.permutations(base):
        shuffled = [
            evaluator.NodePods(name=n.name, allocatable=n.allocatable, pods=n.pods[::-1])
            for n in order
        ]
        for nodes in (list(order), shuffled):
            outcome = run(pod("vip", 10, cpu=2), *nodes)
            results.add((outcome.node, tuple(names(outcome.victims))))
    assert len(results) == 1


_QOS = st.sampled_from(["", *evaluator.QOS_CLASSES])
_rule_pods = st.lists(
    st.tuples(
        st.integers(-3, 12),  # priority
        st.integers(1, 4),  # cpu
        st.integers(-5, 5),  # start
        st.booleans(),  # PDB-guarded
        _QOS,
        st.booleans(),  # exempt
        st.sampled_from(["team-a", "team-b"]),
        st.booleans(),  # deleting
    ),
    max_size=7,
)


@settings(max_examples=200, deadline=None)
@given(
    cluster=st.lists(st.tuples(st.integers(4, 10), _rule_pods), min_size=1, max_size=4),
    priority=st.integers(0, 10),
    cpu=st.integers(1, 8),
    allowed=st.integers(0, 2),
    qos_order=st.booleans(),
    same_namespace=st.booleans(),
    cap=st.none() | st.integers(1, 4),
)
def test_under_any_rules_victims_are_minimal_allowed_and_within_the_cap(
    cluster: list[tuple[int, list[tuple[int, int, int, bool, str, bool, str, bool]]]],
    priority: int,
    cpu: int,
    allowed: int,
    qos_order: bool,
    same_namespace: bool,
    cap: int | None,
) -> None:
    nodes = [
        node(
            f"n{i}",
            *(
                pod(
                    f"p{i}-{j}",
                    prio,
                    size,
                    start=start,
                    ns=ns,
                    labels={"app": "db"} if db else {},
                    qos=qos,
                    exempt=exempt,
                    deleting=deleting,
                )
                for j, (prio, size, start, db, qos, exempt, ns, deleting) in enumerate(pods)
            ),
            cpu=capacity,
        )
        for i, (capacity, pods) in enumerate(cluster)
    ]
    rules = evaluator.Rules(
        qos_order=qos_order, same_namespace=same_namespace, max_victims=cap, source=TEAM
    )
    preemptor = pod("vip", priority, cpu, ns="team-a")
    outcome = run(preemptor, *nodes, budgets=[budget(allowed, ns="team-a")], rules=rules)
    fits = SumFits()
    key = evaluator.victim_order(rules)
    for candidate in outcome.candidates:
        target = next(n for n in nodes if n.name == candidate.node)
        assert cap is None or len(candidate.victims) <= cap
        for victim in candidate.victims:
            assert victim.priority < priority
            assert not victim.exempt
            assert not same_namespace or victim.namespace == "team-a"
        assert list(candidate.victims) == sorted(candidate.victims, key=key)
        # Minimal: every non-victim stays, and no victim could be given back.
        kept = [p for p in target.pods if p not in candidate.victims]
        assert fits(preemptor, target, kept)
        for victim in candidate.victims:
            assert not fits(preemptor, target, [*kept, victim]), victim.name
    if outcome.node is not None:
        assert outcome.node in {c.node for c in outcome.candidates}
    cap_text = evaluator.cap_reason(rules)
    for name, reasons in outcome.rejected.items():
        if cap_text in reasons:
            assert cap is not None, name
    # The rules only ever take nodes away: every candidate is one without them too.
    unruled = [
        evaluator.NodePods(
            name=n.name,
            allocatable=n.allocatable,
            pods=tuple(dataclasses.replace(p, exempt=False) for p in n.pods),
        )
        for n in nodes
    ]
    free = run(preemptor, *unruled, budgets=[budget(allowed, ns="team-a")])
    assert {c.node for c in outcome.candidates} <= {c.node for c in free.candidates}
