"""The policy engine and deviation: which policy governs a pod and how, where a deviating pod
goes, what the budget sentence says, when a revert trips, and the placement status counts."""

from __future__ import annotations

from typing import Any

from plumb.backend.cache import clustercache as cache_module
from plumb.backend.records import objects
from plumb.framework import cycle, deviation, scoring
from plumb.kernel import contract, reference
from plumb.policy import engine as engine_module
from plumb_dev.testing.builders import make_node, make_pod
from tests.support import small_clusters
from tests.support.fakes import ManualClock
from tests.support.policy_builders import ZONE, make_policy

NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z, when each test's clock starts

# plumb's pods of app=web (one of app=db), pending; each one's uid is its name.
NEW, A, B, C, NEXT = (
    small_clusters.pod(
        make_pod(name, "shop").label("app", "web").scheduler("plumb").req(cpu="100m"), name
    )
    for name in ("new", "a", "b", "c", "next")
)
FAILING = [
    small_clusters.pod(
        make_pod(f"p{i}", "shop").label("app", "web").scheduler("plumb").req(cpu="100m"), f"p{i}"
    )
    for i in range(5)
]
OTHER = small_clusters.pod(
    make_pod("other", "shop").label("app", "db").scheduler("plumb").req(cpu="100m"), "other"
)


def _cluster(zones: dict[str, int]) -> cache_module.Cache:
    """One node per zone; ``zones`` gives how many app=web pods each already holds."""
    cache = cache_module.Cache()
    for zone, count in zones.items():
        cache.upsert_node(
            objects.parse_node(make_node(f"n-{zone}").zone(zone).capacity(cpu="8").obj())
        )
        for i in range(count):
            cache.add_pod(
                small_clusters.pod(
                    make_pod(f"{zone}-{i}", "shop")
                    .label("app", "web")
                    .scheduler("plumb")
                    .req(cpu="100m")
                    .node(f"n-{zone}"),
                    f"{zone}-{i}",
                )
            )
    return cache


def test_the_highest_priority_policy_governs_and_adds_its_rules_to_the_pods_own() -> None:
    engine = engine_module.PolicyEngine(_cluster({}))
    engine.apply(make_policy("web").labels(app="web").spread(ZONE, 2).obj())
    engine.apply(make_policy("strict").labels(app="web").spread(ZONE, 1).priority(5).obj())
    pod = NEW

    policy = engine.governing(pod)
    assert policy is not None
    assert policy.name == "strict"
    governed = engine.govern(pod, policy)
    assert [(c.topology_key, c.max_skew, c.hard) for c in governed.scheduling.spread] == [
        (ZONE, 1, True)
    ]
    assert engine.governing(OTHER) is None
    assert engine.group(OTHER) is None
    assert engine.group(pod) == ("shop", "strict", 1)


def test_a_policys_weights_and_strategy_become_the_batch_profile() -> None:
    cache = _cluster({})
    engine = engine_module.PolicyEngine(cache)
    body = make_policy("web").labels(app="web").scoring("MostAllocated", resources=5, spread=0)
    state = engine.apply(body.obj())
    assert state is not None
    assert state.active is not None
    profile = engine.profile(state.active, cache.snapshot(), scoring.DEFAULT)
    # SCORE_PLUGINS order: fit, balanced, taints, node affinity, spread, inter-pod affinity,
    # zone health, image locality, volume binding and dynamic resources (the profile's: a
    # policy has no weight for them).
    assert profile.weights == (5, 1, 3, 2, 0, 2, 1, 1, 1, 2)
    assert dict(zip(contract.SCORE_PLUGINS, profile.weights, strict=True))["ZoneHealth"] == 1
    assert profile.strategy == "MostAllocated"


def _ready(name: str, zone: str, status: str, heard: str) -> dict[str, Any]:
    body: dict[str, Any] = make_node(name).zone(zone).obj()
    body["status"]["conditions"] = [
        {"type": "Ready", "status": status, "lastHeartbeatTime": heard, "lastTransitionTime": heard}
    ]
    return body


