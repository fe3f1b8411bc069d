"""Preemption side by side, which nodes are searched: only those that deleting pods can cure
(host ports, existing pods' anti-affinity, topology spread, but not taints, selectors or a pod
too big), and the FailedScheduling message when nothing is deleted; under plumb and under the
real kube-scheduler of the session's release (v1.34.4 to v1.37.2), as test_preemption_parity.py
describes.
"""

from __future__ import annotations

import pytest

from plumb_dev.testing import builders
from plumb_dev.testing.builders import HOSTNAME_LABEL, ZONE_LABEL
from tests.support.preemption_scenes import (
    Occupant,
    Scene,
    scene_fixture,  # noqa: F401
)
from tests.support.preemption_steps import (
    ABOVE_PREEMPTOR,
    INSUFFICIENT_CPU,
    PREEMPTOR_PRIORITY,
)
from tests.support.side_by_side import (
    NO_VICTIMS,
    NOT_HELPFUL,
    scheduler_fixture,  # noqa: F401
)

# The longer side-by-side suite: `make test-long` (test_preemption_parity.py stays in `make test`).
pytestmark = [pytest.mark.integration, pytest.mark.long]

_AFFINITY = "node(s) didn't match pod affinity rules"
_SPREAD = "node(s) didn't match pod topology spread constraints"
_PORTS = "node(s) didn't have free ports for the requested pod ports"
_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
_SELECTOR = "node(s) didn't match Pod's node affinity/selector"
_TAINTS = "node(s) had untolerated taint(s)"


def _tainted_and_hdd(scene: Scene) -> list[Occupant | builders.PodBuilder]:
    """Adds nodes "a-taint" (disk=ssd, tainted dedicated=x NoSchedule) and "b-hdd" (disk=hdd)
    of 2 cpu; returns their occupants: a 2-cpu pod of priority 0 on each, the one on a-taint
    tolerating its taint."""
    taint = scene.add_node(
        builders.make_node(f"{scene.namespace}-a-taint")
        .capacity(cpu="2")
        .label("disk", "ssd")
        .taint("dedicated", "x")
    )
    hdd = scene.add_node(
        builders.make_node(f"{scene.namespace}-b-hdd").capacity(cpu="2").label("disk", "hdd")
    )
    tolerating = (
        scene.pod("taint-0", "2", 0)
        .node_selector(HOSTNAME_LABEL, taint)
        .toleration("dedicated", value="x", effect="NoSchedule")
    )
    return [tolerating, Occupant("hdd-0", hdd, 0, cpu="2")]


def test_only_nodes_that_removing_pods_can_cure_are_searched(scene: Scene) -> None:
    """Three nodes of 2 cpu labelled disk=ssd or hdd, each full with one 2-cpu pod: "a-taint"
    (ssd, tainted dedicated=x NoSchedule; its pod, priority 0, tolerates it), "b-hdd" (hdd, pod
    of priority 0) and "c-ssd" (ssd, pod of priority 10). The preemptor asks 2 cpu on
    disk=ssd without the toleration. The taint and the selector are UnschedulableAndUnresolvable:
    no deletion cures them, so only c-ssd is searched although its victim has the higher
    priority."""
    unresolvable = _tainted_and_hdd(scene)
    ssd = scene.add_node(
        builders.make_node(f"{scene.namespace}-c-ssd").capacity(cpu="2").label("disk", "ssd")
    )
    scene.stage([*unresolvable, Occupant("ssd-10", ssd, 10, cpu="2")])
    histogram = f"0/3 nodes are available: 1 {INSUFFICIENT_CPU}, 1 {_SELECTOR}, 1 {_TAINTS}."
    outcome = scene.preempt(scene.preemptor("2").node_selector("disk", "ssd"), victims=1)
    assert outcome == scene.preempted(deleted={"ssd-10"}, node=ssd, histogram=histogram)


def test_a_host_port_is_freed_by_deleting_the_pod_that_holds_it(scene: Scene) -> None:
    """Two nodes of 4 cpu with room to spare, each with a 1-cpu pod holding host port 8080:
    priority 10 on "a", 0 on "b". The preemptor wants port 8080; only deleting a holder frees
    it, and b's holder has the lower priority: b."""
    a, b = scene.add_nodes("a", "b", cpu="4")
    scene.stage(
        [
            scene.pod(name, "1", priority).node_selector(HOSTNAME_LABEL, node).host_port(8080)
            for name, node, priority in (("a-port-10", a, 10), ("b-port-0", b, 0))
        ]
    )
    histogram = f"0/2 nodes are available: 2 {_PORTS}."
    outcome = scene.preempt(scene.preemptor("1").host_port(8080), victims=1)
    assert outcome == scene.preempted(deleted={"b-port-0"}, node=b, histogram=histogram)


