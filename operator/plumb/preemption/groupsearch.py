"""Workload-aware preemption: what a pod group whose minimum fits nowhere may evict, decided as
kube-scheduler v1.37's PodGroup preemption decides it (preemption/podgrouppreemption.go).

The domain is the whole cluster. Victims come in units: a pod of an upstream PodGroup whose
disruptionMode is ``all`` stands with every placed member of its group, any other pod alone;
a unit's priority is its PodGroup's (for a member of one) or its pod's. Only units of lower
priority than the group may go. Every such unit is taken off the cluster and the group decided
once more (the kernel, members in their order, PlacementFeasible after each): if its minimum
still does not fit, nothing is evicted. Otherwise each unit, most important first, is put back
if every member the second decision placed still passes its filters on its node (the members
pinned there, in order, each with the ones before it placed); the units that cannot come back
are the victims, and each placed member is nominated to its node.

Like search.py: ``prepare`` reads the cache on the loop into a ``GroupPlan``; ``decide`` runs
the kernel over the plan alone (any thread). The scheduler carries the outcome out
(scheduler/gangcycle.py: nominations, then the evictions).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

from plumb.backend.cache import clustercache as cache_module
from plumb.backend.cache import countrows, snapshot
from plumb.backend.records import groupobjects, objects
from plumb.backend.records.groupobjects import PodGroup
from plumb.framework import compiling, scoring
from plumb.framework.plugins import gangscheduling
from plumb.framework.plugins.gangscheduling import Feasibility, Progress
from plumb.kernel import contract
from plumb.preemption import evaluator, search

_MASKED = 1  # a static code that keeps a pinned member off every node but its own

DEALLOCATED = "deallocation and deletion of ResourceClaims completed"
PREFIX = "pod group preemption: "
NEVER = "not eligible due to preemptionPolicy=Never."


@dataclasses.dataclass(frozen=True, slots=True)
class Unit:
    """Pods that go together or not at all, each with its node."""

    placed: tuple[tuple[objects.PodInfo, str], ...]
    priority: int
    group: bool  # a PodGroup evicted whole (disruptionMode all), else a single pod
    start: str  # the earliest start time of its pods ("" when none started)

    @property
    def importance(self) -> tuple[int, int, int, str]:
        """MoreImportantVictim's order, most important first: priority, then a group before
        a pod, then the larger, then the one that started first ("" last)."""
        return (-self.priority, -int(self.group), -len(self.placed), self.start or "~")


@dataclasses.dataclass(frozen=True, kw_only=True)
class GroupPreemption:
    """The outcome: the PodGroupPostFilter's words for the group's status, and, when a
    placement was found, the victims to evict and each placed member's node."""

    words: str
    victims: tuple[objects.PodInfo, ...] = ()
    nominated: Mapping[str, str] = dataclasses.field(default_factory=dict)  # member uid: node


def units(cache: cache_module.Cache, priority: int) -> list[Unit]:
    """Every unit of lower priority than ``priority`` (the preemptor's)."""
    grouped: dict[groupobjects.GroupRef, list[tuple[objects.PodInfo, str]]] = {}
    found: list[Unit] = []
    group_priority: dict[groupobjects.GroupRef, int] = {}
    for node in sorted(cache.nodes.names()):
        for placed in cache.pods_on(node):
            pod = placed.pod
            ref, group = cache.groups.of(pod)
            if group is not None and group.api == groupobjects.UPSTREAM:
                unit_priority = group.priority or 0
                if group.disrupt_all:
                    grouped.setdefault(group.ref, []).append((pod, node))
                    group_priority[group.ref] = unit_priority
                    continue
            else:
                unit_priority = pod.priority
            if unit_priority < priority:
                found.append(Unit(((pod, node),), unit_priority, False, pod.start_time))
    for ref, members in grouped.items():
        if group_priority[ref] < priority:
            start = min((p.start_time for p, _ in members if p.start_time), default="")
            found.append(Unit(tuple(members), group_priority[ref], True, start))
    return found


