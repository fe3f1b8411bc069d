"""CapacityScheduling's victims on a node (scheduler-plugins v0.34.7's SelectVictimsOnNode), used
instead of DefaultPreemption's wherever the cluster has ElasticQuotas.

Who may be a victim depends on the preemptor's namespace:
- without a quota: the lower-priority pods of namespaces without a quota (quota namespaces are
  out of its reach);
- with a quota whose use, with the preemptor and its namespace's nominated pods, would pass its
  min: the lower-priority pods of its own namespace;
- with a quota still under its min (its guaranteed share is borrowed): the pods, of any
  priority, of other quota namespaces that use more than their min (checked pod by pod as the
  earlier victims are taken off).
After all of them are taken off the pod must pass the filters and, with a quota, fit its max
and the sum of the mins ("global quota max exceeded" otherwise); then victims are reprieved,
those breaking a disruption budget first, most important first, as long as the pod still fits
and the quotas still hold with the nominated requests PreFilter counted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from plumb.backend.cache import quotas
from plumb.backend.records import objects, quotaobjects
from plumb.backend.records.quotaobjects import Bound
from plumb.framework.plugins import capacityscheduling
from plumb.preemption import evaluator
from plumb.preemption.evaluator import Candidate, NodeSearch, Pod

QUOTA_EXCEEDED = "global quota max exceeded"


def no_victims(node: str, pod: Pod) -> str:
    """The reason (UnschedulableAndUnresolvable) for a node with no potential victim."""
    return f"No victims found on node {node} for preemptor pod {pod.name}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class QuotaView:
    """The quotas as one preemption reads them: each quota namespace's bounds and use, and the
    preemptor's requests as PreFilter summed them (with its nominated pods)."""

    lower: Mapping[str, Bound]
    upper: Mapping[str, Bound]
    used: Mapping[str, Mapping[str, int]]
    request: Mapping[str, int]
    in_quota: Mapping[str, int]
    everywhere: Mapping[str, int]

    @property
    def total_min(self) -> Bound:
        return Bound(quotaobjects.total(bound.values for bound in self.lower.values()), 0)


def view_of(
    pod: objects.PodInfo, store: quotas.QuotaStore, nominated: Sequence[objects.PodInfo]
) -> QuotaView:
    """The quotas as ``pod``'s preemption reads them now (``nominated``: every pod nominated to
    a node)."""
    counted = capacityscheduling.nominated(pod, store, nominated)
    request = quotas.request(pod)
    held = list(store)
    return QuotaView(
        lower={quota.namespace: quota.lower for quota in held},
        upper={quota.namespace: store.upper(quota) for quota in held},
        used={quota.namespace: dict(store.used(quota.namespace)) for quota in held},
        request=request,
        in_quota=quotaobjects.total((request, counted.in_quota)),
        everywhere=quotaobjects.total((request, counted.everywhere)),
    )


class _Use:
    """The quota namespaces' use on one node's search, as victims are taken off and put back."""

    def __init__(self, view: QuotaView) -> None:
        self.view = view
        self.used = {ns: dict(values) for ns, values in view.used.items()}

    def take(self, pod: Pod, sign: int = -1) -> None:
        if pod.namespace in self.used:
            quotaobjects.add(self.used[pod.namespace], quotaobjects.vector(pod.requests), sign)

    def over_min(self, namespace: str) -> bool:
        return quotaobjects.over(self.used[namespace], {}, self.view.lower[namespace])

    def exceeded(self, namespace: str, mine: Mapping[str, int], all_: Mapping[str, int]) -> bool:
        """usedOverMaxWith(mine) or aggregatedUsedOverMinWith(all_)."""
        if quotaobjects.over(mine, self.used[namespace], self.view.upper[namespace]):
            return True
        every = quotaobjects.total((*self.used.values(), all_))
        return quotaobjects.over(every, {}, self.view.total_min)


def select(
    pod: Pod,
    node: evaluator.NodePods,
    budgets: Sequence[evaluator.DisruptionBudget],
    fits: evaluator.Fits,
    explains: evaluator.Explains | None = None,
    fallback: tuple[str, ...] = (),
    rules: evaluator.Rules = evaluator.NO_RULES,
    *,
    first_violation: bool = True,
    view: QuotaView,
) -> NodeSearch:
    """The victims on ``node`` as CapacityScheduling chooses them (module docstring);
    ``rules`` (a SchedulingPolicy's) may only shield pods; budgets spent as ``first_violation``
    says."""
    use = _Use(view)
    quota = pod.namespace in view.lower
    key = evaluator.victim_order(rules)
    ordered = sorted(node.pods, key=key, reverse=True)  # least important first
    potential: list[Pod] = []
    above_min = quota and quotaobjects.over(
        view.in_quota, use.used[pod.namespace], view.lower[pod.namespace]
    )
    for other in ordered:
        if not rules.may_evict(pod, other):
            continue
        if quota:
            if other.namespace not in view.lower:
                continue
            if above_min:
                chosen = other.namespace == pod.namespace and other.priority < pod.priority
            else:
                chosen = other.namespace != pod.namespace and use.over_min(other.namespace)
        else:
            chosen = other.namespace not in view.lower and other.priority < pod.priority
        if chosen:
            potential.append(other)
            use.take(other)
    if not potential:
        return NodeSearch(None, (no_victims(node.name, pod),))
    taken = {p.uid for p in potential}
    remaining = [p for p in node.pods if p.uid not in taken]
    if not fits(pod, node, remaining):
        reasons = tuple(explains(pod, node, remaining)) if explains is not None else fallback
        return NodeSearch(None, reasons)
    if quota and use.exceeded(pod.namespace, view.request, view.request):
        return NodeSearch(None, (QUOTA_EXCEEDED,))
    potential.sort(key=key)  # most important first: reprieved first
    violating, keeping = evaluator.split_by_budgets(
        potential, budgets, first_violation=first_violation
    )
    victims: list[Pod] = []
    violations = 0
    for group_violates, group in ((True, violating), (False, keeping)):
        for candidate in group:
            use.take(candidate, +1)
            fit = fits(pod, node, [*remaining, candidate])
            if fit and not (quota and use.exceeded(pod.namespace, view.in_quota, view.everywhere)):
                remaining.append(candidate)
                continue
            use.take(candidate)
            victims.append(candidate)
            violations += group_violates and not fit
    if violating and keeping:
        victims.sort(key=key)
    return NodeSearch(Candidate(node=node.name, victims=tuple(victims), pdb_violations=violations))