def test_an_existing_pods_anti_affinity_is_cured_by_deleting_that_pod(scene: Scene) -> None:
    """Two nodes of 2 cpu: on "a" a small pod "guard" (priority 0, 500m) whose required
    anti-affinity keeps app=web pods off its node; "b" full with a 2-cpu pod of priority 10.
    The preemptor (app=web, 1 cpu) fits neither; either can be cured by one deletion, and
    the guard's priority is the lower: the guard goes and the preemptor takes node a."""
    a, b = scene.add_nodes("a", "b")
    scene.stage(
        [
            scene.pod("guard", "500m", 0)
            .label("app", "guard")
            .node_selector(HOSTNAME_LABEL, a)
            .affinity(HOSTNAME_LABEL, {"app": "web"}, anti=True),
            Occupant("b-10", b, 10, cpu="2"),
        ]
    )
    histogram = f"0/2 nodes are available: 1 {INSUFFICIENT_CPU}, 1 {_EXISTING_ANTI_AFFINITY}."
    outcome = scene.preempt(scene.preemptor("1").label("app", "web"), victims=1)
    assert outcome == scene.preempted(deleted={"guard"}, node=a, histogram=histogram)


def test_a_spread_constraint_is_cured_by_deleting_pods_of_the_crowded_zone(scene: Scene) -> None:
    """Zone "za" with node "a" (4 cpu) holding two app=web pods of priority 0 (1 cpu each);
    zone "zb" with node "b" (2 cpu) full with a 2-cpu pod of priority 10. The preemptor
    (app=web, 1 cpu) spreads over zones with maxSkew 1, DoNotSchedule: on a the skew would be
    3 - 0, on b there is no room. On a, with both web pods gone the skew is 1 - 0; reprieving
    either makes it 2 - 0, so both go (highest victim priority 0); on b its one pod goes
    (priority 10). Lower highest priority wins: a, both web pods."""
    a = scene.add_node(builders.make_node(f"{scene.namespace}-a").capacity(cpu="4").zone("za"))
    b = scene.add_node(builders.make_node(f"{scene.namespace}-b").capacity(cpu="2").zone("zb"))
    scene.stage(
        [
            Occupant("web-1", a, 0, labels={"app": "web"}),
            Occupant("web-2", a, 0, labels={"app": "web"}),
            Occupant("b-10", b, 10, cpu="2"),
        ]
    )
    preemptor = (
        scene.preemptor("1").label("app", "web").spread(ZONE_LABEL, 1, selector={"app": "web"})
    )
    histogram = f"0/2 nodes are available: 1 {INSUFFICIENT_CPU}, 1 {_SPREAD}."
    outcome = scene.preempt(preemptor, victims=2)
    assert outcome == scene.preempted(deleted={"web-1", "web-2"}, node=a, histogram=histogram)


def test_preemption_policy_never_deletes_nothing(scene: Scene) -> None:
    """One node of 2 cpu full with a 2-cpu pod of priority 0; the pod of priority 1000 with
    preemptionPolicy Never would fit were it gone, but may not preempt: it stays pending."""
    (node,) = scene.add_nodes("n")
    scene.stage([Occupant("low", node, 0, cpu="2")])
    preemptor = scene.preemptor("1").priority(PREEMPTOR_PRIORITY, preemption_policy="Never")
    assert scene.refused(preemptor) == scene.pending(
        f"0/1 nodes are available: 1 {INSUFFICIENT_CPU}.",
        "not eligible due to preemptionPolicy=Never.",
    )


def test_pods_of_equal_or_higher_priority_are_never_victims(scene: Scene) -> None:
    """Two nodes of 1 cpu, each full with a 1-cpu pod: priority 1000 (the preemptor's own) on
    "a", 2000 on "b". The preemptor (1000, 1 cpu) has no victim anywhere."""
    a, b = scene.add_nodes("a", "b", cpu="1")
    scene.stage([Occupant("equal", a, PREEMPTOR_PRIORITY), Occupant("higher", b, ABOVE_PREEMPTOR)])
    assert scene.refused(scene.preemptor("1")) == scene.pending(
        f"0/2 nodes are available: 2 {INSUFFICIENT_CPU}.",
        f"0/2 nodes are available: 2 {NO_VICTIMS}.",
    )