def test_a_zone_of_not_ready_nodes_scores_lower_and_a_silent_zone_exactly_neutral() -> None:
    clock = ManualClock(NOW)
    cache = _cluster({"a": 0, "b": 0, "c": 0})
    engine = engine_module.PolicyEngine(cache, clock=clock)
    state = engine.apply(make_policy("web").labels(app="web").zone_health("5m", "2m").obj())
    assert state is not None
    assert state.active is not None
    engine.observe_node("n-a", _ready("n-a", "a", "False", "2027-01-15T07:59:50Z"))
    engine.observe_node("n-b", _ready("n-b", "b", "True", "2027-01-15T07:59:50Z"))
    engine.observe_node("n-c", _ready("n-c", "c", "False", "2027-01-15T07:50:00Z"))  # stale

    profile = engine.profile(state.active, cache.snapshot(), scoring.DEFAULT)
    assert profile.zone_key == ZONE
    assert profile.zone_factors["a"] < 0.2  # exp(-2): every node of the zone is NotReady
    assert profile.zone_factors["b"] == 1.0
    assert profile.zone_factors["c"] == 1.0  # heard from 10 minutes ago: no fresh data
    assert engine.zone_healths() == {"a": 0.0, "b": 1.0, "c": 1.0}

    clock.now += 300  # nothing heard since: every zone is neutral again
    assert set(
        engine.profile(state.active, cache.snapshot(), scoring.DEFAULT).zone_factors.values()
    ) == {1.0}


def test_a_policy_that_weighs_zone_health_zero_tracks_no_zones() -> None:
    cache = _cluster({"a": 0})
    engine = engine_module.PolicyEngine(cache)
    state = engine.apply(make_policy("web").labels(app="web").scoring(zone_health=0).obj())
    assert state is not None
    assert state.active is not None
    engine.observe_node("n-a", _ready("n-a", "a", "False", "2027-01-15T07:59:50Z"))
    assert engine.profile(state.active, cache.snapshot(), scoring.DEFAULT).zone_factors == {}


def test_a_deviating_pod_goes_where_the_skew_rises_least() -> None:
    # a 3, b 1, c 2 under maxSkew 1: on a the skew would become 3, on c 2, on b 1.
    cache = _cluster({"a": 3, "b": 1, "c": 2})
    engine = engine_module.PolicyEngine(cache)
    state = engine.apply(make_policy("web").labels(app="web").spread(ZONE, 1).obj())
    assert state is not None
    assert state.active is not None
    pod = NEW
    snap = cache.snapshot()
    prepared = cycle.prepare([pod], snap, cache)  # without the policy: every node passes
    assert prepared.compiled is not None
    result = reference.run(prepared.compiled.cluster, prepared.compiled.batch)
    rules = [c for c in engine.constraints(state.active) if c.hard]
    found = deviation.least_skew(pod, rules, snap, prepared.compiled, result, cache)

    assert found is not None
    assert found.node == "n-b"
    assert found.skews == ((ZONE, 1, 1),)  # b becomes 2: max 3 - min 2


def test_a_full_zone_leaves_the_least_bad_of_the_others() -> None:
    cache = _cluster({"a": 2, "b": 2, "c": 0})
    # c's node is full: the deviation must go to a or b, and says the skew it leaves.
    cache.upsert_node(objects.parse_node(make_node("n-c").zone("c").capacity(cpu="0").obj()))
    engine = engine_module.PolicyEngine(cache)
    state = engine.apply(make_policy("web").labels(app="web").spread(ZONE, 1).obj())
    assert state is not None
    assert state.active is not None
    pod = NEW
    snap = cache.snapshot()
    prepared = cycle.prepare([pod], snap, cache)
    assert prepared.compiled is not None
    result = reference.run(prepared.compiled.cluster, prepared.compiled.batch)
    rules = [c for c in engine.constraints(state.active) if c.hard]
    found = deviation.least_skew(pod, rules, snap, prepared.compiled, result, cache)
    assert found is not None
    assert found.node in {"n-a", "n-b"}
    assert found.describe() == f"{ZONE} skew 3 > maxSkew 1"


