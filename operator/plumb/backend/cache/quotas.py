"""The tenant quotas the cluster has (scheduler-plugins' ElasticQuotas) and, per namespace, the
resources its placed pods (assumed or bound) use.

The cache keeps the use in step as it places and unplaces pods, for every namespace (a quota
created later finds its namespace's use already counted, where CapacityScheduling counts only
the pods placed after it learnt of the quota). One quota governs a namespace: the oldest
(creationTimestamp, then name) if there are several; scheduler-plugins supports one and keeps
whichever its informer saw first. Not journalled: a replay reads the quotas as they are now.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator, Mapping

from plumb.backend.records import objects, quotaobjects
from plumb.backend.records.quotaobjects import Bound, ElasticQuota


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class QuotaLimit:
    """The max a SchedulingPolicy's SLO rule has the quota enforce instead of its own
    (policy/slo.py): why, and what it was before it last changed."""

    bound: Bound
    policy: str  # namespace/name of the SchedulingPolicy
    attainment: float
    steps: int
    since: float  # wall-clock seconds of the last change
    before: Bound | None = None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, QuotaLimit):
            return NotImplemented
        return (self.bound, self.policy, self.steps) == (other.bound, other.policy, other.steps)

    def __hash__(self) -> int:
        return hash((self.policy, self.steps))


class QuotaStore:
    """ElasticQuotas by namespace and name, and each namespace's use."""

    def __init__(self) -> None:
        self._quotas: dict[str, dict[str, ElasticQuota]] = {}
        self._used: dict[str, dict[str, int]] = {}
        self._limits: dict[str, QuotaLimit] = {}
        self._attainments: dict[str, float] = {}
        self.generation = 0  # moves on at every change of an ElasticQuota or of a limit

    # ElasticQuotas -------------------------------------------------------------------------

    def put(self, quota: ElasticQuota) -> ElasticQuota | None:
        """Hold ``quota`` (added or modified); returns the version it replaces."""
        named = self._quotas.setdefault(quota.namespace, {})
        before = named.get(quota.name)
        named[quota.name] = quota
        if before != quota:
            self.generation += 1
        return before

    def remove(self, namespace: str, name: str) -> ElasticQuota | None:
        named = self._quotas.get(namespace, {})
        before = named.pop(name, None)
        if not named:
            self._quotas.pop(namespace, None)
        if before is not None:
            self.generation += 1
        return before

    def replace(
        self, quotas: list[ElasticQuota]
    ) -> list[tuple[ElasticQuota | None, ElasticQuota | None]]:
        """A full list of the ElasticQuotas: returns each (before, after) that changed."""
        listed = {(quota.namespace, quota.name): quota for quota in quotas}
        changes: list[tuple[ElasticQuota | None, ElasticQuota | None]] = []
        held = [(ns, name) for ns, named in self._quotas.items() for name in named]
        for namespace, name in held:
            if (namespace, name) not in listed:
                changes.append((self.remove(namespace, name), None))
        for quota in listed.values():
            before = self.put(quota)
            if before != quota:
                changes.append((before, quota))
        return changes

    def governing(self, namespace: str) -> ElasticQuota | None:
        """The quota that governs ``namespace`` (None: its pods are not limited)."""
        named = self._quotas.get(namespace)
        if not named:
            return None
        return min(named.values(), key=lambda q: (q.creation_timestamp, q.name))

    def __iter__(self) -> Iterator[ElasticQuota]:
        """The governing quota of each namespace that has one, by namespace."""
        for namespace in sorted(self._quotas):
            quota = self.governing(namespace)
            if quota is not None:
                yield quota

    def __bool__(self) -> bool:
        return bool(self._quotas)

    def __len__(self) -> int:
        return len(self._quotas)

    # Limits of SLO-elastic quotas ----------------------------------------------------------

    def upper(self, quota: ElasticQuota) -> Bound:
        """The max ``quota`` enforces now: its own, or the one its SLO rule set."""
        found = self._limits.get(quota.namespace)
        return quota.upper if found is None else found.bound

    def limit(self, namespace: str) -> QuotaLimit | None:
        return self._limits.get(namespace)

    def attainment(self, namespace: str) -> float | None:
        """The SLO attainment its SLO-elastic policy last read (None: none does)."""
        return self._attainments.get(namespace)

    def set_attainment(self, namespace: str, value: float | None) -> None:
        if value is None:
            self._attainments.pop(namespace, None)
        else:
            self._attainments[namespace] = value

    def set_limit(self, namespace: str, limit: QuotaLimit | None) -> bool:
        """Sets (None: clears) the namespace's limit; whether anything changed."""
        before = self._limits.get(namespace)
        if before == limit:
            return False
        if limit is None:
            del self._limits[namespace]
        else:
            self._limits[namespace] = limit
        self.generation += 1
        return True

    # Use -----------------------------------------------------------------------------------

    def used(self, namespace: str) -> Mapping[str, int]:
        """What the namespace's placed pods request, as framework.Resource holds it."""
        return self._used.get(namespace, {})

    def place(self, pod: objects.PodInfo) -> None:
        self._count(pod, +1)

    def unplace(self, pod: objects.PodInfo) -> None:
        self._count(pod, -1)

    def _count(self, pod: objects.PodInfo, sign: int) -> None:
        used = self._used.setdefault(pod.namespace, {})
        quotaobjects.add(used, request(pod), sign)
        if sign < 0 and not any(used.values()):
            del self._used[pod.namespace]


def request(pod: objects.PodInfo) -> dict[str, int]:
    """What a pod counts against its namespace's quota."""
    return quotaobjects.vector(pod.requests)


def limit_sentence(quota: ElasticQuota, limit: QuotaLimit) -> str:
    """Why the quota's max is not its own: "its limit is cpu 8 (max cpu 10), lowered from cpu
    9.6 at 12:04:05 UTC by SchedulingPolicy team-a/slo because its SLO attainment fell to 91%"."""
    names = {name for name, value in limit.bound.values.items() if value < quota.upper.get(name)}
    names = names or set(limit.bound.values)
    now = _show(limit.bound, names)
    top = _show(quota.upper, names)
    when = time.strftime("%H:%M:%S UTC", time.gmtime(limit.since))
    moved = "lowered" if limit.steps else "restored"
    before = f" from {_show(limit.before, names)}" if limit.before is not None else ""
    why = (
        f"its SLO attainment fell to {limit.attainment:.0%}"
        if limit.steps
        else f"its SLO attainment is {limit.attainment:.0%}"
    )
    return (
        f"its limit is {now} (max {top}), {moved}{before} at {when} by SchedulingPolicy "
        f"{limit.policy} because {why}"
    )


def _show(bound: Bound, names: set[str]) -> str:
    shown = [
        f"{name} {quotaobjects.readable(name, bound.get(name))}"
        for name in sorted(names)
        if bound.get(name) < quotaobjects.UNLIMITED
    ]
    return ", ".join(shown) or "unlimited"
