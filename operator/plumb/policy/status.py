"""A SchedulingPolicy's status, in the CRD's status schema, from the store's state, where the
governed pods are, the budget and the last decision.

**Domains and skew.** A domain of a topology key is a value of that label on an eligible node
(the caller's ``Placement`` lists every such value, with 0 for a domain holding no governed
pod). The skew of a key is the most governed pods in a domain minus the fewest, the fewest
counted as 0 while there are fewer domains than ``minDomains`` (PodTopologySpread's rule).
``skewSummary`` is ``<skew>/<maxSkew>`` for the key with the highest skew / maxSkew, the first
in spec order on a tie.

**Conditions.** Ready, Degraded, BudgetExhausted and Reverted, in metav1.Condition's shape:
``lastTransitionTime`` is carried over from the previous status while a condition's status
stays the same, and is ``now`` when it changes. Reasons are CamelCase constants below.

The result is the whole status plumb wants on the object; fields it does not want are left out
(the writer turns the difference into a merge patch). Purely computational.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from plumb.policy import budget as budget_module
from plumb.policy import spec as spec_module
from plumb.policy import store as store_module
from plumb.policy import timestamps

__all__ = [
    "CONDITION_TYPES",
    "LastDecision",
    "Placement",
    "Reason",
    "build",
    "condition",
    "skew_of",
]

CONDITION_TYPES = ("Ready", "Degraded", "BudgetExhausted", "Reverted")
JSON = dict[str, Any]


class Reason:
    APPLIED = "Applied"
    INVALID_SPEC = "InvalidSpec"
    REVERTED = "Reverted"
    TOPOLOGY_KEY_NOT_FOUND = "TopologyKeyNotFound"
    WITHIN_LIMITS = "WithinLimits"
    SKEW_EXCEEDED = "SkewExceeded"
    TOO_FEW_DOMAINS = "TooFewDomains"
    NOT_APPLIED = "NotApplied"
    NO_BUDGET = "NoBudget"
    NOT_MEASURED = "NotMeasured"
    BUDGET_AVAILABLE = "BudgetAvailable"
    BUDGET_SPENT = budget_module.Exhaustion.SPENT
    FAILURE_RATE_EXCEEDED = budget_module.Exhaustion.FAILURE_RATE
    SPEC_IN_FORCE = "SpecInForce"
    REVERT_LOST = "RevertLost"


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Placement:
    """Where the governed pods are: how many, and per topology key the pods in each domain
    (every value an eligible node carries, 0 included)."""

    matched_pods: int = 0
    domains: Mapping[str, Mapping[str, int]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class LastDecision:
    """The latest placement decided under a policy (``status.lastDecision``)."""

    pod: str  # namespace/name
    node: str
    result: str
    deviation: bool
    generation: int
    time: float  # epoch seconds
    message: str = ""


def build(
    state: store_module.PolicyState,
    *,
    placement: Placement,
    budget: budget_module.BudgetState | None,
    decision: LastDecision | None,
    previous: Any,
    now: float,
) -> JSON:
    """The status for one policy. ``previous`` is the status on the object (or the last one
    built), read for lastTransitionTime and to keep lastDecision when ``decision`` is None;
    anything malformed in it is ignored."""
    previous = previous if isinstance(previous, Mapping) else {}
    policy = state.active
    rules = policy.topology if policy is not None else ()
    status: JSON = {
        "observedGeneration": state.observed_generation,
        "matchedPods": max(0, placement.matched_pods),
    }
    if policy is not None:
        status["activeGeneration"] = policy.generation
    domains = {
        rule.topology_key: {
            value: max(0, pods)
            for value, pods in sorted(placement.domains.get(rule.topology_key, {}).items())
        }
        for rule in rules
    }
    skews = {rule.topology_key: skew_of(domains[rule.topology_key], rule) for rule in rules}
    if rules:
        status["domains"] = domains
        status["skew"] = skews
        status["skewSummary"] = _summary(rules, skews)
    if budget is not None and policy is not None and policy.deviation_budget is not None:
        status["budget"] = {
            "used": budget.used,
            "remaining": budget.remaining,
            "windowStart": timestamps.format_time(budget.window_start),
            "failureRate": round(budget.failure_rate, 4),
            "chargedPods": list(budget.charged),
        }
    if decision is not None:
        status["lastDecision"] = _decision(decision)
    elif isinstance(previous.get("lastDecision"), Mapping):
        status["lastDecision"] = dict(previous["lastDecision"])
    earlier = _conditions_by_type(previous.get("conditions"))
    wanted = (
        ("Ready", *_ready(state, domains)),
        ("Degraded", *_degraded(state, domains, skews)),
        ("BudgetExhausted", *_exhausted(state, budget)),
        ("Reverted", *_reverted(state)),
    )
    status["conditions"] = [
        condition(kind, value, reason, message, state.observed_generation, earlier.get(kind), now)
        for kind, value, reason, message in wanted
    ]
    return status


def skew_of(counts: Mapping[str, int], rule: spec_module.TopologyRule) -> int:
    """Most pods in a domain minus the fewest (0 with fewer domains than minDomains)."""
    if not counts:
        return 0
    fewest = min(counts.values())
    if rule.min_domains is not None and len(counts) < rule.min_domains:
        fewest = 0
    return max(counts.values()) - fewest


def condition(
    kind: str,
    value: str,
    reason: str,
    message: str,
    generation: int,
    earlier: Mapping[str, Any] | None,
    now: float,
) -> JSON:
    """One condition; its lastTransitionTime moves only when its status changes."""
    since = earlier.get("lastTransitionTime") if earlier is not None else None
    unchanged = earlier is not None and earlier.get("status") == value
    if not (unchanged and timestamps.parse_time(since) is not None):
        since = timestamps.format_time(now)
    return {
        "type": kind,
        "status": value,
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
        "lastTransitionTime": since,
    }


# The four conditions: (status, reason, message) -------------------------------------------------

ConditionValue = tuple[str, str, str]


def _ready(
    state: store_module.PolicyState, domains: Mapping[str, Mapping[str, int]]
) -> ConditionValue:
    policy, observed = state.active, state.observed_generation
    if state.problem is not None:
        if policy is None:
            return (
                "False",
                Reason.INVALID_SPEC,
                f"{state.problem}; the policy is not applied: the pods it selects are scheduled "
                "with the defaults",
            )
        return (
            "False",
            Reason.INVALID_SPEC,
            f"generation {observed} is not applied: {state.problem}; generation "
            f"{policy.generation} stays in force",
        )
    if policy is None:
        return ("False", Reason.NOT_APPLIED, "no generation of this policy is in force")
    if state.reverted is not None:
        return (
            "False",
            Reason.REVERTED,
            f"generation {state.reverted.from_generation} was reverted; generation "
            f"{policy.generation} is in force until the spec changes",
        )
    missing = [r.topology_key for r in policy.topology if r.hard and not domains[r.topology_key]]
    if missing:
        return (
            "False",
            Reason.TOPOLOGY_KEY_NOT_FOUND,
            f"no eligible node carries the topology key {', '.join(missing)}: the pods this "
            "policy governs cannot be placed (DoNotSchedule) until nodes carry it",
        )
    return ("True", Reason.APPLIED, f"generation {policy.generation} is in force")


def _degraded(
    state: store_module.PolicyState,
    domains: Mapping[str, Mapping[str, int]],
    skews: Mapping[str, int],
) -> ConditionValue:
    policy = state.active
    if policy is None:
        return ("Unknown", Reason.NOT_APPLIED, "no generation of this policy is in force")
    findings: list[tuple[str, str]] = []
    for rule in policy.topology:
        key, counts = rule.topology_key, domains[rule.topology_key]
        if not counts:
            if not rule.hard:
                findings.append((Reason.TOPOLOGY_KEY_NOT_FOUND, f"no eligible node carries {key}"))
            continue
        if rule.hard and skews[key] > rule.max_skew:
            findings.append(
                (
                    Reason.SKEW_EXCEEDED,
                    f"{key}: skew {skews[key]} is over maxSkew {rule.max_skew}",
                )
            )
        if rule.min_domains is not None and len(counts) < rule.min_domains:
            findings.append(
                (
                    Reason.TOO_FEW_DOMAINS,
                    f"{key}: {len(counts)} domain(s), fewer than minDomains {rule.min_domains}, "
                    "so the fewest counts as 0",
                )
            )
    if not findings:
        return ("False", Reason.WITHIN_LIMITS, "the governed pods are within every maxSkew")
    return ("True", findings[0][0], "; ".join(message for _, message in findings))


def _exhausted(
    state: store_module.PolicyState, budget: budget_module.BudgetState | None
) -> ConditionValue:
    policy = state.active
    spec = policy.deviation_budget if policy is not None else None
    if spec is None:
        return ("False", Reason.NO_BUDGET, "no deviationBudget: the policy never deviates")
    if budget is None:
        return ("Unknown", Reason.NOT_MEASURED, "the budget has not been measured yet")
    until = timestamps.format_time(budget.window_end)
    if budget.exhausted == budget_module.Exhaustion.SPENT:
        return (
            "True",
            Reason.BUDGET_SPENT,
            f"{budget.used} of {budget.max_violations} deviations used in the window that "
            f"started {timestamps.format_time(budget.window_start)}; pods that fit only "
            f"beyond maxSkew wait until {until}",
        )
    if budget.exhausted == budget_module.Exhaustion.FAILURE_RATE:
        return (
            "True",
            Reason.FAILURE_RATE_EXCEEDED,
            f"failure rate {budget.failure_rate:.2f} over {budget.attempts} attempts is above "
            f"failureRateThreshold {budget.failure_rate_threshold:g}; no deviations until {until}",
        )
    return (
        "False",
        Reason.BUDGET_AVAILABLE,
        f"{budget.remaining} of {budget.max_violations} deviations left until {until}",
    )


def _reverted(state: store_module.PolicyState) -> ConditionValue:
    if state.reverted is not None:
        r = state.reverted
        why = f": {r.message}" if r.message else ""
        return (
            "True",
            Reason.FAILURE_RATE_EXCEEDED,
            f"generation {r.from_generation} reverted to generation {r.to_generation} at "
            f"{timestamps.format_time(r.at)}{why}; it stays in force until the spec changes",
        )
    if state.revert_lost is not None:
        return (
            "False",
            Reason.REVERT_LOST,
            f"generation {state.revert_lost}, which a revert had put in force, was lost in a "
            f"restart (the API server keeps only the current spec); generation "
            f"{state.observed_generation} is in force again",
        )
    return ("False", Reason.SPEC_IN_FORCE, "the spec in force is the latest one plumb read")


# Helpers -------------------------------------------------------------------------------------


def _summary(rules: Sequence[spec_module.TopologyRule], skews: Mapping[str, int]) -> str:
    tightest = max(rules, key=lambda r: (skews[r.topology_key] / r.max_skew, -rules.index(r)))
    return f"{skews[tightest.topology_key]}/{tightest.max_skew}"


def _decision(decision: LastDecision) -> JSON:
    out: JSON = {
        "pod": decision.pod,
        "node": decision.node,
        "result": decision.result,
        "deviation": decision.deviation,
        "generation": decision.generation,
        "time": timestamps.format_time(decision.time),
    }
    if decision.message:
        out["message"] = decision.message
    return out


def _conditions_by_type(raw: Any) -> dict[str, Mapping[str, Any]]:
    if not isinstance(raw, list):
        return {}
    return {c["type"]: c for c in raw if isinstance(c, Mapping) and isinstance(c.get("type"), str)}
