"""The columnar node store: allocatable and requested resources as int64 arrays, one row a node.

Rows are slots that stay put while a node lives (so updates are O(resources)); the name order
the scheduler needs is computed once per change of the node set, when a snapshot is taken.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from plumb.backend import hashing, objects, snapshot

_GROW = 64


class NodeTable:
    """Nodes and the resources requested on them, in arrays indexed by slot."""

    def __init__(self) -> None:
        self.resources: list[str] = list(objects.BASE_RESOURCES)
        self._column = {name: i for i, name in enumerate(self.resources)}
        self._slot: dict[str, int] = {}
        self._names: list[str | None] = []
        self._free: list[int] = []
        self._allocatable = np.zeros((0, len(self.resources)), dtype=np.int64)
        self._requested = np.zeros((0, len(self.resources)), dtype=np.int64)
        self._hashes = np.zeros(0, dtype=np.uint64)
        self._order: np.ndarray | None = None
        self._sorted: tuple[str, ...] = ()
        self.generation = 0

    def __len__(self) -> int:
        return len(self._slot)

    def __contains__(self, name: object) -> bool:
        return name in self._slot

    def names(self) -> list[str]:
        return sorted(self._slot)

    def column(self, resource: str) -> int:
        """The column of a resource, added (zero everywhere) the first time it is seen."""
        index = self._column.get(resource)
        if index is None:
            index = len(self.resources)
            self.resources.append(resource)
            self._column[resource] = index
            pad = np.zeros((self._allocatable.shape[0], 1), dtype=np.int64)
            self._allocatable = np.hstack([self._allocatable, pad])
            self._requested = np.hstack([self._requested, pad.copy()])
        return index

    def vector(self, amounts: Mapping[str, int]) -> np.ndarray:
        """A request as a row over this table's columns (adding columns for new resources)."""
        columns = [(self.column(name), value) for name, value in amounts.items()]
        row = np.zeros(len(self.resources), dtype=np.int64)
        for index, value in columns:
            row[index] = value
        return row

    def upsert(self, node: objects.NodeInfo) -> None:
        """Add a node or update its allocatable; what is requested on it is kept."""
        slot = self._slot.get(node.name)
        if slot is None:
            slot = self._allocate(node.name)
        self._allocatable[slot] = self.vector(node.allocatable)
        self.generation += 1

    def remove(self, name: str) -> None:
        slot = self._slot.pop(name, None)
        if slot is None:
            return
        self._names[slot] = None
        self._allocatable[slot] = 0
        self._requested[slot] = 0
        self._free.append(slot)
        self._order = None
        self.generation += 1

    def add_request(self, name: str, amounts: Mapping[str, int], sign: int) -> None:
        """Add (sign=1) or remove (sign=-1) one pod's request on a node; unknown nodes: no-op."""
        slot = self._slot.get(name)
        if slot is None:
            return
        row = self.vector(amounts)
        row[self._column[objects.PODS]] = 1
        self._requested[slot] += sign * row
        self.generation += 1

    def requested(self, name: str) -> dict[str, int]:
        slot = self._slot[name]
        return {r: int(self._requested[slot, i]) for i, r in enumerate(self.resources)}

    def allocatable(self, name: str) -> dict[str, int]:
        slot = self._slot[name]
        return {r: int(self._allocatable[slot, i]) for i, r in enumerate(self.resources)}

    def snapshot(self) -> snapshot.Snapshot:
        """Copies of the live rows in name order; cheap enough to take once per cycle."""
        if self._order is None:
            self._sorted = tuple(sorted(self._slot))
            self._order = np.array([self._slot[name] for name in self._sorted], dtype=np.int64)
        order = self._order
        allocatable = self._allocatable[order]
        requested = self._requested[order]
        hashes = self._hashes[order]
        for array in (allocatable, requested, hashes):
            array.flags.writeable = False
        return snapshot.Snapshot(
            generation=self.generation,
            names=self._sorted,
            resources=tuple(self.resources),
            allocatable=allocatable,
            requested=requested,
            name_hashes=hashes,
        )

    def _allocate(self, name: str) -> int:
        if not self._free:
            start = self._allocatable.shape[0]
            grow = max(_GROW, start)
            width = len(self.resources)
            self._allocatable = np.vstack(
                [self._allocatable, np.zeros((grow, width), dtype=np.int64)]
            )
            self._requested = np.vstack([self._requested, np.zeros((grow, width), dtype=np.int64)])
            self._hashes = np.concatenate([self._hashes, np.zeros(grow, dtype=np.uint64)])
            self._names.extend([None] * grow)
            self._free.extend(range(start + grow - 1, start - 1, -1))
        slot = self._free.pop()
        self._slot[name] = slot
        self._names[slot] = name
        self._hashes[slot] = hashing.stable_hash_u64(name)
        self._requested[slot] = 0
        self._order = None
        return slot
