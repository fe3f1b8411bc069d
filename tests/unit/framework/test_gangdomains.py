"""Tests for plumb.framework.gangdomains: which topology domains a pod group is tried in, in
which order (least fragmentation first, ties by name), and a member confined to one."""

from __future__ import annotations

from plumb.framework import cycle, gangdomains
from plumb_dev.testing.builders import expr, make_node, make_pod
from tests.support.small_clusters import cluster, pod, schedule

ZONE = "topology.kubernetes.io/zone"


def test_the_tightest_domain_that_holds_the_whole_group_comes_first() -> None:
    # a: 16 cpu free, b: 6, c: 3. A group of 4 one-cpu members fits a and b; b is left with
    # the least room, so b is tried first; c cannot hold it and is not tried at all.
    c = cluster(
        [
            make_node("a1").zone("a").capacity(cpu="16", memory="64Gi"),
            make_node("b1").zone("b").capacity(cpu="6", memory="64Gi"),
            make_node("c1").zone("c").capacity(cpu="3", memory="64Gi"),
        ]
    )
    members = [pod(make_pod(f"w{i}").req(cpu="1"), f"w{i}") for i in range(4)]
    asked = gangdomains.demand(members, needed=4)
    rooms = gangdomains.candidates(c.snapshot(), ZONE, asked)
    assert [room.value for room in rooms] == ["b", "a"]
    assert [room.holds_all for room in rooms] == [True, True]
    assert rooms[0].free == (6000, 64 * 2**30)


def test_room_already_requested_counts_against_its_domain() -> None:
    # Both zones have 8 cpu, but 5 are taken in a: a is the tighter fit for a group of 3.
    c = cluster(
        [
            make_node("a1").zone("a").capacity(cpu="8"),
            make_node("b1").zone("b").capacity(cpu="8"),
        ],
        bound=[make_pod("resident").req(cpu="5").node("a1")],
    )
    members = [pod(make_pod(f"w{i}").req(cpu="1"), f"w{i}") for i in range(3)]
    rooms = gangdomains.candidates(c.snapshot(), ZONE, gangdomains.demand(members, 3))
    assert [(room.value, room.free[0]) for room in rooms] == [("a", 3000), ("b", 8000)]


def test_domains_that_hold_only_the_minimum_come_after_and_the_roomiest_first() -> None:
    # 6 members of 1 cpu, minimum 3: none of a (4), b (3), d (5) holds all six; c holds them.
    c = cluster(
        [
            make_node("a1").zone("a").capacity(cpu="4"),
            make_node("b1").zone("b").capacity(cpu="3"),
            make_node("c1").zone("c").capacity(cpu="7"),
            make_node("d1").zone("d").capacity(cpu="5"),
            make_node("e1").zone("e").capacity(cpu="2"),
        ]
    )
    members = [pod(make_pod(f"w{i}").req(cpu="1"), f"w{i}") for i in range(6)]
    rooms = gangdomains.candidates(c.snapshot(), ZONE, gangdomains.demand(members, 3))
    assert [room.value for room in rooms] == ["c", "d", "a", "b"]  # e holds not even 3


def test_equal_room_is_ordered_by_name_whatever_the_node_order() -> None:
    nodes = [make_node(f"{z}1").zone(z).capacity(cpu="4") for z in ("zb", "za", "zc")]
    members = [pod(make_pod(f"w{i}").req(cpu="1"), f"w{i}") for i in range(2)]
    for order in (nodes, list(reversed(nodes))):
        rooms = gangdomains.candidates(
            cluster(order).snapshot(), ZONE, gangdomains.demand(members, 2)
        )
        assert [room.value for room in rooms] == ["za", "zb", "zc"]


def test_nodes_without_the_label_and_cordoned_nodes_give_no_room() -> None:
    c = cluster(
        [
            make_node("bare").capacity(cpu="64"),  # no zone: in no domain
            make_node("a1").zone("a").capacity(cpu="2"),
            make_node("a2").zone("a").capacity(cpu="64").unschedulable(),
            make_node("b1").zone("b").capacity(cpu="4"),
        ]
    )
    members = [pod(make_pod(f"w{i}").req(cpu="1"), f"w{i}") for i in range(3)]
    rooms = gangdomains.candidates(c.snapshot(), ZONE, gangdomains.demand(members, 3))
    assert [(room.value, room.nodes) for room in rooms] == [("b", 1)]


def test_within_keeps_only_the_domain_the_placed_members_are_in() -> None:
    c = cluster([make_node(f"{z}1").zone(z).capacity(cpu="8") for z in ("a", "b")])
    members = [pod(make_pod("w0").req(cpu="1"), "w0")]
    rooms = gangdomains.candidates(c.snapshot(), ZONE, gangdomains.demand(members, 1), within="b")
    assert [room.value for room in rooms] == ["b"]


def test_demand_counts_the_smallest_members_for_the_minimum() -> None:
    members = [
        pod(make_pod("big").req(cpu="4", memory="1Gi"), "big"),
        pod(make_pod("small").req(cpu="1", memory="3Gi"), "small"),
        pod(make_pod("mid").req(cpu="2", memory="2Gi"), "mid"),
    ]
    asked = gangdomains.demand(members, 2)
    assert asked.whole == (7000, 6 * 2**30)
    assert asked.least == (3000, 3 * 2**30)  # per resource: the two smallest requests


def test_domains_of_names_the_domain_of_each_node_and_none_without_the_label() -> None:
    c = cluster([make_node("a1").zone("a"), make_node("a2").zone("a"), make_node("bare")])
    snap = c.snapshot()
    assert gangdomains.domains_of(snap, ZONE, ["a1", "a2"]) == {"a"}
    assert gangdomains.domains_of(snap, ZONE, ["a1", "bare"]) == {"a", None}
    assert gangdomains.domains_of(snap, ZONE, ["gone"]) == {None}
    assert gangdomains.domains_of(snap, ZONE, []) == frozenset()


def test_a_confined_member_fits_only_its_domain_and_keeps_its_own_affinity() -> None:
    c = cluster(
        [
            make_node("a1").zone("a").label("disk", "ssd").capacity(cpu="8"),
            make_node("b1").zone("b").label("disk", "ssd").capacity(cpu="8"),
            make_node("b2").zone("b").label("disk", "hdd").capacity(cpu="8"),
        ]
    )
    builder = make_pod("w0").req(cpu="1").node_affinity(expr("disk", "In", "ssd"))
    member = pod(builder, "w0")
    confined = gangdomains.confine(member, ZONE, "b")
    assert schedule(c, builder).node in {"a1", "b1"}
    decision = cycle.schedule(confined, c.snapshot(), c)
    assert decision.node == "b1"  # in b, and on ssd as the member asked
    nowhere = cycle.schedule(gangdomains.confine(member, ZONE, "c"), c.snapshot(), c)
    assert nowhere.node is None
    assert "didn't match Pod's node affinity/selector" in nowhere.message