@dataclasses.dataclass(frozen=True, kw_only=True)
class GroupPlan:
    """One group's preemption, all it reads copied out of the cache."""

    compiled: compiling.Compiled  # the members, in their order
    units: tuple[Unit, ...]
    minimum: int
    scheduled: int  # members placed before this cycle
    namespace_labels: Mapping[str, Mapping[str, str]]

    def decide(self, kernel: contract.Kernel) -> GroupPreemption:
        """Touches nothing but the plan: may run on any thread."""
        everything = list(self.units)
        cluster = self._without(everything)
        result = kernel(cluster, self.compiled.batch)
        progress = Progress(self.minimum, self.scheduled, self.compiled.batch.size)
        assigned: dict[int, int] = {}
        for b in range(self.compiled.batch.size):
            chosen = int(result.chosen[b])
            progress = progress.after(chosen >= 0)
            if chosen >= 0:
                assigned[b] = chosen
            if progress.verdict is Feasibility.UNSCHEDULABLE:
                return GroupPreemption(words=f"{DEALLOCATED}, {PREFIX}{progress.message}")
        if progress.verdict is not Feasibility.SATISFIED:
            return GroupPreemption(words=f"{DEALLOCATED}, {PREFIX}{progress.message}")
        removed = sorted(everything, key=lambda unit: unit.importance)
        victims: list[Unit] = []
        for unit in list(removed):
            trial = [u for u in removed if u is not unit]
            if self._still_fits(trial, assigned, kernel):
                removed = trial  # reprieved: it stays
            else:
                victims.append(unit)
        pods = tuple(pod for unit in victims for pod, _ in unit.placed)
        names = self.compiled.names
        nominated = {self.compiled.pods[b].uid: names[n] for b, n in assigned.items()}
        return GroupPreemption(
            words=f"{PREFIX}found a placement for podgroup, preempting {len(pods)} victims",
            victims=pods,
            nominated=nominated,
        )

    def _without(self, removed: Sequence[Unit]) -> contract.Cluster:
        """The cluster with ``removed``'s pods taken off their nodes."""
        index = self.compiled.index
        placed = [
            (pod, index[node]) for unit in removed for pod, node in unit.placed if node in index
        ]
        return search.without(self.compiled, placed, self._member)

    def _member(self, pod: objects.PodInfo) -> np.ndarray:
        keys = self.compiled.row_keys
        return np.array(
            [countrows.belongs(key, pod, self.namespace_labels) for key in keys], dtype=np.int32
        )

    def _still_fits(
        self, removed: Sequence[Unit], assigned: Mapping[int, int], kernel: contract.Kernel
    ) -> bool:
        """Whether every placed member passes its filters on its node, in order, with the
        members before it placed and only ``removed`` taken off the cluster."""
        batch = self.compiled.batch
        rows = batch.static_row
        size = batch.size
        static = np.full((size, len(self.compiled.names)), _MASKED, dtype=np.int32)
        for b, n in assigned.items():
            static[b, n] = batch.static_code[rows[b], n]
        pinned = dataclasses.replace(
            batch,
            static_row=np.arange(size, dtype=np.int32),
            static_code=static,
            taint_raw=batch.taint_raw[rows],
            node_affinity_raw=batch.node_affinity_raw[rows],
            image_score=batch.image_score[rows],
            volume_score=batch.volume_score[rows],
            dra_raw=batch.dra_raw[rows],
            extension_score=batch.extension_score[rows],
            continues=np.zeros(size, dtype=np.bool_),
        )
        result = kernel(self._without(removed), pinned)
        return all(int(result.chosen[b]) == n for b, n in assigned.items())


def prepare(
    members: Sequence[objects.PodInfo],
    group: PodGroup,
    snap: snapshot.Snapshot,
    cache: cache_module.Cache,
    *,
    profile: scoring.Profile,
    nominated: Sequence[tuple[objects.PodInfo, str]] = (),
) -> GroupPlan | GroupPreemption:
    """The preemption for ``group``, whose ``members`` (in their order) just failed to reach
    its minimum: a plan, or at once the words when there is nothing to decide."""
    priority = group.priority or 0
    if any(pod.preemption_policy == evaluator.NEVER for pod in members):
        return GroupPreemption(words=f"{DEALLOCATED}, {PREFIX}{NEVER}")
    found = units(cache, priority)
    if not found:
        return GroupPreemption(words=gangscheduling.NO_GROUP_VICTIMS)
    compiled = compiling.compile_batch(
        list(members), snap, cache, profile=profile, nominated=list(nominated)
    )
    if compiled.deferred or len(compiled.pods) != len(members):
        # Members the kernel cannot decide in one run (their devices): not searched.
        return GroupPreemption(words=gangscheduling.NO_GROUP_VICTIMS)
    return GroupPlan(
        compiled=compiled,
        units=tuple(found),
        minimum=gangscheduling.minimum(group),
        scheduled=cache.groups.placed_count(group.ref),
        namespace_labels=dict(cache.namespace_labels),
    )
