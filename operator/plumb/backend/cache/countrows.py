"""Count rows: how many placed pods of a kind sit on each node, kept up to date incrementally.

PodTopologySpread and InterPodAffinity both reduce to "how many pods that match X are in each
topology domain". A *row* is one X: a ``Selection`` (pods matching label selectors in some
namespaces) or a ``Carrier`` (pods that carry a given affinity term, for the symmetric rules).
Rows are registered the first time a pod needs them (one scan of the placed pods) and then
maintained on every placement and removal, so a scheduling cycle only gathers them.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterable, Iterator, Mapping

import numpy as np
import numpy.typing as npt

from plumb.backend.records import objects, specs

MAX_ROWS = 4096  # least recently used rows beyond this are dropped (and rebuilt if needed)


@dataclasses.dataclass(frozen=True, slots=True)
class Matcher:
    """Pods whose labels match ``selector`` in ``namespaces`` or in namespaces whose labels
    match ``namespace_selector`` (an empty namespace selector means every namespace)."""

    selector: specs.LabelSelector | None
    namespaces: frozenset[str]
    namespace_selector: specs.LabelSelector | None = None

    @classmethod
    def of_term(cls, term: specs.PodAffinityTerm) -> Matcher:
        return cls(term.selector, term.namespaces, term.namespace_selector)

    def matches(
        self, pod: objects.PodInfo, namespace_labels: Mapping[str, Mapping[str, str]]
    ) -> bool:
        if self.selector is None:
            return False
        if pod.namespace not in self.namespaces:
            if self.namespace_selector is None:
                return False
            labels = namespace_labels.get(pod.namespace, {})
            if not self.namespace_selector.matches(labels):
                return False
        return self.selector.matches(pod.labels)


@dataclasses.dataclass(frozen=True, slots=True)
class Selection:
    """Pods matching every matcher; ``skip_terminating`` leaves out pods being deleted, as
    PodTopologySpread does."""

    matchers: tuple[Matcher, ...]
    skip_terminating: bool = False

    def matches(
        self, pod: objects.PodInfo, namespace_labels: Mapping[str, Mapping[str, str]]
    ) -> bool:
        if self.skip_terminating and pod.deleting:
            return False
        return all(m.matches(pod, namespace_labels) for m in self.matchers)

    @property
    def uses_namespace_labels(self) -> bool:
        return any(m.namespace_selector is not None for m in self.matchers)


REQUIRED_AFFINITY = "required-affinity"
REQUIRED_ANTI_AFFINITY = "required-anti-affinity"
PREFERRED_AFFINITY = "preferred-affinity"
PREFERRED_ANTI_AFFINITY = "preferred-anti-affinity"


@dataclasses.dataclass(frozen=True, slots=True)
class Carrier:
    """Pods that carry ``term`` as one of their affinity terms of ``kind`` (with ``weight``)."""

    kind: str
    term: specs.PodAffinityTerm
    weight: int = 0


def carried(pod: objects.PodInfo) -> Iterator[Carrier]:
    """The affinity terms a pod carries, as carrier rows it belongs to."""
    s = pod.scheduling
    for term in s.required_affinity:
        yield Carrier(REQUIRED_AFFINITY, term)
    for term in s.required_anti_affinity:
        yield Carrier(REQUIRED_ANTI_AFFINITY, term)
    for weighted in s.preferred_affinity:
        yield Carrier(PREFERRED_AFFINITY, weighted.term, weighted.weight)
    for weighted in s.preferred_anti_affinity:
        yield Carrier(PREFERRED_ANTI_AFFINITY, weighted.term, weighted.weight)


RowKey = Selection | Carrier


def belongs(
    key: RowKey, pod: objects.PodInfo, namespace_labels: Mapping[str, Mapping[str, str]]
) -> bool:
    """Whether ``pod`` counts in the row ``key``."""
    if isinstance(key, Carrier):
        return key in set(carried(pod))
    return key.matches(pod, namespace_labels)


class CountRows:
    """Per-node-slot counts for registered rows, plus every carrier present in the cluster."""

    def __init__(self) -> None:
        self._rows: collections.OrderedDict[RowKey, npt.NDArray[np.int32]] = (
            collections.OrderedDict()
        )
        self._carriers: collections.Counter[Carrier] = collections.Counter()
        self.namespace_labels: dict[str, Mapping[str, str]] = {}

    def carriers(self) -> list[Carrier]:
        """Every affinity term some placed pod carries."""
        return [carrier for carrier, count in self._carriers.items() if count > 0]

    def belongs(self, key: RowKey, pod: objects.PodInfo) -> bool:
        return belongs(key, pod, self.namespace_labels)

    def row(
        self,
        key: RowKey,
        capacity: int,
        placed: Iterable[tuple[objects.PodInfo, int | None]],
    ) -> npt.NDArray[np.int32]:
        """The row for ``key`` indexed by node slot; ``placed`` (pod, slot) builds a new one."""
        existing = self._rows.get(key)
        if existing is not None:
            self._rows.move_to_end(key)
            return self._fit(key, existing, capacity)
        counts = np.zeros(capacity, dtype=np.int32)
        for pod, slot in placed:
            if slot is not None and self.belongs(key, pod):
                counts[slot] += 1
        self._rows[key] = counts
        while len(self._rows) > MAX_ROWS:
            self._rows.popitem(last=False)
        return counts

    def track(self, pod: objects.PodInfo, sign: int) -> None:
        """Note (sign=1) or drop (sign=-1) the affinity terms a placed pod carries."""
        for carrier in set(carried(pod)):
            self._carriers[carrier] += sign
            if self._carriers[carrier] <= 0:
                del self._carriers[carrier]

    def count(self, pod: objects.PodInfo, slot: int, sign: int) -> None:
        """Count (sign=1) or uncount (sign=-1) a pod on a node slot in every row it belongs to."""
        pod_carriers = set(carried(pod)) if pod.scheduling.has_pod_affinity_terms else set()
        for key, counts in list(self._rows.items()):
            if isinstance(key, Carrier):
                member = key in pod_carriers
            else:
                member = key.matches(pod, self.namespace_labels)
            if member:
                if slot >= counts.shape[0]:
                    counts = self._fit(key, counts, slot + 1)
                counts[slot] += sign

    def clear_slot(self, slot: int) -> None:
        for counts in self._rows.values():
            if slot < counts.shape[0]:
                counts[slot] = 0

    def set_namespace(self, name: str, labels: Mapping[str, str] | None) -> None:
        """Record a namespace's labels; rows that select namespaces by label are rebuilt."""
        if labels is None:
            self.namespace_labels.pop(name, None)
        elif self.namespace_labels.get(name) == labels:
            return
        else:
            self.namespace_labels[name] = labels
        # Carrier rows count carriers whatever their labels; only selections can go stale.
        for key in [k for k in self._rows if isinstance(k, Selection) and k.uses_namespace_labels]:
            del self._rows[key]

    def _fit(
        self, key: RowKey, counts: npt.NDArray[np.int32], capacity: int
    ) -> npt.NDArray[np.int32]:
        if counts.shape[0] >= capacity:
            return counts
        grown = np.zeros(capacity, dtype=np.int32)
        grown[: counts.shape[0]] = counts
        self._rows[key] = grown
        return grown
