"""A policy's status as `kubectl get spol` and `kubectl describe spol` show it: domains, skew and
its summary, the budget, the last decision, and the four conditions, whose lastTransitionTime
moves only when their status does. Every status built here fits the CRD's status schema."""

from __future__ import annotations

import importlib
import pathlib
from collections.abc import Mapping
from typing import Any

import pytest

from plumb.policy import budget as budget_module
from plumb.policy import spec, status, timestamps
from plumb.policy import store as store_module
from tests.support.policy_builders import HOSTNAME, ZONE, make_policy

T0 = 1_800_000_000.0
STAMP0 = "2027-01-15T08:00:00Z"

# PyYAML comes with the kubernetes client, without type hints.
yaml: Any = importlib.import_module("yaml")
CRD = pathlib.Path(__file__).parents[3] / "crds" / "schedulingpolicies.scheduling.plumb.dev.yaml"


def _status_schema() -> Mapping[str, Any]:
    crd = yaml.safe_load(CRD.read_text())
    schema: Mapping[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    status_schema: Mapping[str, Any] = schema["properties"]["status"]
    return status_schema


def _fits(value: Any, schema: Mapping[str, Any], where: str = "status") -> None:
    """The subset of OpenAPI the status schema uses; a field the schema does not know would be
    pruned by the API server, so it fails here too."""
    kind = str(schema.get("type"))
    checks = {
        "object": lambda v: isinstance(v, dict),
        "array": lambda v: isinstance(v, list),
        "string": lambda v: isinstance(v, str),
        "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        "boolean": lambda v: isinstance(v, bool),
    }
    assert checks[kind](value), f"{where}: {value!r} is not {kind}"
    if "enum" in schema:
        assert value in schema["enum"], f"{where}: {value!r} not in {schema['enum']}"
    if "minimum" in schema:
        assert value >= schema["minimum"], where
    if "maxLength" in schema:
        assert len(value) <= schema["maxLength"], where
    if schema.get("format") == "date-time":
        assert timestamps.parse_time(value) is not None, f"{where}: {value!r} is no date-time"
    if kind == "array":
        for i, item in enumerate(value):
            _fits(item, schema["items"], f"{where}[{i}]")
    if kind == "object":
        for field in schema.get("required", ()):
            assert field in value, f"{where}.{field}: required"
        properties = schema.get("properties", {})
        for field, item in value.items():
            if field in properties:
                _fits(item, properties[field], f"{where}.{field}")
            elif "additionalProperties" in schema:
                _fits(item, schema["additionalProperties"], f"{where}.{field}")
            else:
                assert schema.get("x-kubernetes-preserve-unknown-fields"), (
                    f"{where}.{field}: not in the schema; the API server would prune it"
                )


def _state(*bodies: dict[str, Any]) -> store_module.PolicyState:
    store = store_module.PolicyStore()
    state = None
    for i, body in enumerate(bodies):
        state = store.apply(body, now=T0 + i)
    assert state is not None
    return state


def _build(
    state: store_module.PolicyState,
    *,
    domains: Mapping[str, Mapping[str, int]] | None = None,
    matched: int = 0,
    budget: budget_module.BudgetState | None = None,
    decision: status.LastDecision | None = None,
    previous: Any = None,
    now: float = T0,
) -> dict[str, Any]:
    built = status.build(
        state,
        placement=status.Placement(matched_pods=matched, domains=domains or {}),
        budget=budget,
        decision=decision,
        previous=previous,
        now=now,
    )
    _fits(built, _status_schema())
    return built


def _condition(built: Mapping[str, Any], kind: str) -> dict[str, Any]:
    found: dict[str, Any] = next(c for c in built["conditions"] if c["type"] == kind)
    return found


def _budget_state(used: int, *, failures: int = 0) -> budget_module.BudgetState:
    limits = spec.DeviationBudget(max_violations=3, window=600)
    budget = budget_module.Budget(limits, now=T0)
    for i in range(used):
        budget.record_deviation(T0 + 1, f"uid-{i}")
    for i in range(10):
        budget.record_attempt(i >= failures, T0 + 2)
    return budget.state(T0 + 3)


def test_a_whole_status_fits_the_crd_and_reads_like_kubectl_get() -> None:
    state = _state(
        make_policy("web").spread(ZONE, 1, min_domains=3).spread(HOSTNAME, 3).budget().obj()
    )
    decision = status.LastDecision(
        pod="shop/web-1",
        node="n3",
        result="Scheduled",
        deviation=True,
        generation=1,
        time=T0 + 5,
        message="beyond maxSkew 1 on topology.kubernetes.io/zone: no node met it",
    )
    built = _build(
        state,
        matched=6,
        domains={ZONE: {"a": 2, "b": 2, "c": 2}, HOSTNAME: {"n1": 2, "n2": 2, "n3": 1, "n4": 1}},
        budget=_budget_state(1),
        decision=decision,
    )
    assert built["observedGeneration"] == built["activeGeneration"] == 1
    assert built["matchedPods"] == 6
    assert built["domains"][ZONE] == {"a": 2, "b": 2, "c": 2}
    assert built["skew"] == {ZONE: 0, HOSTNAME: 1}
    assert built["skewSummary"] == "1/3"
    assert built["budget"] == {
        "used": 1,
        "remaining": 2,
        "windowStart": STAMP0,
        "failureRate": 0.0,
        "chargedPods": ["uid-0"],
    }
    assert built["lastDecision"] == {
        "pod": "shop/web-1",
        "node": "n3",
        "result": "Scheduled",
        "deviation": True,
        "generation": 1,
        "time": "2027-01-15T08:00:05Z",
        "message": decision.message,
    }
    assert [(c["type"], c["status"], c["reason"]) for c in built["conditions"]] == [
        ("Ready", "True", "Applied"),
        ("Degraded", "False", "WithinLimits"),
        ("BudgetExhausted", "False", "BudgetAvailable"),
        ("Reverted", "False", "SpecInForce"),
    ]
    assert all(c["observedGeneration"] == 1 for c in built["conditions"])
    assert all(c["lastTransitionTime"] == STAMP0 for c in built["conditions"])


def test_skew_over_a_hard_max_skew_is_degraded_and_shows_in_the_summary() -> None:
    state = _state(make_policy("web").spread(ZONE, 1).obj())
    built = _build(state, domains={ZONE: {"a": 3, "b": 1, "c": 2}})
    assert built["skew"] == {ZONE: 2}
    assert built["skewSummary"] == "2/1"
    degraded = _condition(built, "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "SkewExceeded")
    assert degraded["message"] == f"{ZONE}: skew 2 is over maxSkew 1"


def test_with_fewer_domains_than_min_domains_the_fewest_counts_as_zero() -> None:
    state = _state(make_policy("web").spread(ZONE, 2, min_domains=3).obj())
    built = _build(state, domains={ZONE: {"a": 1, "b": 1}})
    assert built["skew"] == {ZONE: 1}
    degraded = _condition(built, "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "TooFewDomains")


def test_the_summary_shows_the_key_closest_to_its_limit() -> None:
    state = _state(make_policy("web").spread(HOSTNAME, 4).spread(ZONE, 2).obj())
    built = _build(state, domains={HOSTNAME: {"n1": 3, "n2": 0}, ZONE: {"a": 2, "b": 1}})
    assert built["skew"] == {HOSTNAME: 3, ZONE: 1}
    assert built["skewSummary"] == "3/4"


def test_a_topology_key_no_node_carries_makes_the_policy_not_ready() -> None:
    state = _state(make_policy("web").spread("example.com/rack", 1).obj())
    built = _build(state, domains={})
    ready = _condition(built, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "TopologyKeyNotFound")
    assert "example.com/rack" in ready["message"]


def test_a_malformed_update_is_not_ready_naming_the_field_while_the_last_good_one_rules() -> None:
    state = _state(
        make_policy("web").spread(ZONE, 1).obj(),
        make_policy("web").spread(ZONE, 1).set("spec.topology[0].maxSkew", 0).generation(2).obj(),
    )
    built = _build(state, domains={ZONE: {"a": 1}})
    assert (built["observedGeneration"], built["activeGeneration"]) == (2, 1)
    ready = _condition(built, "Ready")
    assert (ready["status"], ready["reason"], ready["observedGeneration"]) == (
        "False",
        "InvalidSpec",
        2,
    )
    assert ready["message"] == (
        "generation 2 is not applied: spec.topology[0].maxSkew: must be at least 1, got 0; "
        "generation 1 stays in force"
    )


def test_a_malformed_first_generation_says_its_pods_get_the_defaults() -> None:
    state = _state(make_policy("web").set("spec.deviationBudget", {"window": "ten minutes"}).obj())
    built = _build(state)
    assert "activeGeneration" not in built
    ready = _condition(built, "Ready")
    assert ready["status"] == "False"
    assert ready["message"].startswith("spec.deviationBudget.window: must be a duration")
    assert ready["message"].endswith("the pods it selects are scheduled with the defaults")
    assert _condition(built, "Degraded")["status"] == "Unknown"


def test_a_revert_shows_in_the_conditions_and_the_active_generation() -> None:
    store = store_module.PolicyStore()
    store.apply(make_policy("web").budget(on_exhausted="Revert").obj(), now=T0)
    store.apply(
        make_policy("web").budget(on_exhausted="Revert").priority(1).generation(2).obj(), now=T0
    )
    state = store.revert("shop", "web", now=T0 + 60, message="failure rate 0.50 passed 0.15")
    assert state is not None
    built = _build(state, budget=_budget_state(0, failures=5))
    assert (built["observedGeneration"], built["activeGeneration"]) == (2, 1)
    reverted = _condition(built, "Reverted")
    assert (reverted["status"], reverted["reason"]) == ("True", "FailureRateExceeded")
    assert reverted["message"] == (
        "generation 2 reverted to generation 1 at 2027-01-15T08:01:00Z: failure rate 0.50 "
        "passed 0.15; it stays in force until the spec changes"
    )
    assert (_condition(built, "Ready")["status"], _condition(built, "Ready")["reason"]) == (
        "False",
        "Reverted",
    )
    exhausted = _condition(built, "BudgetExhausted")
    assert (exhausted["status"], exhausted["reason"]) == ("True", "FailureRateExceeded")


def test_a_spent_budget_is_exhausted_and_says_until_when() -> None:
    state = _state(make_policy("web").spread(ZONE, 1).budget().obj())
    built = _build(state, domains={ZONE: {"a": 1}}, budget=_budget_state(3))
    assert built["budget"]["remaining"] == 0
    exhausted = _condition(built, "BudgetExhausted")
    assert (exhausted["status"], exhausted["reason"]) == ("True", "BudgetSpent")
    assert exhausted["message"] == (
        f"3 of 3 deviations used in the window that started {STAMP0}; pods that fit only "
        "beyond maxSkew wait until 2027-01-15T08:10:00Z"
    )


def test_without_a_budget_there_is_no_budget_column() -> None:
    built = _build(_state(make_policy("web").obj()), budget=_budget_state(1))
    assert "budget" not in built
    assert "skewSummary" not in built
    exhausted = _condition(built, "BudgetExhausted")
    assert (exhausted["status"], exhausted["reason"]) == ("False", "NoBudget")


def test_last_transition_time_moves_only_when_a_condition_changes_status() -> None:
    state = _state(make_policy("web").spread(ZONE, 1).budget().obj())
    first = _build(state, domains={ZONE: {"a": 1, "b": 1}}, budget=_budget_state(1), now=T0)
    # Later, one more deviation: BudgetExhausted's message changes, its status does not.
    later = T0 + 300
    second = _build(
        state, domains={ZONE: {"a": 3, "b": 1}}, budget=_budget_state(2), previous=first, now=later
    )
    assert (
        _condition(second, "BudgetExhausted")["message"]
        != _condition(first, "BudgetExhausted")["message"]
    )
    assert _condition(second, "BudgetExhausted")["lastTransitionTime"] == STAMP0
    assert _condition(second, "Ready")["lastTransitionTime"] == STAMP0
    # Degraded flipped to True (skew 2 over 1): its time is now.
    assert _condition(second, "Degraded")["status"] == "True"
    assert _condition(second, "Degraded")["lastTransitionTime"] == timestamps.format_time(later)


@pytest.mark.parametrize(
    "previous",
    [None, "garbage", {"conditions": "no"}, {"conditions": [1, {"type": 2}]},
     {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "soon"}]}],
)  # fmt: skip
def test_a_malformed_previous_status_is_ignored(previous: Any) -> None:
    built = _build(_state(make_policy("web").obj()), previous=previous, now=T0 + 7)
    assert _condition(built, "Ready")["lastTransitionTime"] == "2027-01-15T08:00:07Z"


def test_the_last_decision_is_kept_until_there_is_a_new_one() -> None:
    state = _state(make_policy("web").obj())
    kept = {"pod": "shop/web-0", "node": "n1", "result": "Scheduled", "extra": "kept"}
    built = _build(state, previous={"lastDecision": kept})
    assert built["lastDecision"] == kept


@pytest.mark.parametrize(
    "wrong",
    [
        {"skew": {ZONE: "2"}},
        {"domains": {ZONE: {"a": 1.5}}},
        {"budget": {"windowStart": "now"}},
        {"conditions": [{"type": "Ready", "status": "Yes"}]},
        {"conditions": [{"status": "True"}]},
        {"matched": 3},
    ],
)
def test_the_schema_check_itself_refuses_what_the_api_server_would(wrong: Any) -> None:
    with pytest.raises(AssertionError):
        _fits(wrong, _status_schema())
