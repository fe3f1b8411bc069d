"""The policy engine: answers the scheduler's questions about SchedulingPolicies (which one
governs a pod, with which constraints and weights, may it deviate) and builds their status.

It owns the store (compiled generations), one deviation budget per policy with a budget, the
last decision under each policy, and the status last built for each. The app layer feeds it
the CRD's create/update/resume/delete; the scheduler asks it per batch and reports each
decision back; the status writer pulls ``status`` for the policies marked dirty.

What a policy does to a pod it governs: its topology rules are added to the pod's own spread
constraints, counting the pods its selector picks in its namespace (so a pod with no
constraints of its own no longer gets kube-scheduler's system default spreading: it has
constraints now); its weights and strategy replace the default scoring profile.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from plumb.backend.cache import clustercache as cache_module
from plumb.backend.cache import snapshot
from plumb.backend.records import objects, specs
from plumb.framework import scoring
from plumb.framework.plugins import podtopologyspread
from plumb.kernel import contract
from plumb.policy import budget as budget_module
from plumb.policy import spec as spec_module
from plumb.policy import status as status_module
from plumb.policy import store as store_module
from plumb.policy import timestamps, zonefeed

logger = logging.getLogger(__name__)

JSON = dict[str, Any]


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Recorded:
    """What recording a decision changed that the scheduler reports (events)."""

    reverted: store_module.Reversion | None = None


class PolicyEngine:
    """SchedulingPolicies as the scheduler sees them; one instance per scheduler."""

    def __init__(
        self,
        cache: cache_module.Cache,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store_module.PolicyStore()
        self._cache = cache
        self._clock = clock
        self._budgets: dict[spec_module.Key, budget_module.Budget] = {}
        self._changed_at: dict[spec_module.Key, float | None] = {}
        self._decisions: dict[spec_module.Key, status_module.LastDecision] = {}
        self._previous: dict[spec_module.Key, JSON] = {}
        self.zones = zonefeed.ZoneFeed()
        self._deviations: dict[spec_module.Key, int] = {}  # since plumb started, for metrics
        # status.quota of the SLO-elastic policies (app/quotalimits.py sets it).
        self._quota: dict[spec_module.Key, JSON] = {}
        self.on_dirty: Callable[[str, str], None] = lambda namespace, name: None
        """Called whenever what a policy's status shows may have changed (the status writer's
        ``mark_dirty``)."""

    # Reconciling (app layer) -------------------------------------------------------------------

    def apply(self, obj: Any) -> store_module.PolicyState | None:
        """A policy was created or its spec changed."""
        return self._settle(self.store.apply(obj, self._clock()))

    def resume(self, obj: Any) -> store_module.PolicyState | None:
        """A policy seen again after a restart: take up its revert and budget from status."""
        status = obj.get("status") if isinstance(obj, Mapping) else None
        now = self._clock()
        key = spec_module.object_key(obj)
        known = key is not None and self.store.get(*key) is not None
        state = self._settle(self.store.resume(obj, status, now))
        # Status is taken up once, when plumb first meets the policy: later, what plumb holds
        # is newer than what it last wrote.
        if state is not None and not known and isinstance(status, Mapping):
            self._previous[state.key] = dict(status)
            budget = self._budgets.get(state.key)
            if budget is not None and budget.restore(status.get("budget"), now):
                logger.info(
                    "policy %s/%s: budget taken up from status (%d used since %s)",
                    state.namespace,
                    state.name,
                    budget.used(now),
                    timestamps.format_time(budget.window_start(now)),
                )
        return state

    def take_over(self, obj: Any) -> store_module.PolicyState | None:
        """This replica just became the leader: what the previous leader wrote in the policy's
        status (budget used and window, revert, last status) is newer than anything this
        replica holds, which at best is its startup copy. Take it up, so a budget spent before
        the handover is not spent again."""
        status = obj.get("status") if isinstance(obj, Mapping) else None
        now = self._clock()
        state = self._settle(self.store.resume(obj, status, now))
        if state is None or not isinstance(status, Mapping):
            return state
        self._previous[state.key] = dict(status)
        budget = self._budgets.get(state.key)
        if budget is not None and budget.restore(status.get("budget"), now):
            logger.info(
                "policy %s/%s: budget taken over from status (%d used since %s)",
                state.namespace,
                state.name,
                budget.used(now),
                timestamps.format_time(budget.window_start(now)),
            )
        return state

    def delete(self, namespace: str, name: str) -> None:
        """A policy was deleted: its pods go back to the default behaviour."""
        if self.store.delete(namespace, name):
            logger.info(
                "policy %s/%s deleted: its pods are scheduled by the defaults", namespace, name
            )
        key = (namespace, name)
        self._budgets.pop(key, None)
        self._changed_at.pop(key, None)
        self._decisions.pop(key, None)
        self._previous.pop(key, None)
        self.zones.forget(key)

    def _settle(self, state: store_module.PolicyState | None) -> store_module.PolicyState | None:
        if state is None:
            return None
        now = self._clock()
        policy = state.active
        if policy is None or policy.deviation_budget is None:
            self._budgets.pop(state.key, None)
        else:
            budget = self._budgets.get(state.key)
            if budget is None:
                self._budgets[state.key] = budget_module.Budget(policy.deviation_budget, now)
            else:
                budget.configure(policy.deviation_budget, now)
        budget = self._budgets.get(state.key)
        if budget is not None and state.spec_changed_at != self._changed_at.get(state.key):
            if state.spec_changed_at is not None:
                budget.spec_changed(state.spec_changed_at)
            else:
                budget.spec_settled()
        self._changed_at[state.key] = state.spec_changed_at
        self.zones.track(state.active, state.key)
        if state.problem is not None:
            logger.warning("policy %s/%s: %s", state.namespace, state.name, state.problem)
        self.on_dirty(state.namespace, state.name)
        return state

    # Scheduling (scheduler) --------------------------------------------------------------------

    def governing(self, pod: objects.PodInfo) -> spec_module.Policy | None:
        """The policy in force that governs ``pod``, if any."""
        return self.store.match(pod.namespace, pod.labels)

    def group(self, pod: objects.PodInfo) -> Hashable:
        """Pods of one group share a batch: the same policy generation, or none."""
        policy = self.governing(pod)
        return None if policy is None else (policy.namespace, policy.name, policy.generation)

    @staticmethod
    def govern(pod: objects.PodInfo, policy: spec_module.Policy) -> objects.PodInfo:
        """``pod`` with the policy's topology rules added to its own spread constraints."""
        return podtopologyspread.with_constraints(pod, PolicyEngine.constraints(policy))

    def profile(
        self, policy: spec_module.Policy, snap: snapshot.Snapshot, base: scoring.Profile
    ) -> scoring.Profile:
        """The profile of the pods ``policy`` governs: their scheduler profile ``base`` with
        the policy's weights and strategy (when it has ``spec.scoring``) and its zone factors
        as of now."""
        w = policy.scoring.weights
        zone_key, factors = self.zones.factors(policy, snap, self._clock())
        weights = list(base.weights)
        weights[contract.ZONE_HEALTH] = w.zone_health
        strategy = base.strategy
        if policy.scoring.given:
            # kernel/contract.py SCORE_PLUGINS order; `affinity` weighs both affinity plugins.
            for plugin, weight in (
                (contract.FIT, w.resources),
                (contract.BALANCED, w.balance),
                (contract.TAINT, w.taints),
                (contract.NODE_AFFINITY, w.affinity),
                (contract.SPREAD, w.spread),
                (contract.INTER_POD, w.affinity),
            ):
                weights[plugin] = weight
            strategy = policy.scoring.strategy.value
        return dataclasses.replace(
            base,
            weights=tuple(weights),
            strategy=strategy,
            zone_key=zone_key,
            zone_factors=factors,
        )

    def observe_node(self, name: str, body: Mapping[str, Any] | None) -> None:
        """A node event (None: deleted), for zone health."""
        self.zones.observe_node(name, body)

    def observe_bind(
        self, pod: objects.PodInfo, node: str, *, success: bool, latency: float
    ) -> None:
        """A binding's outcome and latency (seconds), for the zone health of its policy."""
        policy = self.governing(pod)
        info = self._cache.nodes.info(node)
        if policy is not None and info is not None:
            zone = info.labels.get(policy.zone_health.topology_key)
            self.zones.observe_bind(
                policy, zone, success=success, latency=latency, now=self._clock()
            )

    # Metrics -----------------------------------------------------------------------------------

    def zone_healths(self) -> dict[str, float]:
        """h per zone, for ``plumb_zone_health``."""
        return self.zones.healths(self._clock())

    def budget_state(self, policy: spec_module.Policy) -> budget_module.BudgetState | None:
        """The policy's budget now; None without a deviationBudget."""
        budget = self._budgets.get(policy.key)
        return budget.state(self._clock()) if budget is not None else None

    def budgets_remaining(self) -> dict[spec_module.Key, int]:
        """Deviations left per policy with a budget, for ``plumb_policy_budget_remaining``."""
        now = self._clock()
        return {key: budget.remaining(now) for key, budget in self._budgets.items()}

    def deviations(self) -> dict[spec_module.Key, int]:
        """Deviations per policy since plumb started, for ``plumb_policy_deviations_total``."""
        return dict(self._deviations)

    @staticmethod
    def constraints(policy: spec_module.Policy) -> tuple[specs.SpreadConstraint, ...]:
        """The policy's topology rules as spread constraints over the pods it selects."""
        return tuple(
            specs.SpreadConstraint(
                max_skew=rule.max_skew,
                topology_key=rule.topology_key,
                when_unsatisfiable=rule.when_unsatisfiable,
                selector=policy.selector,
                min_domains=rule.min_domains or 1,
            )
            for rule in policy.topology
        )

    def may_deviate(self, policy: spec_module.Policy, pod: objects.PodInfo | None = None) -> bool:
        """Whether the budget allows a deviation, or ``pod`` has one already paid for."""
        budget = self._budgets.get(policy.key)
        if budget is None:
            return False
        now = self._clock()
        return budget.allows_deviation(now) or (pod is not None and budget.charged(pod.uid, now))

    def spend(self, policy: spec_module.Policy, pod: objects.PodInfo) -> bool:
        """Take one deviation from the policy's budget for ``pod`` (once per pod in a window,
        budget.py); False when none is left."""
        return self._charge(policy, pod.uid)

    def may_span(self, policy: spec_module.Policy, group_uid: str) -> bool:
        """Whether the budget allows a pod group (its PodGroup's uid) to span topology domains
        beyond ``spec.gangs``, or that group's deviation is paid for already in the window."""
        budget = self._budgets.get(policy.key)
        if budget is None:
            return False
        now = self._clock()
        return budget.allows_deviation(now) or budget.charged(group_uid, now)

    def spend_span(self, policy: spec_module.Policy, group_uid: str) -> bool:
        """Take one deviation for a whole pod group spanning domains: charged to its PodGroup's
        uid (in ``chargedPods``), once per window however many members it places."""
        return self._charge(policy, group_uid)

    def _charge(self, policy: spec_module.Policy, uid: str) -> bool:
        budget = self._budgets.get(policy.key)
        if budget is None:
            return False
        now = self._clock()
        used = budget.used(now)
        if not budget.record_deviation(now, uid):
            return False
        if budget.used(now) > used:  # not charged already (by an attempt that did not stand)
            self._deviations[policy.key] = self._deviations.get(policy.key, 0) + 1
            self.on_dirty(policy.namespace, policy.name)
        return True

    def refund(self, policy: spec_module.Policy, pod: objects.PodInfo) -> None:
        """The placement ``pod``'s deviation paid for did not stand (its binding failed or was
        abandoned, or it was placed within the rules): the deviation goes back to the budget."""
        budget = self._budgets.get(policy.key)
        if budget is not None and budget.refund(pod.uid, self._clock()):
            logger.info(
                "policy %s/%s: the deviation charged to pod %s is refunded: its placement did "
                "not stand",
                policy.namespace,
                policy.name,
                pod.key,
            )
            self.on_dirty(policy.namespace, policy.name)

    def budget_text(self, policy: spec_module.Policy) -> str:
        """The policy and its budget, in a sentence for events and FailedScheduling."""
        budget = self._budgets.get(policy.key)
        name = f"SchedulingPolicy {policy.namespace}/{policy.name}"
        if budget is None:
            return f"{name} allows no deviation (no deviationBudget)"
        now = self._clock()
        state = budget.state(now)
        since = timestamps.format_time(state.window_start)
        if state.exhausted == budget_module.Exhaustion.FAILURE_RATE:
            return (
                f"{name}'s deviation budget is closed: failure rate {state.failure_rate:.2f} "
                f"is above {state.failure_rate_threshold:.2f} in the window since {since}"
            )
        return (
            f"{name}'s deviation budget: {state.used} of {state.max_violations} used, "
            f"{state.remaining} left in the window since {since}"
        )

    def record(
        self,
        policy: spec_module.Policy,
        pod: objects.PodInfo,
        node: str | None,
        *,
        deviation: bool = False,
        message: str = "",
    ) -> Recorded:
        """A decision for a governed pod: counts towards the failure rate, becomes the
        policy's last decision, and may trip a revert."""
        now = self._clock()
        self._decisions[policy.key] = status_module.LastDecision(
            pod=pod.key,
            node=node or "",
            result="Deviated" if deviation else ("Scheduled" if node else "Unschedulable"),
            deviation=deviation,
            generation=policy.generation,
            time=now,
            message=message,
        )
        outcome = Recorded()
        budget = self._budgets.get(policy.key)
        if budget is not None:
            budget.record_attempt(node is not None, now)
            if budget.should_revert(now):
                reason = (
                    f"failure rate {budget.failure_rate(now):.2f} above "
                    f"{budget.spec.failure_rate_threshold:.2f} after generation "
                    f"{policy.generation} came into force"
                )
                state = self.store.revert(policy.namespace, policy.name, now, reason)
                if state is not None and state.reverted is not None:
                    budget.spec_settled()
                    self._changed_at[policy.key] = state.spec_changed_at
                    outcome = Recorded(reverted=state.reverted)
                    logger.warning(
                        "policy %s/%s reverted to generation %d: %s",
                        policy.namespace,
                        policy.name,
                        state.reverted.to_generation,
                        reason,
                    )
        self.on_dirty(policy.namespace, policy.name)
        return outcome

    # Status (writer) ---------------------------------------------------------------------------

    def uid_of(self, namespace: str, name: str) -> str:
        """The uid of the policy object known by that name ("" when none)."""
        state = self.store.get(namespace, name)
        return "" if state is None else state.uid

    def status(self, namespace: str, name: str) -> JSON | None:
        """The status plumb wants on a policy now; None when it is unknown."""
        state = self.store.get(namespace, name)
        if state is None:
            return None
        now = self._clock()
        budget = self._budgets.get(state.key)
        built = status_module.build(
            state,
            placement=self.placement(state.active),
            budget=budget.state(now) if budget is not None else None,
            decision=self._decisions.get(state.key),
            previous=self._previous.get(state.key),
            now=now,
        )
        quota = self._quota.get(state.key)
        if quota is not None:
            built["quota"] = quota
        self._previous[state.key] = built
        return built

    def quota_status(self, key: spec_module.Key, status: JSON | None) -> None:
        """The policy's ``status.quota`` (None: none); marks it dirty when it changed."""
        if self._quota.get(key) == status:
            return
        if status is None:
            self._quota.pop(key, None)
        else:
            self._quota[key] = status
        self.on_dirty(*key)

    def placement(self, policy: spec_module.Policy | None) -> status_module.Placement:
        """Where the pods the policy's selector picks are placed, per topology domain."""
        if policy is None:
            return status_module.Placement()
        selection = podtopologyspread.selection_of(policy.selector, policy.namespace)
        counts = self._cache.count_rows([selection])[0]
        statics = self._cache.snapshot().statics
        domains: dict[str, dict[str, int]] = {}
        for rule in policy.topology:
            ids = statics.label_ids(rule.topology_key)
            values = statics.values(rule.topology_key)
            per_value = dict.fromkeys(values, 0)
            for node, value_id in enumerate(ids):
                if value_id >= 0:
                    per_value[values[value_id]] += int(counts[node])
            domains[rule.topology_key] = per_value
        return status_module.Placement(matched_pods=int(counts.sum()), domains=domains)
