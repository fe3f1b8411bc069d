"""Tests for plumb.preemption.search: preemption over a real cache, each "does it fit
without these pods" answered by the kernel, the reference one and the compiled one alike."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from plumb.backend.cache import clustercache as cache_module
from plumb.backend.cache import nominations
from plumb.backend.records import objects
from plumb.framework import emulation, scoring
from plumb.kernel import compiled, reference
from plumb.preemption import evaluator, search
from plumb_dev.testing.builders import HOSTNAME_LABEL, ZONE_LABEL, make_node, make_pod
from tests.support.small_clusters import cluster, pod

HIGH = 1000
V134 = scoring.Profile(kube=emulation.emulate(34))


def _search(c: cache_module.Cache, preemptor: objects.PodInfo, **options: object) -> search.Search:
    found = search.search(preemptor, c.snapshot(), c, reference.run, **options)
    assert found is not None
    return found


def _victims(found: search.Search) -> list[str]:
    return [v.name for v in found.victims]


def test_the_fewest_victims_on_the_node_needing_fewest() -> None:
    c = cluster(
        [make_node("a").capacity(cpu="4"), make_node("b").capacity(cpu="4")],
        bound=[
            *(make_pod(f"a{i}").node("a").req(cpu="1") for i in range(4)),
            make_pod("b-big").node("b").req(cpu="2"),
            make_pod("b-mid1").node("b").req(cpu="1").priority(5),
            make_pod("b-mid2").node("b").req(cpu="1").priority(5),
        ],
    )
    found = _search(c, pod(make_pod("vip").req(cpu="2").priority(HIGH), "vip"))
    assert found.outcome.node == "b"
    assert _victims(found) == ["b-big"]
    assert [cand.node for cand in found.outcome.candidates] == ["a", "b"]
    # v1.37's sentence goes on the FailedScheduling message; up to v1.36 nothing does.
    assert found.post_filter_message() == (
        "preemption: found a potential placement for pod on node b, preempting 1 victims"
    )
    before = _search(c, pod(make_pod("vip").req(cpu="2").priority(HIGH), "vip"), profile=V134)
    assert (before.outcome.node, _victims(before)) == ("b", ["b-big"])
    assert before.post_filter_message() == ""


def test_no_lower_priority_pods_gives_kube_schedulers_sentence() -> None:
    c = cluster(
        [make_node("a").capacity(cpu="2")],
        bound=[make_pod("peer").node("a").req(cpu="2").priority(HIGH)],
    )
    found = _search(c, pod(make_pod("vip").req(cpu="2").priority(HIGH), "vip"))
    assert found.outcome.node is None
    sentence = (
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    )
    assert found.post_filter_message() == sentence
    # Up to v1.36 DynamicResources' PostFilter speaks first.
    before = _search(c, pod(make_pod("vip").req(cpu="2").priority(HIGH), "vip"), profile=V134)
    assert before.post_filter_message() == f"no new claims to deallocate, {sentence}"


def test_unresolvable_nodes_are_not_searched() -> None:
    c = cluster(
        [
            make_node("a").capacity(cpu="4").taint("dedicated", "x"),
            make_node("b").capacity(cpu="4"),
            make_node("c").capacity(cpu="2"),
        ],
        bound=[
            make_pod("low").node("a").req(cpu="2"),
            make_pod("peer").node("b").req(cpu="2").priority(HIGH),
            make_pod("low-c").node("c").req(cpu="1"),
        ],
    )
    found = _search(c, pod(make_pod("vip").req(cpu="4").priority(HIGH), "vip"))
    assert found.outcome.node is None
    # a has a taint evicting nobody can cure; c has less cpu than vip asks, even empty (kube-
    # scheduler's NodeResourcesFit says UnschedulableAndUnresolvable); b is searched but holds
    # no pod of lower priority.
    assert found.searched == 1
    assert found.post_filter_message() == (
        "preemption: 0/3 nodes are available: "
        "1 No preemption victims found for incoming pod, 2 Preemption is not helpful for "
        "scheduling."
    )


def test_a_host_port_is_freed_by_evicting_its_holder() -> None:
    c = cluster(
        [make_node("a").capacity(cpu="4")],
        bound=[
            make_pod("web").node("a").req(cpu="1").host_port(8080),
            make_pod("other").node("a").req(cpu="1"),
        ],
    )
    found = _search(c, pod(make_pod("vip").req(cpu="1").host_port(8080).priority(HIGH), "vip"))
    assert found.outcome.node == "a"
    assert _victims(found) == ["web"]


def test_an_existing_pods_anti_affinity_is_cured_by_evicting_it() -> None:
    c = cluster(
        [make_node("a").capacity(cpu="4").label(ZONE_LABEL, "z")],
        bound=[
            make_pod("loner")
            .node("a")
            .req(cpu="1")
            .affinity(HOSTNAME_LABEL, {"app": "vip"}, anti=True),
            make_pod("other").node("a").req(cpu="1"),
        ],
    )
    found = _search(c, pod(make_pod("vip").label("app", "vip").req(cpu="1").priority(HIGH), "vip"))
    assert found.outcome.node == "a"
    assert _victims(found) == ["loner"]


def test_room_held_for_a_nominated_pod_counts() -> None:
    c = cluster(
        [make_node("a").capacity(cpu="4")],
        bound=[make_pod(f"low{i}").node("a").req(cpu="1") for i in range(4)],
    )
    other = pod(make_pod("first").req(cpu="2").priority(HIGH), "first")
    held = [nominations.Nomination(other, "a")]
    found = _search(c, pod(make_pod("vip").req(cpu="2").priority(HIGH), "vip"), held=held)
    # Two cores are promised to "first": vip needs all four pods gone.
    assert len(found.victims) == 4


# Property: the kernels agree, and the victims are minimal ------------------------------------

_NODES = st.integers(min_value=1, max_value=4)


@st.composite
def _scenarios(draw: st.DrawFn) -> tuple[cache_module.Cache, objects.PodInfo]:
    nodes = draw(_NODES)
    builders = [
        make_node(f"n{i}").capacity(cpu=str(draw(st.integers(2, 4)))).zone(f"z{i % 2}")
        for i in range(nodes)
    ]
    bound = []
    for i in range(nodes):
        for j in range(draw(st.integers(0, 4))):
            p = (
                make_pod(f"p{i}-{j}")
                .node(f"n{i}")
                .req(cpu=str(draw(st.integers(1, 2))))
                .priority(draw(st.sampled_from([0, 5, 10, HIGH])))
            )
            if draw(st.booleans()):
                p = p.label("app", "web")
            if draw(st.integers(0, 5)) == 0:
                p = p.affinity(HOSTNAME_LABEL, {"app": "vip"}, anti=True)
            bound.append(p)
    preemptor = make_pod("vip").label("app", "vip").req(cpu=str(draw(st.integers(2, 4))))
    preemptor = preemptor.priority(draw(st.sampled_from([5, 10, HIGH])))
    if draw(st.booleans()):
        preemptor = preemptor.spread(ZONE_LABEL, 1, selector={"app": "web"})
    return cluster(builders, bound), pod(preemptor, "vip")


def _minimal(c: cache_module.Cache, preemptor: objects.PodInfo, found: search.Search) -> None:
    """No victim can be spared: with any one of them back, the preemptor does not fit."""
    node = found.outcome.node
    assert node is not None
    plan = search.prepare(preemptor, c.snapshot(), c)
    assert plan is not None
    whatif = search.WhatIf(plan.compiled, reference.run, plan.pods_on, plan.namespace_labels)
    victims: Sequence[objects.PodInfo] = found.victims
    assert whatif.fits(node, victims)
    for spared in victims:
        rest = [v for v in victims if v.uid != spared.uid]
        assert not whatif.fits(node, rest), f"{spared.name} could stay"


@settings(max_examples=120, deadline=None)
@given(_scenarios())
def test_numba_equals_the_reference_and_the_victims_are_minimal(
    scenario: tuple[cache_module.Cache, objects.PodInfo],
) -> None:
    c, preemptor = scenario
    by_reference = search.search(preemptor, c.snapshot(), c, reference.run)
    by_numba = search.search(preemptor, c.snapshot(), c, compiled.run)
    if by_reference is None:
        assert by_numba is None
        return
    assert by_numba is not None
    assert by_numba.outcome == by_reference.outcome
    assert by_numba.victims == by_reference.victims
    outcome = by_reference.outcome
    if outcome.node is None:
        assert outcome.message.startswith(evaluator.PREFIX)
        return
    assert all(v.priority < preemptor.priority for v in by_reference.victims)
    _minimal(c, preemptor, by_reference)
