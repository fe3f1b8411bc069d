"""plumb places the same pods on the same nodes whatever order the objects were created in, and
whether or not it was restarted halfway.

One scenario serves both tests: six nodes of distinct sizes over three zones and twelve pods of
distinct priorities that compete for room, spread over zones, keep apart or draw together,
prefer some nodes and shun a tainted one. It is built without ties: for every pod the best node
scores strictly more than the next (checked when the scenario was designed, by running plumb's
own cycle over it in priority order and reading each decision's candidates: the narrowest
margin is 1 point, for batch2). A tie would be broken by a hash of the pod's uid and the node's
name, and those differ from build to build. It was designed under kube-scheduler v1.34's scores;
v1.36's BalancedAllocation (the change in balance, docs/versions.md) brings ties into it, so plumb
runs it with ``--emulated-version 1.34`` on every cluster: what it shows, that the order of
creation changes nothing, does not depend on the release's scores.
"""

from __future__ import annotations

import collections
import random
import time
from collections.abc import Iterable, Mapping

import pytest

from plumb.backend import queue as queue_module
from plumb_dev.testing import builders, kube
from plumb_dev.testing.builders import HOSTNAME_LABEL, ZONE_LABEL, expr
from tests.support import side_by_side
from tests.support.live_cluster import NodeFactory
from tests.support.plumb_process import PlumbFactory

pytestmark = pytest.mark.integration

SCHEDULER_NAME = "plumb"
# Every node of a build carries this label with the build's value: a pod affinity term on it holds
# on every node or on none, so the anchor pod releases all the waiting pods at once.
CLUSTER_LABEL = "plumb.test/cluster"
ANCHOR = "anchor"
ANCHOR_NODE = "n1"
SEED = 20261130
# The release whose scores the scenario was designed tie-free under (see the docstring).
EMULATED_MINOR = 34
EMULATED = f"1.{EMULATED_MINOR}"
BUILDS = 3


def scenario_nodes(prefix: str, cluster: str) -> dict[str, builders.NodeBuilder]:
    """The six nodes, by name without the prefix; no two of the same size."""

    def node(suffix: str, zone: str, cpu: str, memory: str) -> builders.NodeBuilder:
        return (
            builders.make_node(f"{prefix}{suffix}")
            .zone(zone)
            .label(CLUSTER_LABEL, cluster)
            .capacity(cpu=cpu, memory=memory, pods="20")
        )

    return {
        "n1": node("n1", "a", "4", "16Gi"),
        "n2": node("n2", "a", "6", "8Gi"),
        "n3": node("n3", "b", "8", "32Gi").label("disk", "ssd"),
        "n4": node("n4", "b", "5", "12Gi"),
        "n5": node("n5", "c", "7", "20Gi").taint("spot", "true", effect="PreferNoSchedule"),
        "n6": node("n6", "c", "3", "24Gi").label("disk", "ssd"),
    }


def scenario_pods(namespace: str) -> dict[str, builders.PodBuilder]:
    """The twelve pods, by name, highest priority first; each needs the anchor somewhere."""

    def pod(name: str, priority: int, cpu: str, memory: str) -> builders.PodBuilder:
        return (
            builders.make_pod(name, namespace)
            .scheduler(SCHEDULER_NAME)
            .priority(priority)
            .req(cpu=cpu, memory=memory)
            .affinity(CLUSTER_LABEL, {"role": ANCHOR})
        )

    def web(i: int) -> builders.PodBuilder:
        return (
            pod(f"web{i}", 120 - i, "500m", "1Gi")
            .label("app", "web")
            .spread(ZONE_LABEL, 1, selector={"app": "web"})
        )

    def db(i: int) -> builders.PodBuilder:
        return (
            pod(f"db{i}", 110 - i, "1500m", "6Gi")
            .label("app", "db")
            .affinity(HOSTNAME_LABEL, {"app": "db"}, anti=True)
            .preferred_node_affinity(50, expr("disk", "In", "ssd"))
        )

    def cache(i: int) -> builders.PodBuilder:
        return (
            pod(f"cache{i}", 100 - i, "250m", "4Gi")
            .label("app", "cache")
            .preferred_affinity(30, HOSTNAME_LABEL, {"app": "web"})
        )

    def batch(i: int) -> builders.PodBuilder:
        return (
            pod(f"batch{i}", 90 - i, "2", "1Gi")
            .label("app", "batch")
            .toleration("spot", value="true", effect="PreferNoSchedule")
            .spread(HOSTNAME_LABEL, 1, when="ScheduleAnyway", selector={"app": "batch"})
        )

    pods = [
        *(web(i) for i in range(4)),
        *(db(i) for i in range(2)),
        *(cache(i) for i in range(2)),
        *(batch(i) for i in range(3)),
        pod("big", 80, "3", "2Gi"),
    ]
    return {str(p.obj()["metadata"]["name"]): p for p in pods}


