"""One small scenario per default filter and score of kube-scheduler, run under plumb and under
the real kube-scheduler on the same control plane: where pods land, why the others wait, and that
no node is ever asked for more than it has.

Every scenario here has one right answer for both schedulers: the filters decide who is
schedulable and which constraint holds, and the score scenarios are built without ties (the
arithmetic is in each test), since kube-scheduler breaks ties at random. A FailedScheduling
message must be kube-scheduler's whole: the node histogram, then " no new claims to deallocate,
preemption: …" (every pod here has priority 0, so preemption finds no victims). Where plumb is
known to differ, the plumb run is marked xfail(strict) at the assertion concerned, with the
reason.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Mapping

import pytest

from plumb.framework.plugins import (
    interpodaffinity,
    nodeaffinity,
    nodeports,
    nodeunschedulable,
    podtopologyspread,
)
from plumb_dev.testing import builders, kube
from plumb_dev.testing.builders import HOSTNAME_LABEL, ZONE_LABEL, expr
from tests.support import side_by_side
from tests.support.live_cluster import NodeFactory
from tests.support.side_by_side import scheduler_fixture  # noqa: F401

pytestmark = pytest.mark.integration

_UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
# Where plumb is known to differ from kube-scheduler. Each is marked just before the assertion
# it concerns, so that anything failing before that still fails the test.
# --- helpers ---------------------------------------------------------------------------------


def _create(client: kube.Kube, pods: Iterable[builders.PodBuilder]) -> list[str]:
    names = []
    for pod in pods:
        body = pod.obj()
        client.create_pod(body)
        names.append(str(body["metadata"]["name"]))
    return names


def _settle(
    client: kube.Kube, namespace: str, names: Iterable[str], nodes: list[str]
) -> dict[str, str | None]:
    return side_by_side.wait_settled(client, namespace, names, cluster_nodes=len(nodes))


def _assert_waits_with(
    client: kube.Kube,
    scheduler: side_by_side.Runner,
    namespace: str,
    pod: str,
    expected: str,
    *,
    searched: int,
) -> None:
    """The pod is unbound and its newest FailedScheduling says ``expected`` and then what
    preemption found, exactly, under both schedulers: every pod here has priority 0, so
    preemption finds no victims on the ``searched`` nodes and is no help on the others."""
    assert not client.pod(namespace, pod)["spec"].get("nodeName"), f"{pod} was bound"
    message = side_by_side.failed_scheduling(client, namespace, pod)
    assert message is not None, f"{pod} has no FailedScheduling event"
    total = int(expected.split("/", 1)[1].split(" ", 1)[0])
    assert message == side_by_side.without_victims(expected, total, searched)


def _assert_within_allocatable(client: kube.Kube, namespace: str, nodes: list[str]) -> None:
    assert side_by_side.overcommitted(client, namespace, nodes) == []


def _bound(placed: Mapping[str, str | None]) -> dict[str, str]:
    return {pod: node for pod, node in placed.items() if node is not None}


def _pending(placed: Mapping[str, str | None]) -> list[str]:
    return sorted(pod for pod, node in placed.items() if node is None)


# --- NodeResourcesFit ------------------------------------------------------------------------


def test_requests_are_the_largest_of_the_app_with_sidecars_and_each_init_container(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: side_by_side.Runner,
) -> None:
    node = add_node(builders.make_node(f"{namespace}-n").capacity(cpu="3"))
    nodes = [node]
    side_by_side.in_view(kube_client, scheduler, namespace, nodes)
    pods = _create(
        kube_client,
        [
            # max(400m app, 1500m init) = 1500m; summing would say 1900m, ignoring init 400m.
            scheduler.pod("init-heavy", namespace).init("setup", cpu="1500m").req(cpu="400m"),
            # The sidecar runs beside the later init container and beside the app:
            # max(500m + 1, 500m + 500m) = 1500m; without the sidecar it would be 1000m.
            scheduler.pod("with-sidecar", namespace)
            .init("proxy", sidecar=True, cpu="500m")
            .init("migrate", cpu="1")
            .req(cpu="500m"),
        ],
    )
    # 1500m + 1500m is all of the node's 3 cpu: both fit only if neither is over-counted...
    assert _settle(kube_client, namespace, pods, nodes) == dict.fromkeys(pods, node)
    # ...and a pod of 100m more fits only if one of them is under-counted.
    _create(kube_client, [scheduler.pod("tiny", namespace).req(cpu="100m")])
    assert _settle(kube_client, namespace, ["tiny"], nodes) == {"tiny": None}
    _assert_waits_with(
        kube_client,
        scheduler,
        namespace,
        "tiny",
        "0/1 nodes are available: 1 Insufficient cpu.",
        searched=1,
    )
    _assert_within_allocatable(kube_client, namespace, nodes)


# --- NodeUnschedulable -----------------------------------------------------------------------


def test_cordoned_node_takes_only_pods_that_tolerate_it(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: side_by_side.Runner,
) -> None:
    # The roomier node is cordoned: any scheduler that ignored the cordon would prefer it.
    cordoned = add_node(
        builders.make_node(f"{namespace}-cordoned").capacity(cpu="8").unschedulable()
    )
    open_ = add_node(builders.make_node(f"{namespace}-open").capacity(cpu="2"))
    nodes = [cordoned, open_]
    side_by_side.in_view(kube_client, scheduler, namespace, nodes)
    pods = _create(
        kube_client,
        [
            scheduler.pod("small", namespace).req(cpu="500m"),
            scheduler.pod("big", namespace).req(cpu="3"),
            scheduler.pod("tolerant", namespace)
            .req(cpu="3")
            .toleration(_UNSCHEDULABLE_TAINT, operator="Exists", effect="NoSchedule"),
        ],
    )

    placed = _settle(kube_client, namespace, pods, nodes)
    assert placed == {"small": open_, "big": None, "tolerant": cordoned}
    _assert_waits_with(
        kube_client,
        scheduler,
        namespace,
        "big",
        f"0/2 nodes are available: 1 Insufficient cpu, 1 {nodeunschedulable.UNSCHEDULABLE}.",
        searched=0,
    )
    _assert_within_allocatable(kube_client, namespace, nodes)


# --- TaintToleration -------------------------------------------------------------------------


def test_no_schedule_and_no_execute_taints_admit_only_pods_that_tolerate_them(
    request: pytest.FixtureRequest,
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: side_by_side.Runner,
) -> None:
    # The tainted nodes are the roomy ones: only the taints keep pods off them.
    gpu = add_node(
        builders.make_node(f"{namespace}-gpu").capacity(cpu="8").taint("dedicated", "gpu")
    )
    draining = add_node(
        builders.make_node(f"{namespace}-draining")
        .capacity(cpu="8")
        .taint("maintenance", "true", effect="NoExecute")
    )
    plain = add_node(builders.make_node(f"{namespace}-plain").capacity(cpu="2"))
    nodes = [gpu, draining, plain]
    side_by_side.in_view(kube_client, scheduler, namespace, nodes)
    pods = _create(
        kube_client,
        [
            scheduler.pod("small", namespace).req(cpu="500m"),
            scheduler.pod("big", namespace).req(cpu="3"),
            scheduler.pod("tolerant", namespace)
            .req(cpu="3")
            .toleration("dedicated", value="gpu", effect="NoSchedule"),
            # The value is part of an Equal toleration: "cpu" does not tolerate "gpu".
            scheduler.pod("wrong-value", namespace)
            .req(cpu="3")
            .toleration("dedicated", value="cpu", effect="NoSchedule"),
            # An empty key with Exists tolerates every taint.
            scheduler.pod("anywhere", namespace).req(cpu="3").toleration(operator="Exists"),
        ],
    )

    placed = _settle(kube_client, namespace, pods, nodes)
    assert placed.pop("anywhere") in (gpu, draining)
    assert placed == {"small": plain, "big": None, "tolerant": gpu, "wrong-value": None}
    _assert_within_allocatable(kube_client, namespace, nodes)
    expected = "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint(s)."
    _assert_waits_with(kube_client, scheduler, namespace, "big", expected, searched=0)
    _assert_waits_with(kube_client, scheduler, namespace, "wrong-value", expected, searched=0)


def test_prefer_no_schedule_taint_steers_pods_away_while_other_nodes_fit(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: side_by_side.Runner,
) -> None:
    # No tie: for 1 cpu and 1Gi "soft" is the emptier node (LeastAllocated 91 against 85,
    # BalancedAllocation 95 against 89), but an untolerated PreferNoSchedule taint costs it the
    # whole TaintToleration score, 3 x 100.
    soft = add_node(
        builders.make_node(f"{namespace}-soft")
        .capacity(cpu="8", memory="32Gi")
        .taint("spot", "true", effect="PreferNoSchedule")
    )
    plain = add_node(builders.make_node(f"{namespace}-plain").capacity(cpu="4", memory="32Gi"))
    nodes = [soft, plain]
    side_by_side.in_view(kube_client, scheduler, namespace, nodes)
    _create(kube_client, [scheduler.pod("steered", namespace).req(cpu="1", memory="1Gi")])
    assert _settle(kube_client, namespace, ["steered"], nodes) == {"steered": plain}
    # PreferNoSchedule is no filter: a pod that fits only there goes there.
    _create(kube_client, [scheduler.pod("overflow", namespace).req(cpu="4", memory="1Gi")])
    assert _settle(kube_client, namespace, ["overflow"], nodes) == {"overflow": soft}
    _assert_within_allocatable(kube_client, namespace, nodes)


# --- NodeAffinity ----------------------------------------------------------------------------


def test_node_selector_and_required_node_affinity_pick_the_nodes(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: side_by_side.Runner,
) -> None:
    ssd3, hdd5, ssd7 = (
        add_node(
            builders.make_node(f"{namespace}-{disk}{gen}").label("disk", disk).label("gen", gen)
        )
        for disk, gen in (("ssd", "3"), ("hdd", "5"), ("ssd", "7"))
    )
    nodes = [ssd3, hdd5, ssd7]
    side_by_side.in_view(kube_client, scheduler, namespace, nodes)
    pods = _create(
        kube_client,
        [
            scheduler.pod("selector", namespace).node_selector("disk", "hdd"),
            scheduler.pod("in", namespace).node_affinity(expr("disk", "In", "hdd", "nvme")),
            # Requirements of one term are ANDed.
            scheduler.pod("notin-gt", namespace).node_affinity(
                expr("disk", "NotIn", "hdd"), expr("gen", "Gt", "5")
            ),
            # Terms are ORed: gen < 4 or disk In (hdd).
            scheduler.pod("either", namespace)
            .node_affinity(expr("gen", "Lt", "4"))
            .node_affinity(expr("disk", "In", "hdd")),
            scheduler.pod("nowhere", namespace).node_affinity(expr("disk", "In", "nvme")),
            # nodeSelector and node affinity must both hold.
            scheduler.pod("both", namespace)
            .node_selector("disk", "ssd")
            .node_affinity(expr("gen", "Lt", "5")),
        ],
    )

    placed = _settle(kube_client, namespace, pods, nodes)
    assert {pod: placed[pod] for pod in ("selector", "in", "notin-gt", "nowhere", "both")} == {
        "selector": hdd5,
        "in": hdd5,
        "notin-gt": ssd7,
        "nowhere": None,
        "both": ssd3,
    }
    assert placed["either"] in (ssd3, hdd5)
    _assert_waits_with(
        kube_client,
        scheduler,
        namespace,
        "nowhere",
        f"0/3 nodes are available: 3 {nodeaffinity.MISMATCH}.",
        searched=0,
    )
    _assert_within_allocatable(kube_client, namespace, nodes)


def test_preferred_node_affinity_picks_the_node_with_the_heaviest_matching_terms(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: side_by_side.Runner,
) -> None:
    # No tie: NodeAffinity normalises 80 / 20 / 0 to 100 / 25 / 0, times its weight 2, while
    # LeastAllocated and BalancedAllocation together favour "big" by 18 (192 against 174).
    big = add_node(builders.make_node(f"{namespace}-big").capacity(cpu="16", memory="64Gi"))
    light = add_node(
        builders.make_node(f"{namespace}-light")
        .capacity(cpu="4", memory="16Gi")
        .label("disk", "hdd")
    )
    heavy = add_node(
        builders.make_node(f"{namespace}-heavy")
        .capacity(cpu="4", memory="16Gi")
        .label("disk", "ssd")
    )
    nodes = [big, light, heavy]
    side_by_side.in_view(kube_client, scheduler, namespace, nodes)
    _create(
        kube_client,
        [
            scheduler.pod("picky", namespace)
            .req(cpu="1", memory="1Gi")
            .preferred_node_affinity(20, expr("disk", "In", "hdd"))
            .preferred_node_affinity(80, expr("disk", "In", "ssd"))
        ],
    )
    assert _settle(kube_client, namespace, ["picky"], nodes) == {"picky": heavy}
    _assert_within_allocatable(kube_client, namespace, nodes)


# --- NodePorts -------------------------------------------------------------------------------


def test_a_host_port_is_taken_once_per_node_and_protocol(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: side_by_side.Runner,
) -> None:
    node = add_node(builders.make_node(f"{namespace}-n"))
    nodes = [node]
    side_by_side.in_view(kube_client, scheduler, namespace, nodes)
    _create(kube_client, [scheduler.pod("first", namespace).req(cpu="100m").host_port(8080)])
    assert _settle(kube_client, namespace, ["first"], nodes) == {"first": node}
    pods = _create(
        kube_client,
        [
            scheduler.pod("second", namespace).req(cpu="100m").host_port(8080),
            scheduler.pod("udp", namespace).req(cpu="100m").host_port(8080, protocol="UDP"),
            scheduler.pod("other-port", namespace).req(cpu="100m").host_port(8081),
        ],
    )

    placed = _settle(kube_client, namespace, pods, nodes)
    assert placed == {"second": None, "udp": node, "other-port": node}
    _assert_waits_with(
        kube_client,
        scheduler,
        namespace,
        "second",
        f"0/1 nodes are available: 1 {nodeports.PORTS_IN_USE}.",
        searched=1,
    )
    _assert_within_allocatable(kube_client, namespace, nodes)


# --- PodTopologySpread -----------------------------------------------------------------------


def _zones(client: kube.Kube, nodes: Iterable[str]) -> dict[str, str]:
    wanted = set(nodes)
    return {
        n["metadata"]["name"]: n["metadata"]["labels"][ZONE_LABEL]
        for n in client.nodes()
        if n["metadata"]["name"] in wanted
    }


def test_spread_with_max_skew_one_fills_three_zones_evenly(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: side_by_side.Runner,
) -> None:
    # Two nodes per zone, the zone-a ones roomier, so a scheduler that only looked at free room
    # would crowd zone a.
    nodes = [
        add_node(
            builders.make_node(f"{namespace}-{zone}{i}")
            .zone(zone)
            .capacity(cpu="16" if zone == "a" else "4")
        )
        for zone in "abc"
        for i in range(2)
    ]
    side_by_side.in_view(kube_client, scheduler, namespace, nodes)
    pods = _create(
        kube_client,
        (
            scheduler.pod(f"web{i}", namespace)
            .label("app", "web")
            .req(cpu="200m")
            .spread(ZONE_LABEL, 1, selector={"app": "web"})
            for i in range(9)
        ),
    )

    placed = _settle(kube_client, namespace, pods, nodes)
    assert _pending(placed) == []
    zone_of = _zones(kube_client, nodes)
    # Every placement keeps the zones within one pod of each other, so nine end 3 / 3 / 3.
    assert collections.Counter(zone_of[node] for node in _bound(placed).values()) == {
        "a": 3,
        "b": 3,
        "c": 3,
    }
    _assert_within_allocatable(kube_client, namespace, nodes)


def test_spread_with_a_full_zone_makes_do_not_schedule_wait_and_schedule_anyway_go_on(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: side_by_side.Runner,
) -> None:
    a, b = (
        add_node(builders.make_node(f"{namespace}-{zone}").zone(zone).capacity(cpu="8"))
        for zone in "ab"
    )
    # Zone c takes no 1-cpu pod, yet it is a domain of the constraint, counting 0 pods.
    full = add_node(builders.make_node(f"{namespace}-c").zone("c").capacity(cpu="500m"))
    nodes = [a, b, full]
    side_by_side.in_view(kube_client, scheduler, namespace, nodes)
    strict = _create(
        kube_client,
        (
            scheduler.pod(f"strict{i}", namespace)
            .label("app", "strict")
            .req(cpu="1")
            .spread(ZONE_LABEL, 1, selector={"app": "strict"})
            for i in range(4)
        ),
    )
    placed = _settle(kube_client, namespace, strict, nodes)
    # With zone c at 0, zones a and b may hold one pod each, and not two.
    assert sorted(_bound(placed).values()) == [a, b]
    waiting = _pending(placed)
    assert len(waiting) == 2, placed

    lenient = _create(
        kube_client,
        (
            scheduler.pod(f"lenient{i}", namespace)
            .label("app", "lenient")
            .req(cpu="1")
            .spread(ZONE_LABEL, 1, when="ScheduleAnyway", selector={"app": "lenient"})
            for i in range(4)
        ),
    )
    placed = _settle(kube_client, namespace, lenient, nodes)
    assert _pending(placed) == []
    assert set(placed.values()) <= {a, b}
    for pod in waiting:
        _assert_waits_with(
            kube_client,
            scheduler,
            namespace,
            pod,
            "0/3 nodes are available: 1 Insufficient cpu, "
            f"2 {podtopologyspread.CONSTRAINTS_NOT_MATCH}.",
            searched=2,
        )
    _assert_within_allocatable(kube_client, namespace, nodes)


def test_schedule_anyway_spread_outweighs_free_room(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: side_by_side.Runner,
) -> None:
    roomy = add_node(builders.make_node(f"{namespace}-a").zone("a").capacity(cpu="64"))
    cramped = add_node(builders.make_node(f"{namespace}-b").zone("b").capacity(cpu="4"))
    nodes = [roomy, cramped]
    for name in ("w0", "w1"):
        kube_client.create_pod(
            builders.make_pod(name, namespace)
            .label("app", "w")
            .node(roomy)
            .req(cpu="100m", memory="128Mi")
            .obj()
        )
    kube_client.create_pod(
        builders.make_pod("filler", namespace).node(cramped).req(cpu="2", memory="128Mi").obj()
    )
    side_by_side.in_view(kube_client, scheduler, namespace, nodes)
    # No tie, and the spread decides: zone a holds 2 matching pods and zone b none, which
    # PodTopologySpread scores 0 and 100, times its weight 2. Free room alone would pick the
    # roomy node: LeastAllocated 97 against 67, BalancedAllocation 99 against 69.
    _create(
        kube_client,
        [
            scheduler.pod("w2", namespace)
            .label("app", "w")
            .req(cpu="500m", memory="512Mi")
            .spread(ZONE_LABEL, 1, when="ScheduleAnyway", selector={"app": "w"})
        ],
    )
    assert _settle(kube_client, namespace, ["w2"], nodes) == {"w2": cramped}
    _assert_within_allocatable(kube_client, namespace, nodes)


# --- InterPodAffinity ------------------------------------------------------------------------


def test_required_hostname_anti_affinity_puts_one_pod_per_node(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: side_by_side.Runner,
) -> None:
    nodes = [add_node(builders.make_node(f"{namespace}-n{i}")) for i in range(3)]
    side_by_side.in_view(kube_client, scheduler, namespace, nodes)
    pods = _create(
        kube_client,
        (
            scheduler.pod(f"solo{i}", namespace)
            .label("app", "solo")
            .req(cpu="100m")
            .affinity(HOSTNAME_LABEL, {"app": "solo"}, anti=True)
            for i in range(4)
        ),
    )

    placed = _settle(kube_client, namespace, pods, nodes)
    assert sorted(_bound(placed).values()) == sorted(nodes)
    waiting = _pending(placed)
    assert len(waiting) == 1, placed
    _assert_waits_with(
        kube_client,
        scheduler,
        namespace,
        waiting[0],
        f"0/3 nodes are available: 3 {interpodaffinity.ANTI_AFFINITY_RULES_NOT_MATCH}.",
        searched=3,
    )
    _assert_within_allocatable(kube_client, namespace, nodes)


def _two_zones(namespace: str, add_node: NodeFactory) -> dict[str, list[str]]:
    return {
        zone: [add_node(builders.make_node(f"{namespace}-{zone}{i}").zone(zone)) for i in range(2)]
        for zone in "ab"
    }


def test_required_zone_affinity_follows_an_existing_pod_into_its_zone(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: side_by_side.Runner,
) -> None:
    zones = _two_zones(namespace, add_node)
    nodes = zones["a"] + zones["b"]
    side_by_side.in_view(kube_client, scheduler, namespace, nodes)
    _create(
        kube_client,
        [
            scheduler.pod("db", namespace)
            .label("app", "db")
            .req(cpu="100m")
            .node_selector(ZONE_LABEL, "b")
        ],
    )
    assert _settle(kube_client, namespace, ["db"], nodes)["db"] in zones["b"]
    pods = _create(
        kube_client,
        [
            *(
                scheduler.pod(f"web{i}", namespace)
                .req(cpu="100m")
                .affinity(ZONE_LABEL, {"app": "db"})
                for i in range(3)
            ),
            scheduler.pod("orphan", namespace)
            .req(cpu="100m")
            .affinity(ZONE_LABEL, {"app": "cache"}),
        ],
    )

    placed = _settle(kube_client, namespace, pods, nodes)
    assert placed.pop("orphan") is None
    assert set(placed.values()) <= set(zones["b"]), placed
    _assert_waits_with(
        kube_client,
        scheduler,
        namespace,
        "orphan",
        f"0/4 nodes are available: 4 {interpodaffinity.AFFINITY_RULES_NOT_MATCH}.",
        searched=0,
    )
    _assert_within_allocatable(kube_client, namespace, nodes)


def test_a_pod_waiting_for_its_affinity_target_follows_it_once_the_target_is_scheduled(
    request: pytest.FixtureRequest,
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: side_by_side.Runner,
) -> None:
    zones = _two_zones(namespace, add_node)
    nodes = zones["a"] + zones["b"]
    side_by_side.in_view(kube_client, scheduler, namespace, nodes)
    _create(
        kube_client,
        [
            scheduler.pod("follower", namespace)
            .req(cpu="100m")
            .affinity(ZONE_LABEL, {"app": "leader"})
        ],
    )
    assert _settle(kube_client, namespace, ["follower"], nodes) == {"follower": None}
    _create(
        kube_client,
        [
            scheduler.pod("leader", namespace)
            .label("app", "leader")
            .req(cpu="100m")
            .node_selector(ZONE_LABEL, "a")
        ],
    )
    assert _settle(kube_client, namespace, ["leader"], nodes)["leader"] in zones["a"]

    # The leader's binding is the event that can help the follower: kube-scheduler retries it
    # at once (within its 1 s backoff), long before the 5-minute flush of the waiting pods.
    node = kube.wait_for(
        "follower to be bound",
        lambda: kube_client.pod(namespace, "follower")["spec"].get("nodeName"),
        timeout=15,
    )
    assert node in zones["a"]
    _assert_within_allocatable(kube_client, namespace, nodes)


def test_an_existing_pods_anti_affinity_keeps_matching_pods_out_of_its_zone(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: side_by_side.Runner,
) -> None:
    zones = _two_zones(namespace, add_node)
    nodes = zones["a"] + zones["b"]
    side_by_side.in_view(kube_client, scheduler, namespace, nodes)
    _create(
        kube_client,
        [
            scheduler.pod("guard", namespace)
            .label("app", "guard")
            .req(cpu="100m")
            .node_selector(ZONE_LABEL, "a")
            .affinity(ZONE_LABEL, {"app": "intruder"}, anti=True)
        ],
    )
    assert _settle(kube_client, namespace, ["guard"], nodes)["guard"] in zones["a"]
    pods = _create(
        kube_client,
        [
            scheduler.pod("intruder", namespace).label("app", "intruder").req(cpu="100m"),
            scheduler.pod("intruder-in-a", namespace)
            .label("app", "intruder")
            .req(cpu="100m")
            .node_selector(ZONE_LABEL, "a"),
            # Not matched by the guard's term: free to share its zone.
            scheduler.pod("visitor-in-a", namespace)
            .label("app", "visitor")
            .req(cpu="100m")
            .node_selector(ZONE_LABEL, "a"),
        ],
    )

    placed = _settle(kube_client, namespace, pods, nodes)
    assert placed["intruder"] in zones["b"]
    assert placed["intruder-in-a"] is None
    assert placed["visitor-in-a"] in zones["a"]
    _assert_waits_with(
        kube_client,
        scheduler,
        namespace,
        "intruder-in-a",
        f"0/4 nodes are available: 2 {nodeaffinity.MISMATCH}, "
        f"2 {interpodaffinity.EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH}.",
        searched=2,
    )
    _assert_within_allocatable(kube_client, namespace, nodes)


def test_preferred_pod_affinity_draws_a_pod_to_its_peer_and_anti_affinity_away(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: side_by_side.Runner,
) -> None:
    # No tie: the peer's node gets InterPodAffinity's whole 2 x 100 (or loses it), while the
    # peer's own requests make LeastAllocated and BalancedAllocation differ by 5 at most.
    nodes = [add_node(builders.make_node(f"{namespace}-n{i}")) for i in range(3)]
    side_by_side.in_view(kube_client, scheduler, namespace, nodes)
    _create(
        kube_client,
        [
            scheduler.pod("db", namespace)
            .label("app", "db")
            .req(cpu="200m", memory="256Mi")
            .node_selector(HOSTNAME_LABEL, nodes[1])
        ],
    )
    assert _settle(kube_client, namespace, ["db"], nodes) == {"db": nodes[1]}
    pods = _create(
        kube_client,
        [
            scheduler.pod("friend", namespace)
            .req(cpu="200m", memory="256Mi")
            .preferred_affinity(100, HOSTNAME_LABEL, {"app": "db"}),
            scheduler.pod("loner", namespace)
            .req(cpu="200m", memory="256Mi")
            .preferred_affinity(100, HOSTNAME_LABEL, {"app": "db"}, anti=True),
        ],
    )

    placed = _settle(kube_client, namespace, pods, nodes)
    assert placed["friend"] == nodes[1]
    assert placed["loner"] in (nodes[0], nodes[2])
    _assert_within_allocatable(kube_client, namespace, nodes)


# --- NodeResourcesFit LeastAllocated, NodeResourcesBalancedAllocation ------------------------


def test_least_allocated_sends_a_pod_to_the_emptier_node(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: side_by_side.Runner,
) -> None:
    busy, empty = (
        add_node(builders.make_node(f"{namespace}-{name}").capacity(cpu="4", memory="8Gi"))
        for name in ("busy", "empty")
    )
    nodes = [busy, empty]
    # Bound at creation, as by another scheduler: half of busy, evenly.
    kube_client.create_pod(
        builders.make_pod("hog", namespace).node(busy).req(cpu="2", memory="4Gi").obj()
    )
    side_by_side.in_view(kube_client, scheduler, namespace, nodes)
    # No tie: both nodes stay perfectly balanced (BalancedAllocation 100 each), and
    # LeastAllocated gives 25 on busy against 75 on empty.
    _create(kube_client, [scheduler.pod("newcomer", namespace).req(cpu="1", memory="2Gi")])
    assert _settle(kube_client, namespace, ["newcomer"], nodes) == {"newcomer": empty}
    _assert_within_allocatable(kube_client, namespace, nodes)


def test_balanced_allocation_sends_a_pod_where_it_evens_out_cpu_and_memory(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    scheduler: side_by_side.Runner,
) -> None:
    cpu_bound, memory_bound = (
        add_node(builders.make_node(f"{namespace}-{name}").capacity(cpu="4", memory="8Gi"))
        for name in ("cpu-bound", "memory-bound")
    )
    nodes = [cpu_bound, memory_bound]
    kube_client.create_pod(
        builders.make_pod("cruncher", namespace).node(cpu_bound).req(cpu="2", memory="2Gi").obj()
    )
    kube_client.create_pod(
        builders.make_pod("cache", namespace).node(memory_bound).req(cpu="1", memory="4Gi").obj()
    )
    side_by_side.in_view(kube_client, scheduler, namespace, nodes)
    # With the newcomer (1 cpu, 1Gi) cpu-bound would be at 3/4 cpu and 3/8 memory, memory-bound
    # at 2/4 and 5/8: LeastAllocated ties at (25 + 62) / 2 = (50 + 37) / 2 = 43, and
    # BalancedAllocation, 100 x (1 - |cpu - memory| / 2), gives 81 against 93.
    _create(kube_client, [scheduler.pod("newcomer", namespace).req(cpu="1", memory="1Gi")])
    assert _settle(kube_client, namespace, ["newcomer"], nodes) == {"newcomer": memory_bound}
    _assert_within_allocatable(kube_client, namespace, nodes)
