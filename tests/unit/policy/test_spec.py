"""Compiling SchedulingPolicy objects: the defaults a minimal policy gets, every field of a whole
one, and for objects the schema would refuse (an older CRD let them through) a PolicyError whose
message names the field. No input, however odd, raises anything else."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plumb.policy import spec
from tests.support.policy_builders import HOSTNAME, ZONE, make_policy


def test_a_minimal_policy_gets_the_defaults() -> None:
    policy = spec.compile_policy(make_policy("web").obj())
    assert (policy.namespace, policy.name, policy.uid, policy.generation) == (
        "shop",
        "web",
        "uid-web",
        1,
    )
    assert policy.priority == 0
    assert policy.topology == ()
    assert policy.scoring == spec.Scoring(
        strategy=spec.Strategy.LEAST_ALLOCATED,
        weights=spec.Weights(resources=1, balance=1, spread=2, affinity=2, taints=3, zone_health=1),
    )
    assert policy.zone_health == spec.ZoneHealth(topology_key=ZONE, window=300, stale_after=120)
    assert policy.deviation_budget is None  # without a budget the policy never deviates
    assert policy.preemption is spec.NO_PREEMPTION_RULES  # kube-scheduler's preemption as is


def test_a_whole_policy_compiles_field_by_field() -> None:
    body = (
        make_policy("web")
        .priority(7)
        .spread(ZONE, 1, min_domains=3)
        .spread(HOSTNAME, 2, hard=False)
        .scoring("MostAllocated", resources=10, zone_health=5)
        .zone_health("10m", "1m")
        .budget(4, "1h30m", 0.25, "Revert")
        .obj()
    )
    policy = spec.compile_policy(body)
    assert policy.priority == 7
    assert policy.topology == (
        spec.TopologyRule(topology_key=ZONE, max_skew=1, min_domains=3, hard=True),
        spec.TopologyRule(topology_key=HOSTNAME, max_skew=2, min_domains=None, hard=False),
    )
    assert policy.topology[1].when_unsatisfiable == "ScheduleAnyway"
    assert policy.rule(HOSTNAME) == policy.topology[1]
    assert policy.scoring.strategy is spec.Strategy.MOST_ALLOCATED
    assert (policy.scoring.weights.resources, policy.scoring.weights.zone_health) == (10, 5)
    assert policy.scoring.weights.taints == 3  # the unnamed weights keep their defaults
    assert policy.zone_health == spec.ZoneHealth(topology_key=ZONE, window=600, stale_after=60)
    assert policy.deviation_budget == spec.DeviationBudget(
        max_violations=4,
        window=5400,
        failure_rate_threshold=0.25,
        on_exhausted=spec.OnExhausted.REVERT,
    )


def test_the_selector_governs_pods_as_a_label_selector_of_its_namespace() -> None:
    body = make_policy("web").labels(app="web").expression("track", "NotIn", "canary").obj()
    policy = spec.compile_policy(body)
    assert policy.governs("shop", {"app": "web"})
    assert policy.governs("shop", {"app": "web", "track": "stable"})
    assert not policy.governs("shop", {"app": "web", "track": "canary"})
    assert not policy.governs("shop", {"app": "api"})
    assert not policy.governs("other", {"app": "web"})


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("250ms", 0.25),
        ("30s", 30),
        ("5m", 300),
        ("1h30m", 5400),
        ("1h1m1s1ms", 3661.001),
        ("24h", 86400),
        ("90m", 5400),
    ],
)
def test_durations_read_as_the_crd_writes_them(text: str, seconds: float) -> None:
    body = make_policy().budget(window=text).obj()
    budget = spec.compile_policy(body).deviation_budget
    assert budget is not None
    assert budget.window == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["1d", "1.5h", "", "0s", "25h", "100000s", "5 m", "m", 600])
def test_a_bad_duration_is_refused_with_the_value(text: Any) -> None:
    body = make_policy().budget(window=text).obj()
    with pytest.raises(spec.PolicyError) as refused:
        spec.compile_policy(body)
    message = str(refused.value)
    assert message.startswith("spec.deviationBudget.window: must be a duration")
    assert message.endswith(f"got {text}" if isinstance(text, int) else f'got "{text}"')


def _malformed(*edits: tuple[str, Any]) -> dict[str, Any]:
    builder = make_policy("web").spread(ZONE, 1).budget()
    for path, value in edits:
        builder.set(path, value)
    return builder.obj()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            _malformed(("spec.topology[0].maxSkew", 0)),
            "spec.topology[0].maxSkew: must be at least 1, got 0",
        ),
        (
            _malformed(("spec.topology[0].maxSkew", "1")),
            'spec.topology[0].maxSkew: must be an integer, got "1"',
        ),
        (
            _malformed(("spec.topology[0].maxSkew", True)),
            "spec.topology[0].maxSkew: must be an integer, got true",
        ),
        (
            make_policy().spread(ZONE).spread(ZONE, 2).obj(),
            f'spec.topology[1].topologyKey: duplicate value "{ZONE}" (spec.topology[0] has it)',
        ),
        (
            _malformed(
                ("spec.topology[0].minDomains", 2),
                ("spec.topology[0].whenUnsatisfiable", "ScheduleAnyway"),
            ),
            "spec.topology[0].minDomains: applies only with whenUnsatisfiable DoNotSchedule",
        ),
        (
            _malformed(("spec.topology[0].whenUnsatisfiable", "Never")),
            "spec.topology[0].whenUnsatisfiable: must be one of DoNotSchedule, ScheduleAnyway, "
            'got "Never"',
        ),
        (
            _malformed(("spec.topology[0].topologyKey", "-zone")),
            'spec.topology[0].topologyKey: "-zone" is not a label key',
        ),
        (_malformed(("spec.topology", {"a": 1})), "spec.topology: must be a list"),
        (
            make_policy().scoring(spread=101).obj(),
            "spec.scoring.weights.spread: must be at most 100, got 101",
        ),
        (
            make_policy().scoring(taints=-1).obj(),
            "spec.scoring.weights.taints: must be at least 0, got -1",
        ),
        (
            make_policy().scoring("Random").obj(),
            "spec.scoring.strategy: must be one of LeastAllocated, MostAllocated, "
            'BalancedAllocation, got "Random"',
        ),
        (
            make_policy().zone_health("5m", "10m").obj(),
            "spec.zoneHealth.staleAfter: must not be longer than window (5m), got 10m",
        ),
        (
            make_policy().budget(threshold=0).obj(),
            "spec.deviationBudget.failureRateThreshold: must be more than 0 and at most 1, got 0",
        ),
        (
            make_policy().budget(threshold=1.5).obj(),
            "spec.deviationBudget.failureRateThreshold: must be more than 0 and at most 1",
        ),
        (
            make_policy().budget(max_violations=10001).obj(),
            "spec.deviationBudget.maxViolations: must be at most 10000, got 10001",
        ),
        (
            make_policy().budget(on_exhausted="Panic").obj(),
            'spec.deviationBudget.onExhausted: must be one of Block, Revert, got "Panic"',
        ),
        (make_policy().drop("spec.selector").obj(), "spec.selector: must have at least one"),
        (make_policy().labels().obj(), "spec.selector: must have at least one"),
        (
            make_policy().labels(app="web").expression("tier", "In").obj(),
            "spec.selector.matchExpressions[0].values: operator In needs at least one value",
        ),
        (
            make_policy().labels(app="web").expression("tier", "Exists", "x").obj(),
            "spec.selector.matchExpressions[0].values: operator Exists takes no values",
        ),
        (
            make_policy().labels(app="web").expression("tier", "Gt", "1").obj(),
            "spec.selector.matchExpressions[0].operator: must be one of DoesNotExist, Exists, "
            'In, NotIn, got "Gt"',
        ),
        (
            make_policy().set("spec.selector.matchLabels", {"app": 3}).obj(),
            "spec.selector.matchLabels.app: 3 is not a label value",
        ),
        (
            make_policy().set("spec.priority", 2_000_000_000).obj(),
            "spec.priority: must be at most 1000000000, got 2000000000",
        ),
        (
            make_policy().spread().set("spec.topology[0].maxskew", 2).obj(),
            "spec.topology[0].maxskew: unknown field",
        ),
        (make_policy().set("spec", "web").obj(), 'spec: must be an object, got "web"'),
        (make_policy().drop("spec").obj(), "spec: required"),
        (make_policy().drop("metadata.name").obj(), "metadata: needs a namespace and a name"),
    ],
)
def test_a_malformed_policy_is_refused_naming_the_field(body: dict[str, Any], message: str) -> None:
    with pytest.raises(spec.PolicyError) as refused:
        spec.compile_policy(body)
    assert str(refused.value).startswith(message)


# spec.preemption ---------------------------------------------------------------------------------


def _preempting(preemption: Any) -> dict[str, Any]:
    return make_policy("web").set("spec.preemption", preemption).obj()


def test_preemption_rules_compile_field_by_field() -> None:
    policy = spec.compile_policy(
        _preempting(
            {
                "exemptQoS": ["Guaranteed", "Burstable"],
                "victimOrder": "QoSThenPriority",
                "scope": "SameNamespace",
                "maxVictimsPerPod": 3,
            }
        )
    )
    assert policy.preemption == spec.Preemption(
        exempt_qos=frozenset({spec.GUARANTEED, spec.BURSTABLE}),
        victim_order=spec.QOS_THEN_PRIORITY,
        same_namespace=True,
        max_victims=3,
    )
    assert policy.preemption.qos_order
    assert policy.preemption.scope == spec.SAME_NAMESPACE
    assert policy.preemption.exempts("Guaranteed")
    assert not policy.preemption.exempts("BestEffort")
    assert not policy.preemption.exempts("")


@pytest.mark.parametrize("preemption", [{}, None, {"exemptQoS": None, "victimOrder": None}])
def test_empty_preemption_rules_are_the_defaults(preemption: Any) -> None:
    rules = spec.compile_policy(_preempting(preemption)).preemption
    assert rules == spec.NO_PREEMPTION_RULES
    assert rules == spec.Preemption(
        exempt_qos=frozenset(), victim_order="Priority", same_namespace=False, max_victims=None
    )
    assert not rules.qos_order
    assert rules.scope == spec.CLUSTER


def test_the_rules_are_part_of_the_compiled_generation() -> None:
    base = make_policy("web").generation(1)
    first = spec.compile_policy(base.obj())
    second = spec.compile_policy(
        base.generation(2).set("spec.preemption", {"maxVictimsPerPod": 1}).obj()
    )
    assert first.preemption != second.preemption
    assert first != second
    assert hash(second.preemption) == hash(spec.Preemption(max_victims=1))


@pytest.mark.parametrize(
    ("preemption", "message"),
    [
        (
            {"maxVictimsPerPod": 0},
            "spec.preemption.maxVictimsPerPod: must be at least 1, got 0",
        ),
        (
            {"maxVictimsPerPod": 10001},
            "spec.preemption.maxVictimsPerPod: must be at most 10000, got 10001",
        ),
        (
            {"maxVictimsPerPod": "3"},
            'spec.preemption.maxVictimsPerPod: must be an integer, got "3"',
        ),
        (
            {"victimOrder": "QoS"},
            'spec.preemption.victimOrder: must be one of Priority, QoSThenPriority, got "QoS"',
        ),
        (
            {"scope": "Namespace"},
            'spec.preemption.scope: must be one of Cluster, SameNamespace, got "Namespace"',
        ),
        (
            {"exemptQoS": ["Guaranteed", "Premium"]},
            "spec.preemption.exemptQoS[1]: must be one of Guaranteed, Burstable, BestEffort, "
            'got "Premium"',
        ),
        (
            {"exemptQoS": ["BestEffort", "Guaranteed", "BestEffort"]},
            'spec.preemption.exemptQoS[2]: duplicate value "BestEffort" '
            "(spec.preemption.exemptQoS[0] has it)",
        ),
        (
            {"exemptQoS": ["Guaranteed", "Burstable", "BestEffort", "Guaranteed"]},
            "spec.preemption.exemptQoS: at most 3 entries, got 4",
        ),
        (
            {"exemptQoS": "Guaranteed"},
            'spec.preemption.exemptQoS: must be a list, got "Guaranteed"',
        ),
        ({"maxVictims": 3}, "spec.preemption.maxVictims: unknown field"),
        ("SameNamespace", 'spec.preemption: must be an object, got "SameNamespace"'),
    ],
)
def test_malformed_preemption_rules_are_refused_naming_the_field(
    preemption: Any, message: str
) -> None:
    with pytest.raises(spec.PolicyError) as refused:
        spec.compile_policy(_preempting(preemption))
    assert str(refused.value).startswith(message)


# Nothing but Policy or PolicyError -----------------------------------------------------------

_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12)
_json = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=20,
)
_fields = st.sampled_from(
    [
        "selector", "priority", "topology", "scoring", "zoneHealth", "deviationBudget",
        "matchLabels", "matchExpressions", "key", "operator", "values", "topologyKey",
        "maxSkew", "minDomains", "whenUnsatisfiable", "strategy", "weights", "window",
        "staleAfter", "maxViolations", "failureRateThreshold", "onExhausted", "spread",
        "preemption", "exemptQoS", "victimOrder", "scope", "maxVictimsPerPod",
    ]
)  # fmt: skip


def _compiles_or_refuses(body: Any) -> None:
    """A Policy, or a PolicyError with a message; any other exception fails the test."""
    outcome: spec.Policy | spec.PolicyError
    try:
        outcome = spec.compile_policy(body)
    except spec.PolicyError as error:
        outcome = error
    assert isinstance(outcome, spec.Policy) or str(outcome)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.text(max_size=12), _json, max_size=5))
def test_any_json_object_compiles_or_is_refused(body: dict[str, Any]) -> None:
    _compiles_or_refuses(body)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(_fields, _json | st.dictionaries(_fields, _json, max_size=4), max_size=6))
def test_any_json_spec_compiles_or_is_refused(raw_spec: dict[str, Any]) -> None:
    _compiles_or_refuses(make_policy().set("spec", raw_spec).obj())


_PATHS = [
    "spec.selector", "spec.selector.matchLabels", "spec.selector.matchExpressions",
    "spec.priority", "spec.topology", "spec.topology[0]", "spec.topology[0].topologyKey",
    "spec.topology[0].maxSkew", "spec.topology[0].minDomains", "spec.scoring",
    "spec.scoring.weights", "spec.scoring.weights.spread", "spec.zoneHealth",
    "spec.zoneHealth.window", "spec.deviationBudget", "spec.deviationBudget.window",
    "spec.deviationBudget.failureRateThreshold", "metadata", "metadata.generation",
    "metadata.uid", "metadata.name", "spec.preemption", "spec.preemption.exemptQoS",
    "spec.preemption.exemptQoS[0]", "spec.preemption.victimOrder", "spec.preemption.scope",
    "spec.preemption.maxVictimsPerPod",
]  # fmt: skip


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(_PATHS), _json)
def test_any_value_in_any_field_of_a_valid_policy_compiles_or_is_refused(
    path: str, value: Any
) -> None:
    builder = (
        make_policy()
        .expression("tier", "In", "a")
        .spread(ZONE, 1, min_domains=2)
        .scoring("MostAllocated", spread=3)
        .zone_health()
        .budget()
        .set(
            "spec.preemption",
            {
                "exemptQoS": ["Guaranteed"],
                "victimOrder": "QoSThenPriority",
                "scope": "SameNamespace",
                "maxVictimsPerPod": 3,
            },
        )
    )
    _compiles_or_refuses(builder.set(path, value).obj())


# spec.gangs ------------------------------------------------------------------------------------


def test_gangs_compile_with_do_not_schedule_by_default() -> None:
    assert spec.compile_policy(make_policy("web").obj()).gangs is None
    policy = spec.compile_policy(
        make_policy("web").set("spec.gangs", {"topologyKey": "rack"}).obj()
    )
    assert policy.gangs == spec.GangTopology(topology_key="rack", hard=True)
    anyway = make_policy("web").gangs(ZONE, hard=False).obj()
    gangs = spec.compile_policy(anyway).gangs
    assert gangs is not None
    assert (gangs.topology_key, gangs.when_unsatisfiable) == (ZONE, "ScheduleAnyway")


@pytest.mark.parametrize(
    ("gangs", "message"),
    [
        ({}, "spec.gangs.topologyKey: required"),
        ({"topologyKey": "-rack"}, 'spec.gangs.topologyKey: "-rack" is not a label key'),
        (
            {"topologyKey": ZONE, "whenUnsatisfiable": "Sometimes"},
            "spec.gangs.whenUnsatisfiable: must be one of DoNotSchedule, ScheduleAnyway, got "
            '"Sometimes"',
        ),
        ({"topologyKey": ZONE, "maxSkew": 1}, "spec.gangs"),
        ("zone", "spec.gangs"),
    ],
)
def test_malformed_gangs_name_the_field(gangs: Any, message: str) -> None:
    with pytest.raises(spec.PolicyError) as error:
        spec.compile_policy(make_policy("web").set("spec.gangs", gangs).obj())
    assert str(error.value).startswith(message)
