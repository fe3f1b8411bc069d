"""Topology domains for pod groups: which domains of a SchedulingPolicy's ``gangs.topologyKey``
a group is tried in, in which order, and its members confined to one of them.

A domain is one value of the key; a node without the label belongs to no domain (as
PodTopologySpread counts it). A domain's *free room* is, per resource (cpu and memory), the sum
over its schedulable nodes of allocatable minus requested (a node over-committed counts 0), as
the snapshot holds them. A domain is a candidate when its free room holds the least that the
group's minimum needs (the smallest requests of as many members as the minimum still lacks):
a necessary condition only, since room split over nodes may still not fit a member; the trial
run in the domain (scheduler/gangcycle.py) decides.

Order, least fragmentation first: the domains whose free room holds every member of the cycle,
the one left with the least room after them first (best fit: the group fills a gap instead of
cutting into a roomy domain another group may need whole), the room left measured as the sum
over cpu and memory of what is left divided by the cluster's allocatable of it; then the
domains that hold only the minimum, the roomiest first (more members beyond the minimum fit);
ties by the domain's name, so the choice is the same on every replay.

A member is confined to a domain by one more required node-affinity requirement, ``key In
[value]``, ANDed into each of its node selector terms: the kernel then filters and scores as
for a pod that asked for it itself (other nodes fail NodeAffinity). Purely computational; no I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt

from plumb.backend.cache import snapshot as snapshot_module
from plumb.backend.records import objects, specs

__all__ = ["DomainRoom", "GroupDemand", "candidates", "confine", "demand", "domains_of"]

RESOURCES = (objects.CPU, objects.MEMORY)


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class GroupDemand:
    """What a group asks of a domain, per resource of ``RESOURCES``: ``whole`` the sum of
    every member the cycle tries, ``least`` the sum of the smallest requests of as many
    members as the minimum still lacks."""

    whole: tuple[int, int]
    least: tuple[int, int]


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class DomainRoom:
    """One domain of the key: its value, its nodes, its free room per resource of
    ``RESOURCES``, whether that holds the whole group, and the share of the cluster's room
    left after the whole group (negative when it does not hold it)."""

    value: str
    nodes: int
    free: tuple[int, int]
    holds_all: bool
    left_share: float

    def describe(self) -> str:
        cpu, memory = self.free
        nodes = "1 node" if self.nodes == 1 else f"{self.nodes} nodes"
        return f"{self.value} ({nodes}, {cpu}m cpu and {memory // 2**20}Mi free)"


def demand(pods: Sequence[objects.PodInfo], needed: int) -> GroupDemand:
    """The group's ``pods`` (the members this cycle tries) and how many of them the minimum
    still lacks."""
    whole = tuple(sum(pod.requests.get(r, 0) for pod in pods) for r in RESOURCES)
    least = tuple(
        sum(sorted(pod.requests.get(r, 0) for pod in pods)[: max(0, needed)]) for r in RESOURCES
    )
    return GroupDemand(whole=(whole[0], whole[1]), least=(least[0], least[1]))


def candidates(
    snap: snapshot_module.Snapshot, key: str, asked: GroupDemand, *, within: str | None = None
) -> tuple[DomainRoom, ...]:
    """The domains of ``key`` whose free room holds the group's minimum, in the order they
    are tried (see the module docstring); ``within``: only that domain (the group's members
    placed before sit there)."""
    rooms = _rooms(snap, key)
    totals = _totals(snap)
    found = []
    for value, (nodes, free) in sorted(rooms.items()):
        if within is not None and value != within:
            continue
        if any(f < need for f, need in zip(free, asked.least, strict=True)):
            continue
        holds_all = all(f >= need for f, need in zip(free, asked.whole, strict=True))
        left = sum(
            (f - need) / total
            for f, need, total in zip(free, asked.whole, totals, strict=True)
            if total > 0
        )
        found.append(
            DomainRoom(value=value, nodes=nodes, free=free, holds_all=holds_all, left_share=left)
        )
    return tuple(
        sorted(
            found,
            key=lambda d: (
                (0, d.left_share, d.value) if d.holds_all else (1, -d.left_share, d.value)
            ),
        )
    )


def domains_of(
    snap: snapshot_module.Snapshot, key: str, nodes: Iterable[str]
) -> frozenset[str | None]:
    """The domains of ``key`` that the named nodes belong to (None: a node without the label,
    or one the snapshot no longer has)."""
    statics = snap.statics
    found: set[str | None] = set()
    for name in nodes:
        index = statics.index.get(name)
        found.add(None if index is None else statics.nodes[index].labels.get(key))
    return frozenset(found)


def confine(pod: objects.PodInfo, key: str, value: str) -> objects.PodInfo:
    """``pod`` with required node affinity ``key In [value]`` ANDed into its own."""
    wanted = specs.Requirement(key, "In", (value,))
    scheduling = pod.scheduling
    terms = scheduling.required_node_terms
    confined: tuple[specs.NodeSelectorTerm, ...]
    if terms is None:
        confined = (specs.NodeSelectorTerm(expressions=(wanted,)),)
    else:
        confined = tuple(
            dataclasses.replace(term, expressions=(*term.expressions, wanted)) for term in terms
        )
    scheduling = dataclasses.replace(scheduling, required_node_terms=confined)
    return dataclasses.replace(pod, scheduling=scheduling)


def _rooms(snap: snapshot_module.Snapshot, key: str) -> dict[str, tuple[int, tuple[int, int]]]:
    """Per domain of ``key``: its nodes and their free room per resource."""
    statics = snap.statics
    ids = statics.label_ids(key)
    values = statics.values(key)
    free = _free(snap)
    usable = (ids >= 0) & ~statics.unschedulable
    rooms: dict[str, tuple[int, tuple[int, int]]] = {}
    for value_id, value in enumerate(values):
        nodes = usable & (ids == value_id)
        sums = free[nodes].sum(axis=0)
        rooms[value] = (int(nodes.sum()), (int(sums[0]), int(sums[1])))
    return rooms


def _free(snap: snapshot_module.Snapshot) -> npt.NDArray[np.int64]:
    """(nodes x RESOURCES): allocatable minus requested, never below 0."""
    columns = [_column(snap, r) for r in RESOURCES]
    out = np.zeros((len(snap), len(RESOURCES)), dtype=np.int64)
    for j, column in enumerate(columns):
        if column is not None:
            out[:, j] = np.maximum(snap.allocatable[:, column] - snap.requested[:, column], 0)
    return out


def _totals(snap: snapshot_module.Snapshot) -> tuple[int, ...]:
    """The allocatable of each resource of ``RESOURCES`` over the schedulable nodes."""
    usable = ~snap.statics.unschedulable
    totals = []
    for r in RESOURCES:
        column = _column(snap, r)
        totals.append(0 if column is None else int(snap.allocatable[usable, column].sum()))
    return tuple(totals)


def _column(snap: snapshot_module.Snapshot, resource: str) -> int | None:
    return snap.resources.index(resource) if resource in snap.resources else None