def anchor(namespace: str, node: str) -> builders.PodBuilder:
    """Bound at creation, as by another scheduler: the pod every scenario pod needs beside it."""
    return builders.make_pod(ANCHOR, namespace).label("role", ANCHOR).node(node).req(cpu="100m")


# --- helpers ---------------------------------------------------------------------------------


def _in_view(client: kube.Kube, namespace: str, cluster: str, count: int) -> None:
    """Waits until plumb has in view the ``count`` nodes of this build and none of the last.

    A probe pod asks for the build's nodes and more cpu than any has: it fails on the node
    selector on an old node and on cpu on a new one, so only "all new, no old" reads as below.
    The node watch is one ordered stream, so what plumb saw then, it saw before any later pod.
    A new probe each time rather than a retry, which plumb can miss.
    """
    expected = side_by_side.without_victims(
        f"0/{count} nodes are available: {count} Insufficient cpu.", count, 0, minor=EMULATED_MINOR
    )
    messages = []
    for attempt in range(20):
        probe = f"probe-{attempt}"
        client.create_pod(
            builders.make_pod(probe, namespace)
            .scheduler(SCHEDULER_NAME)
            .node_selector(CLUSTER_LABEL, cluster)
            .req(cpu="1000")
            .obj()
        )
        side_by_side.wait_settled(client, namespace, [probe])
        message = side_by_side.failed_scheduling(client, namespace, probe)
        if message == expected:
            return
        messages.append(message)
    raise AssertionError(f"plumb never saw exactly the {count} nodes of {cluster}: {messages}")


def _create(client: kube.Kube, pods: Iterable[builders.PodBuilder]) -> None:
    for pod in pods:
        client.create_pod(pod.obj())


def _wait_bound(client: kube.Kube, namespace: str, names: Iterable[str]) -> dict[str, str]:
    """Waits until every named pod is bound (the scenario binds them all): {pod: node}."""
    wanted = list(names)

    def bound() -> dict[str, str] | None:
        nodes = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in client.pods(namespace)}
        placed = {name: str(nodes[name]) for name in wanted if nodes.get(name)}
        return placed if len(placed) == len(wanted) else None

    try:
        return kube.wait_for(f"{len(wanted)} pods in {namespace} to be bound", bound, timeout=60)
    except kube.WaitTimeout as error:
        why = {name: side_by_side.failed_scheduling(client, namespace, name) for name in wanted}
        raise kube.WaitTimeout(f"{error}; newest FailedScheduling of each: {why}") from None


def _without(prefix: str, placed: Mapping[str, str]) -> dict[str, str]:
    assert all(node.startswith(prefix) for node in placed.values()), placed
    return {pod: node.removeprefix(prefix) for pod, node in placed.items()}


def _assert_sound(client: kube.Kube, namespace: str, placed: Mapping[str, str]) -> None:
    """What holds whatever the order: the constraints and the nodes' room."""
    zones = {
        n["metadata"]["name"]: n["metadata"]["labels"][ZONE_LABEL]
        for n in client.nodes()
        if n["metadata"]["name"] in placed.values()
    }
    web = collections.Counter(zones[node] for pod, node in placed.items() if pod.startswith("web"))
    assert sorted(web.values()) == [1, 1, 2], web  # four web pods, zones within one of each other
    assert placed["db0"] != placed["db1"]
    assert side_by_side.overcommitted(client, namespace, set(placed.values())) == []


def _teardown(client: kube.Kube, namespace: str, nodes: Iterable[str]) -> None:
    client.delete_pods(namespace)
    for node in nodes:
        client.delete_node(node)


# --- tests -----------------------------------------------------------------------------------