def test_the_budget_sentence_counts_deviations_and_names_the_policy() -> None:
    clock = ManualClock(NOW)
    engine = engine_module.PolicyEngine(_cluster({}), clock=clock)
    state = engine.apply(make_policy("web").labels(app="web").spread().budget(2).obj())
    assert state is not None
    assert state.active is not None
    policy = state.active
    assert engine.may_deviate(policy)
    assert engine.spend(policy, A)
    assert engine.spend(policy, B)
    assert not engine.may_deviate(policy)
    assert not engine.spend(policy, C)
    assert engine.budget_text(policy) == (
        "SchedulingPolicy shop/web's deviation budget: 2 of 2 used, 0 left in the window "
        "since 2027-01-15T08:00:00Z"
    )
    clock.now += 600  # the next window
    assert engine.may_deviate(policy)


def test_a_policy_without_a_budget_never_deviates_and_says_so() -> None:
    engine = engine_module.PolicyEngine(_cluster({}))
    state = engine.apply(make_policy("web").labels(app="web").spread().obj())
    assert state is not None
    assert state.active is not None
    assert not engine.may_deviate(state.active)
    assert engine.budget_text(state.active).endswith("allows no deviation (no deviationBudget)")


def test_failures_after_a_spec_change_revert_to_the_last_good_generation() -> None:
    clock = ManualClock(NOW)
    dirty: list[tuple[str, str]] = []
    engine = engine_module.PolicyEngine(_cluster({}), clock=clock)
    engine.on_dirty = lambda ns, name: dirty.append((ns, name))
    good = (
        make_policy("web")
        .labels(app="web")
        .spread()
        .budget(0, threshold=0.5, on_exhausted="Revert")
    )
    engine.apply(good.obj())
    clock.now += 1
    state = engine.apply(good.spread("example.com/rack").generation(2).obj())
    assert state is not None
    assert state.active is not None
    assert state.active.generation == 2
    failing = state.active

    outcomes = [engine.record(failing, pod, None) for pod in FAILING]
    assert [o.reverted is not None for o in outcomes] == [False] * 4 + [True]
    reverted = outcomes[-1].reverted
    assert reverted is not None
    assert (reverted.from_generation, reverted.to_generation) == (2, 1)
    back = engine.governing(NEXT)
    assert back is not None
    assert back.generation == 1
    status = engine.status("shop", "web")
    assert status is not None
    assert status["activeGeneration"] == 1
    assert dirty
    assert dirty[-1] == ("shop", "web")


def test_placement_counts_the_selected_pods_per_domain_with_empty_domains() -> None:
    engine = engine_module.PolicyEngine(_cluster({"a": 3, "b": 0, "c": 1}))
    state = engine.apply(make_policy("web").labels(app="web").spread().obj())
    assert state is not None
    placement = engine.placement(state.active)
    assert placement.matched_pods == 4
    assert placement.domains == {ZONE: {"a": 3, "b": 0, "c": 1}}


def test_a_resumed_policy_takes_up_its_budget_once() -> None:
    clock = ManualClock(NOW)
    engine = engine_module.PolicyEngine(_cluster({}), clock=clock)
    body = make_policy("web").labels(app="web").spread().budget(3).obj()
    body["status"] = {"budget": {"used": 2, "windowStart": "2027-01-15T08:00:00Z"}}
    state = engine.resume(body)
    assert state is not None
    assert state.active is not None
    assert engine.budget_text(state.active).startswith(
        "SchedulingPolicy shop/web's deviation budget: 2 of 3 used"
    )
    engine.spend(state.active, C)
    engine.resume(body)  # kopf's resume after the startup list: nothing is taken up again
    assert "3 of 3 used" in engine.budget_text(state.active)
