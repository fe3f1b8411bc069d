"""The same cluster gives the same placements: whatever order the cache heard of its nodes and
pods in, after a restart, and whether pods are decided in one batch or one at a time."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence

import pytest

from plumb.backend.cache import clustercache as cache_module
from plumb.backend.records import objects
from plumb.framework import cycle
from plumb_dev.testing.builders import (
    HOSTNAME_LABEL,
    ZONE_LABEL,
    NodeBuilder,
    PodBuilder,
    make_node,
    make_pod,
)
from tests.support.small_clusters import pod

Event = objects.NodeInfo | objects.PodInfo


def node(builder: NodeBuilder) -> objects.NodeInfo:
    return objects.parse_node(builder.obj())


def apply(c: cache_module.Cache, events: Iterable[Event]) -> cache_module.Cache:
    for event in events:
        if isinstance(event, objects.NodeInfo):
            c.upsert_node(event)
        else:
            c.add_pod(event)
    return c


def one_at_a_time(c: cache_module.Cache, pods: Sequence[objects.PodInfo]) -> list[cycle.Decision]:
    """Decide each pod in turn, assuming it where it lands before the next one."""
    decisions = []
    for info in pods:
        decision = cycle.schedule(info, c.snapshot(), c)
        if decision.node is not None:
            c.assume(info, decision.node)
        decisions.append(decision)
    return decisions


def outcome(decisions: Iterable[cycle.Decision]) -> list[tuple[str | None, str]]:
    return [(d.node, d.message) for d in decisions]


# A mixed cluster -------------------------------------------------------------------------------


def _nodes() -> list[objects.NodeInfo]:
    nodes = []
    for i in range(24):
        zone = "abc"[i % 3]
        builder = make_node(f"node-{i:02d}").zone(zone).capacity(cpu=str(2 ** (1 + i % 4)))
        builder = builder.label("pool", "gpu" if i % 8 == 5 else "general")
        if i % 8 == 5:
            builder = builder.taint("dedicated", "gpu")
        if i == 7:
            builder = builder.unschedulable()
        if i % 5 == 2:
            builder = builder.taint("spot", "true", "PreferNoSchedule")
        nodes.append(node(builder))
    return nodes


def _bound() -> list[objects.PodInfo]:
    apps = ("web", "api", "db", "cache")
    bound = []
    for i in range(28):
        app = apps[i % 4]
        builder = (
            make_pod(f"{app}-bound-{i}", "other" if i % 9 == 4 else "default")
            .label("app", app)
            .req(cpu=f"{100 * (1 + i % 5)}m", memory=f"{128 * (1 + i % 3)}Mi")
            .node(f"node-{(i * 7) % 24:02d}")
        )
        if app == "db":
            builder = builder.affinity(HOSTNAME_LABEL, {"app": "db"}, anti=True)
        if app == "cache" and i % 8 == 3:
            builder = builder.preferred_affinity(50, ZONE_LABEL, {"app": "web"}, anti=True)
        if i % 11 == 10:
            builder = builder.terminating()
        bound.append(pod(builder, f"bound-{i:02d}"))
    return bound


def _pending_builders() -> list[PodBuilder]:
    """30 pods of mixed shapes, in queue order."""
    builders = []
    for i in range(30):
        shape = i % 6
        if shape == 0:
            builder = make_pod(f"batch-{i}").req(cpu=f"{250 * (1 + i % 4)}m", memory="512Mi")
        elif shape == 1:
            builder = (
                make_pod(f"web-{i}")
                .label("app", "web")
                .req(cpu="200m")
                .spread(ZONE_LABEL, 1, selector={"app": "web"})
                .spread(HOSTNAME_LABEL, 1, when="ScheduleAnyway", selector={"app": "web"})
            )
        elif shape == 2:
            builder = (
                make_pod(f"db-{i}")
                .label("app", "db")
                .req(cpu="500m", memory="1Gi")
                .affinity(HOSTNAME_LABEL, {"app": "db"}, anti=True)
            )
        elif shape == 3:
            builder = (
                make_pod(f"train-{i}")
                .req(cpu="3")
                .toleration("dedicated", operator="Equal", value="gpu", effect="NoSchedule")
                .node_selector("pool", "gpu")
            )
        elif shape == 4:
            builder = (
                make_pod(f"api-{i}")
                .label("app", "api")
                .req(cpu="300m")
                .preferred_affinity(80, ZONE_LABEL, {"app": "cache"})
                .preferred_affinity(40, HOSTNAME_LABEL, {"app": "api"}, anti=True)
            )
        else:
            builder = (
                make_pod(f"cache-{i}")
                .label("app", "cache")
                .req(cpu="100m", memory="256Mi")
                .affinity(ZONE_LABEL, {"app": "web"})
                .spread(ZONE_LABEL, 2, selector={"app": "cache"})
            )
        builders.append(builder)
    return builders


def _pending() -> list[objects.PodInfo]:
    return [pod(b, f"pending-{i:02d}") for i, b in enumerate(_pending_builders())]


def _shuffled(seed: int) -> list[Event]:
    events: list[Event] = [*_nodes(), *_bound()]
    random.Random(seed).shuffle(events)  # pods may arrive before their nodes
    return events


def _in_order(seed: int) -> cache_module.Cache:
    return apply(cache_module.Cache(), _shuffled(seed))


def _with_rows_built_halfway(seed: int) -> cache_module.Cache:
    # Deciding (without assuming) halfway registers every count row early, so the rest of the
    # cluster reaches them through incremental updates rather than through the first scan.
    events = _shuffled(seed)
    c = apply(cache_module.Cache(), events[: len(events) // 2])
    cycle.schedule_batch(_pending(), c.snapshot(), c)
    return apply(c, events[len(events) // 2 :])


ORDERS: dict[str, Callable[[], cache_module.Cache]] = {
    "shuffled-1": lambda: _in_order(1),
    "shuffled-2": lambda: _in_order(2),
    "shuffled-3-rows-built-halfway": lambda: _with_rows_built_halfway(3),
}


@pytest.fixture(scope="module")
def expected() -> list[tuple[str | None, str]]:
    """The placements with every node inserted first, by name, then every bound pod."""
    c = apply(cache_module.Cache(), [*_nodes(), *_bound()])
    return outcome(one_at_a_time(c, _pending()))


def test_the_scenario_exercises_every_shape(expected: list[tuple[str | None, str]]) -> None:
    placed = [n for n, _ in expected if n is not None]
    assert len(set(placed)) >= 10
    # Some pods find no node (more train pods than the tainted gpu nodes hold) and say why.
    assert any(n is None and m.startswith("0/24 nodes are available: ") for n, m in expected)
    assert len(placed) >= 20


@pytest.mark.parametrize("order", ORDERS)
def test_insertion_order_does_not_change_a_placement(
    order: str, expected: list[tuple[str | None, str]]
) -> None:
    assert outcome(one_at_a_time(ORDERS[order](), _pending())) == expected


def test_a_restart_relisting_the_same_objects_gives_the_same_answers(
    expected: list[tuple[str | None, str]],
) -> None:
    restarted = cache_module.Cache()
    events = _shuffled(4)
    restarted.reconcile(
        [e for e in events if isinstance(e, objects.NodeInfo)],
        [e for e in events if isinstance(e, objects.PodInfo)],
    )
    assert outcome(one_at_a_time(restarted, _pending())) == expected


def test_a_restart_midway_continues_where_the_first_run_left_off(
    expected: list[tuple[str | None, str]],
) -> None:
    # The first run decided 15 pods and bound them; the restarted one sees them bound.
    half = 15
    decided = [
        pod(builder.node(str(node_name)), f"pending-{i:02d}")
        for i, (builder, (node_name, _)) in enumerate(
            zip(_pending_builders()[:half], expected[:half], strict=True)
        )
        if node_name is not None
    ]
    restarted = apply(cache_module.Cache(), [*_shuffled(5), *decided])
    assert outcome(one_at_a_time(restarted, _pending()[half:])) == expected[half:]


def test_a_batch_decides_the_mixed_queue_as_one_at_a_time(
    expected: list[tuple[str | None, str]],
) -> None:
    c = apply(cache_module.Cache(), _shuffled(6))
    decisions, deferred = cycle.schedule_batch(_pending(), c.snapshot(), c)
    assert deferred == ()
    assert outcome(decisions) == expected


# Batch equivalence, scenario by scenario --------------------------------------------------------


WEB = {"app": "web"}


def _zones(per_zone: int, zones: str = "abc", **capacity: str) -> list[NodeBuilder]:
    return [
        make_node(f"{z}{i}").zone(z).capacity(**capacity) for z in zones for i in range(per_zone)
    ]


def _web(i: int) -> PodBuilder:
    return make_pod(f"web-{i}").label("app", "web").req(cpu="500m")


Scenario = tuple[list[NodeBuilder], list[PodBuilder], list[PodBuilder], dict[str, dict[str, str]]]


def _spread() -> Scenario:
    pending = [
        _web(i)
        .spread(ZONE_LABEL, 1, selector=WEB)
        .spread(HOSTNAME_LABEL, 1, when="ScheduleAnyway", selector=WEB)
        for i in range(10)
    ]
    return _zones(2), [make_pod("r").label("app", "web").node("a0")], pending, {}


def _anti_affinity() -> Scenario:
    pending = [_web(i).affinity(HOSTNAME_LABEL, WEB, anti=True) for i in range(6)]
    return _zones(1, "ab") + _zones(1, "c", cpu="1"), [], pending, {}


def _symmetric_within_the_batch() -> Scenario:
    # The batch's first pod keeps web pods out of its zone; the web pods come after it.
    keeper = make_pod("keeper").label("app", "keeper").affinity(ZONE_LABEL, WEB, anti=True)
    return _zones(2), [], [keeper, *(_web(i) for i in range(5))], {}


def _first_pod_series() -> Scenario:
    return _zones(2), [], [_web(i).affinity(ZONE_LABEL, WEB) for i in range(5)], {}


def _preferred_both_ways() -> Scenario:
    pending = []
    for i in range(8):
        builder = _web(i).preferred_affinity(30, ZONE_LABEL, {"app": "cache"})
        if i % 2:
            builder = builder.preferred_affinity(70, HOSTNAME_LABEL, WEB, anti=True)
        pending.append(builder)
    pending.insert(
        3, make_pod("cache").label("app", "cache").preferred_affinity(90, ZONE_LABEL, WEB)
    )
    return _zones(2), [], pending, {}


def _namespace_selectors() -> Scenario:
    bound = [make_pod("db", "data").label("app", "db").node("b0")]
    pending = [
        _web(i).affinity(ZONE_LABEL, {"app": "db"}, namespace_selector={"team": "data"})
        for i in range(3)
    ]
    pending += [
        make_pod(f"api-{i}", "data")
        .label("app", "api")
        .affinity(HOSTNAME_LABEL, WEB, anti=True, namespace_selector={})
        for i in range(3)
    ]
    return _zones(2), bound, pending, {"data": {"team": "data"}}


def _filling_up() -> Scenario:
    pending = [
        make_pod(f"p{i}")
        .req(cpu="1500m")
        .spread(ZONE_LABEL, 1, selector={"app": "p"})
        .label("app", "p")
        for i in range(8)
    ]
    return _zones(1, cpu="4"), [], pending, {}


SCENARIOS = {
    "spread": _spread,
    "anti-affinity": _anti_affinity,
    "symmetric-within-the-batch": _symmetric_within_the_batch,
    "first-pod-series": _first_pod_series,
    "preferred-both-ways": _preferred_both_ways,
    "namespace-selectors": _namespace_selectors,
    "filling-up": _filling_up,
}


def _build(scenario: Scenario) -> tuple[cache_module.Cache, list[objects.PodInfo]]:
    nodes, bound, pending, namespaces = scenario
    c = cache_module.Cache()
    for name, labels in namespaces.items():
        c.set_namespace(name, labels)
    for node_builder in nodes:
        c.upsert_node(node(node_builder))
    for i, pod_builder in enumerate(bound):
        c.add_pod(pod(pod_builder, f"bound-{i}"))
    return c, [pod(b, f"pending-{i}") for i, b in enumerate(pending)]


@pytest.mark.parametrize("name", SCENARIOS)
def test_a_batch_decides_as_one_at_a_time(name: str) -> None:
    c, pods = _build(SCENARIOS[name]())
    sequential = outcome(one_at_a_time(c, pods))
    c, pods = _build(SCENARIOS[name]())
    decisions, deferred = cycle.schedule_batch(pods, c.snapshot(), c)
    assert deferred == ()
    assert outcome(decisions) == sequential
    assert any(n is not None for n, _ in sequential)
