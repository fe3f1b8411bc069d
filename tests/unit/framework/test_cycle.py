"""Tests for plumb.framework.cycle and diagnoses: where a pod lands, and what the scheduler says
when it lands nowhere (kube-scheduler's "0/N nodes are available" text)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from plumb.backend.cache import clustercache as cache_module
from plumb.framework import cycle, diagnoses
from plumb_dev.testing.builders import make_node, make_pod
from tests.support.small_clusters import cluster, pod, schedule

# Messages -------------------------------------------------------------------------------------


def test_pod_too_big_for_every_node() -> None:
    c = cluster(make_node(f"n{i}").capacity(cpu="4") for i in range(3))
    decision = schedule(c, make_pod("big").req(cpu="5"))
    assert decision.node is None
    assert decision.message == "0/3 nodes are available: 3 Insufficient cpu."
    # Five cores where no node has as many: no eviction can help (UnschedulableAndUnresolvable).
    assert (decision.feasible, decision.total, decision.unresolvable) == (0, 3, True)


def test_reasons_are_counted_and_sorted_as_strings() -> None:
    c = cluster(
        [
            make_node("full").capacity(cpu="8", pods=1),
            make_node("small-1").capacity(cpu="1"),
            make_node("small-2").capacity(cpu="1"),
        ],
        bound=[make_pod("resident").node("full")],
    )
    decision = schedule(c, make_pod("web").req(cpu="2"))
    assert decision.message == "0/3 nodes are available: 1 Too many pods, 2 Insufficient cpu."


def test_ten_sorts_before_two() -> None:
    nodes = [make_node(f"full-{i}").capacity(pods=1) for i in range(10)]
    nodes += [make_node(f"small-{i}").capacity(cpu="1") for i in range(2)]
    residents = [make_pod(f"resident-{i}").node(f"full-{i}") for i in range(10)]
    decision = schedule(cluster(nodes, residents), make_pod("web").req(cpu="2"))
    assert decision.message == "0/12 nodes are available: 10 Too many pods, 2 Insufficient cpu."


def test_a_node_short_of_several_resources_counts_for_each() -> None:
    c = cluster(
        [make_node("tiny").capacity(cpu="1", memory="1Gi", pods=1)],
        bound=[make_pod("resident").node("tiny")],
    )
    decision = schedule(c, make_pod("web").req(cpu="2", memory="2Gi"))
    assert decision.message == (
        "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory, 1 Too many pods."
    )


def test_no_nodes() -> None:
    decision = schedule(cluster([]), make_pod("web").req(cpu="1"))
    assert decision.node is None
    assert decision.message == "no nodes available to schedule pods"
    assert decision.total == 0


def test_resource_no_node_has_ever_reported() -> None:
    c = cluster([make_node("a"), make_node("b")])
    decision = schedule(c, make_pod("web").req(cpu="1", **{"example.com/widget": 1}))
    assert decision.message == "0/2 nodes are available: 2 Insufficient example.com/widget."


def test_extended_resource_only_some_nodes_have() -> None:
    c = cluster([make_node("cpu-only"), make_node("gpu").capacity(**{"nvidia.com/gpu": 1})])
    assert schedule(c, make_pod("train").req(**{"nvidia.com/gpu": 1})).node == "gpu"
    decision = schedule(c, make_pod("train").req(**{"nvidia.com/gpu": 2}))
    assert decision.message == "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."


def test_overcommitted_node_still_takes_a_pod_that_requests_nothing() -> None:
    # Another scheduler put 2 cpu on a 1-cpu node; kube checks only what the pod requests.
    c = cluster(
        [make_node("n1").capacity(cpu="1", pods=3)],
        bound=[make_pod("hog").req(cpu="2").node("n1")],
    )
    assert schedule(c, make_pod("idle")).node == "n1"
    decision = schedule(c, make_pod("tiny").req(cpu="100m"))
    assert decision.message == "0/1 nodes are available: 1 Insufficient cpu."


def test_pod_count_limit_applies_to_a_pod_that_requests_nothing() -> None:
    c = cluster(
        [make_node("n1").capacity(cpu="1", pods=3)],
        bound=[make_pod(f"p{i}").node("n1") for i in range(3)],
    )
    decision = schedule(c, make_pod("idle"))
    assert decision.node is None
    assert decision.message == "0/1 nodes are available: 1 Too many pods."


def test_pod_with_a_problem_is_unresolvable() -> None:
    c = cluster([make_node("n1")])
    bad = pod(make_pod("web").req(cpu="one"), "u1")
    decision = cycle.schedule(bad, c.snapshot(), c)
    assert decision.node is None
    assert decision.unresolvable
    assert decision.message == bad.problem
    assert "'one'" in decision.message


def test_requests_summing_past_int64_are_insufficient_not_a_crash() -> None:
    c = cluster([make_node("n1")])
    decision = schedule(c, make_pod("huge").req(memory="8Ei").container("more", memory="8Ei"))
    assert decision.message == "0/1 nodes are available: 1 Insufficient memory."


def test_feasible_counts_the_nodes_that_fit() -> None:
    c = cluster([make_node("a").capacity(cpu="1"), make_node("b"), make_node("c")])
    decision = schedule(c, make_pod("web").req(cpu="2"))
    assert decision.node in {"b", "c"}
    assert (decision.feasible, decision.total) == (2, 3)


# Diagnosis ------------------------------------------------------------------------------------


def test_diagnosis_counts_reasons_over_nodes() -> None:
    diagnosis = diagnoses.Diagnosis.count(
        4, [["Insufficient cpu"], ["Insufficient cpu", "Too many pods"], [], ["Insufficient cpu"]]
    )
    assert dict(diagnosis.reasons) == {"Insufficient cpu": 3, "Too many pods": 1}
    assert diagnosis.message() == "0/4 nodes are available: 1 Too many pods, 3 Insufficient cpu."


def test_diagnosis_of_no_nodes() -> None:
    assert diagnoses.Diagnosis.count(0, []).message() == diagnoses.NO_NODES_AVAILABLE


# Choice ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("resident", [{"cpu": "1"}, {"memory": "4Gi"}])
def test_prefers_the_emptier_node(resident: dict[str, str]) -> None:
    c = cluster(
        [make_node("busy"), make_node("idle")],
        bound=[make_pod("resident").req(**resident).node("busy")],
    )
    picks = {schedule(c, make_pod("web").req(cpu="100m"), f"u{i}").node for i in range(20)}
    assert picks == {"idle"}


def test_prefers_the_emptier_node_by_share_not_by_amount() -> None:
    # After placing the pod, "big" has 3 of 8 cpus free (37%) and "small" 1 of 2 (50%), though
    # "big" has more cpus free. Memory in the same shares: BalancedAllocation scores both
    # nodes alike (perfectly balanced, with the pod and without), whatever the release.
    c = cluster(
        [
            make_node("big").capacity(cpu="8", memory="32Gi"),
            make_node("small").capacity(cpu="2", memory="8Gi"),
        ],
        bound=[make_pod("resident").req(cpu="4", memory="16Gi").node("big")],
    )
    assert schedule(c, make_pod("web").req(cpu="1", memory="4Gi")).node == "small"


def test_ties_spread_by_pod_uid_and_repeat_for_the_same_uid() -> None:
    nodes = [make_node(f"n{i}") for i in range(4)]
    c = cluster(nodes)
    picks = {
        uid: schedule(c, make_pod("web").req(cpu="1"), uid).node
        for uid in (f"uid-{i}" for i in range(40))
    }
    assert set(picks.values()) == {"n0", "n1", "n2", "n3"}
    # The same uid picks the same node, whatever the pod's name and however the cache was built.
    again = cluster(reversed(nodes))
    for uid, node in picks.items():
        assert schedule(again, make_pod("other-name").req(cpu="1"), uid).node == node


def test_same_cluster_in_any_order_gives_the_same_placements() -> None:
    def build(order: list[int]) -> cache_module.Cache:
        sizes = ["2", "4", "4", "8", "4", "2", "16", "4"]
        return cluster(make_node(f"node-{i}").capacity(cpu=sizes[i], memory="16Gi") for i in order)

    orders = [list(range(8)), list(reversed(range(8)))]
    for seed in range(3):
        shuffled = list(range(8))
        random.Random(seed).shuffle(shuffled)
        orders.append(shuffled)

    runs = []
    for order in orders:
        c = build(order)
        placements = []
        for i in range(60):
            p = pod(make_pod(f"p{i}").req(cpu="250m", memory=f"{(i % 4) + 1}00Mi"), f"uid-{i}")
            decision = cycle.schedule(p, c.snapshot(), c)
            assert decision.node is not None
            c.assume(p, decision.node)
            placements.append(decision.node)
        runs.append(placements)
    assert all(run == runs[0] for run in runs)
    assert len(Counter(runs[0])) >= 4


@pytest.mark.parametrize("index", [0, 59, 60, 69])
def test_every_resource_is_checked_however_many_the_cluster_has(index: int) -> None:
    # 4 base columns + 70 extended: more columns than an int64 bitmask has bits.
    widgets = {f"example.com/w{i:02d}": 1 for i in range(70)}
    c = cluster([make_node("n1").capacity(**widgets)])
    name = f"example.com/w{index:02d}"
    assert schedule(c, make_pod("fits").req(**{name: 1})).node == "n1"
    decision = schedule(c, make_pod("greedy").req(**{name: 2}))
    assert decision.node is None
    assert decision.message == f"0/1 nodes are available: 1 Insufficient {name}."


def test_a_pod_may_request_60_resources_besides_cpu_memory_and_pods() -> None:
    widgets = {f"example.com/w{i:02d}": 1 for i in range(61)}
    c = cluster([make_node("n1").capacity(**widgets)])
    some = dict(list(widgets.items())[:60])
    assert schedule(c, make_pod("many").req(cpu="1", memory="1Gi", **some)).node == "n1"
    decision = schedule(c, make_pod("too-many").req(**widgets))
    assert decision.node is None
    assert decision.unresolvable
    assert decision.message == (
        "the pod requests 61 resources besides cpu, memory and pods; plumb checks at most 60"
    )
