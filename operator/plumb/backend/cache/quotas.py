"""The tenant quotas the cluster has (scheduler-plugins' ElasticQuotas) and, per namespace, the
resources its placed pods (assumed or bound) use.

The cache keeps the use in step as it places and unplaces pods, for every namespace (a quota
created later finds its namespace's use already counted, where CapacityScheduling counts only
the pods placed after it learnt of the quota). One quota governs a namespace: the oldest
(creationTimestamp, then name) if there are several; scheduler-plugins supports one and keeps
whichever its informer saw first. Not journalled: a replay reads the quotas as they are now.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from plumb.backend.records import objects, quotaobjects
from plumb.backend.records.quotaobjects import ElasticQuota


class QuotaStore:
    """ElasticQuotas by namespace and name, and each namespace's use."""

    def __init__(self) -> None:
        self._quotas: dict[str, dict[str, ElasticQuota]] = {}
        self._used: dict[str, dict[str, int]] = {}
        self.generation = 0  # moves on at every change of an ElasticQuota

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