def test_placement_does_not_depend_on_the_order_nodes_and_pods_are_created_in(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    start_plumb: PlumbFactory,
) -> None:
    """Three builds of the scenario, each in its own namespace with its own node names, create
    the nodes and the pods in three shuffled orders while plumb runs; every pod lands on the
    same node (by name without the prefix) in all three.

    The pods arrive one by one, so plumb would decide them in arrival order, and that order
    rightly matters (the first pod takes the best room). They all need the anchor pod beside
    them, so each first waits; once every pod has waited out its backoff, the anchor's arrival
    sends all of them back at once and plumb decides them in queue order, by priority.
    """
    start_plumb("--emulated-version", EMULATED)
    rng = random.Random(SEED)
    node_orders: list[list[str]] = []
    pod_orders: list[list[str]] = []
    placements: list[dict[str, str]] = []
    previous: list[str] = []
    namespaces = [namespace] + [f"{namespace}-{build}" for build in range(1, BUILDS)]
    try:
        for build, ns in enumerate(namespaces):
            if build:
                _teardown(kube_client, namespaces[build - 1], previous)
                kube_client.create_namespace(ns)
            cluster = f"b{build}"
            prefix = f"{namespace}-{cluster}-"
            nodes = scenario_nodes(prefix, cluster)
            pods = scenario_pods(ns)
            node_order = rng.sample(sorted(nodes), len(nodes))
            pod_order = rng.sample(sorted(pods), len(pods))
            node_orders.append(node_order)
            pod_orders.append(pod_order)

            previous = [add_node(nodes[suffix]) for suffix in node_order]
            _in_view(kube_client, ns, cluster, len(nodes))
            _create(kube_client, (pods[name] for name in pod_order))
            waiting = side_by_side.wait_settled(kube_client, ns, pods, cluster_nodes=len(nodes))
            assert set(waiting.values()) == {None}, f"no pod may go before the anchor: {waiting}"
            # A pod sent back within its backoff waits it out and would be decided alone, later.
            time.sleep(queue_module.DEFAULT_BACKOFF.duration(1) * 1.5)
            kube_client.create_pod(anchor(ns, f"{prefix}{ANCHOR_NODE}").obj())

            placed = _wait_bound(kube_client, ns, pods)
            _assert_sound(kube_client, ns, placed)
            placements.append(_without(prefix, placed))
    finally:
        for ns in namespaces[1:]:
            kube_client.delete_pods(ns)

    assert len({tuple(order) for order in node_orders}) == BUILDS
    assert len({tuple(order) for order in pod_orders}) == BUILDS
    assert len(set(placements[0].values())) >= 5, placements[0]
    assert placements[1] == placements[0]
    assert placements[2] == placements[0]


def test_a_restart_halfway_ends_with_the_placement_of_an_uninterrupted_run(
    kube_client: kube.Kube,
    namespace: str,
    add_node: NodeFactory,
    start_plumb: PlumbFactory,
) -> None:
    """The scenario's first six pods are placed, plumb stops, the other six are created, and a
    new plumb places them: the same placement as a plumb that ran throughout.

    The new plumb learns the first six from the API server alone, so any part of them it fails
    to count (room, zones, the dbs' anti-affinity, the web pods the caches like) moves a pod.
    Pods are created highest priority first, so they are decided in that order in both runs:
    one at a time as they arrive, or all at once from the new plumb's first list.
    """
    runs: dict[str, dict[str, str]] = {}
    namespaces = {"uninterrupted": namespace, "restarted": f"{namespace}-r"}
    kube_client.create_namespace(namespaces["restarted"])
    previous: list[str] = []
    try:
        for run, ns in namespaces.items():
            if previous:
                _teardown(kube_client, namespaces["uninterrupted"], previous)
            cluster = run[0]
            prefix = f"{namespace}-{cluster}-"
            nodes = scenario_nodes(prefix, cluster)
            pods = scenario_pods(ns)
            names = list(pods)
            first, rest = names[: len(names) // 2], names[len(names) // 2 :]

            plumb = start_plumb("--emulated-version", EMULATED)
            previous = [add_node(node) for node in nodes.values()]
            _in_view(kube_client, ns, cluster, len(nodes))
            kube_client.create_pod(anchor(ns, f"{prefix}{ANCHOR_NODE}").obj())
            _create(kube_client, (pods[name] for name in first))
            _wait_bound(kube_client, ns, first)
            if run == "restarted":
                assert plumb.stop() == 0
            _create(kube_client, (pods[name] for name in rest))
            if run == "restarted":
                plumb = start_plumb("--emulated-version", EMULATED)

            placed = _wait_bound(kube_client, ns, names)
            _assert_sound(kube_client, ns, placed)
            runs[run] = _without(prefix, placed)
            plumb.stop()
    finally:
        kube_client.delete_pods(namespaces["restarted"])

    assert len(set(runs["uninterrupted"].values())) >= 5, runs["uninterrupted"]
    assert runs["restarted"] == runs["uninterrupted"]