def test_preemption_is_not_helpful_where_no_deletion_cures_a_node(scene: Scene) -> None:
    """Two nodes of 2 cpu, each full with a 2-cpu pod of priority 0: "a-taint" tainted
    dedicated=x NoSchedule (its pod tolerates it), "b-hdd" labelled disk=hdd. The preemptor
    asks disk=ssd and does not tolerate the taint: neither node can be cured by deleting
    pods, so none is searched and nothing is deleted."""
    scene.stage(_tainted_and_hdd(scene))
    assert scene.refused(scene.preemptor("2").node_selector("disk", "ssd")) == scene.pending(
        f"0/2 nodes are available: 1 {_SELECTOR}, 1 {_TAINTS}.",
        f"0/2 nodes are available: 2 {NOT_HELPFUL}.",
    )


def test_a_pod_too_big_even_without_the_lower_priority_pods_preempts_nothing(scene: Scene) -> None:
    """Two nodes of 2 cpu, each with a 1-cpu pod of priority 0 and a 1-cpu pod of priority
    2000. The preemptor (1000) asks 2 cpu: deleting the priority-0 pod leaves 1 cpu, still
    too little, so no node is a candidate and the filters' reason is repeated inside the
    preemption sentence."""
    a, b = scene.add_nodes("a", "b")
    scene.stage(
        [
            Occupant("a-low", a, 0),
            Occupant("a-high", a, ABOVE_PREEMPTOR),
            Occupant("b-low", b, 0),
            Occupant("b-high", b, ABOVE_PREEMPTOR),
        ]
    )
    assert scene.refused(scene.preemptor("2")) == scene.pending(
        f"0/2 nodes are available: 2 {INSUFFICIENT_CPU}.",
        f"0/2 nodes are available: 2 {INSUFFICIENT_CPU}.",
    )


def test_the_preemptor_s_affinity_to_a_would_be_victim_is_not_preemption_s_business(
    scene: Scene,
) -> None:
    """One node of 2 cpu with two 1-cpu pods of priority 0, one labelled app=friend. The
    preemptor (1 cpu) requires pod affinity to app=friend on its node: it fails on cpu only.
    Preemption removes every lower-priority pod before it checks the preemptor fits, and then
    the friend is gone too, so the affinity fails and the node is no candidate (kube-scheduler
    deliberately does not try to keep a victim the preemptor has affinity to). Nothing is
    deleted; the affinity reason appears inside the preemption sentence."""
    (node,) = scene.add_nodes("n")
    scene.stage([Occupant("friend", node, 0, labels={"app": "friend"}), Occupant("other", node, 0)])
    assert scene.refused(
        scene.preemptor("1").affinity(HOSTNAME_LABEL, {"app": "friend"})
    ) == scene.pending(
        f"0/1 nodes are available: 1 {INSUFFICIENT_CPU}.",
        f"0/1 nodes are available: 1 {_AFFINITY}.",
    )


def test_each_node_s_reason_for_no_preemption_is_counted(scene: Scene) -> None:
    """Three nodes of 2 cpu, three reasons: "a-taint" (untolerated taint: not searched),
    "b-equal" full with a 2-cpu pod of the preemptor's own priority (no victim), "c-big" with
    a 1-cpu pod of priority 0 and one of priority 2000 (the preemptor, 2 cpu, still does not
    fit without the first). Nothing is deleted; the preemption sentence counts one node per
    reason."""
    scene.add_node(
        builders.make_node(f"{scene.namespace}-a-taint").capacity(cpu="2").taint("x", "y")
    )
    equal, big = scene.add_nodes("b-equal", "c-big")
    scene.stage(
        [
            Occupant("equal", equal, PREEMPTOR_PRIORITY, cpu="2"),
            Occupant("big-low", big, 0),
            Occupant("big-high", big, ABOVE_PREEMPTOR),
        ]
    )
    assert scene.refused(scene.preemptor("2")) == scene.pending(
        # The histogram is sorted as text, count included: "1 node(s)…" before "2 Insufficient…".
        f"0/3 nodes are available: 1 {_TAINTS}, 2 {INSUFFICIENT_CPU}.",
        f"0/3 nodes are available: 1 {INSUFFICIENT_CPU}, 1 {NO_VICTIMS}, 1 {NOT_HELPFUL}.",
    )
