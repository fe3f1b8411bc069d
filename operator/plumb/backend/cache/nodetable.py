"""The columnar node store: allocatable and requested resources as int64 arrays, one row a node.

Rows are slots that stay put while a node lives (so updates are O(resources)); the name order
the scheduler needs, and everything else that changes only with nodes (labels, taints, cordon),
is built once per change of the nodes into a shared ``NodeStatics``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from plumb.backend.cache import snapshot
from plumb.backend.records import hashing, objects

_GROW = 64


class NodeTable:
    """Nodes and the resources requested on them, in arrays indexed by slot."""

    def __init__(self) -> None:
        self.resources: list[str] = list(objects.BASE_RESOURCES)
        self._column = {name: i for i, name in enumerate(self.resources)}
        self._slot: dict[str, int] = {}
        self._info: list[objects.NodeInfo | None] = []
        self._free: list[int] = []
        self._allocatable = np.zeros((0, len(self.resources)), dtype=np.int64)
        self._requested = np.zeros((0, len(self.resources)), dtype=np.int64)
        self._nonzero = np.zeros((0, 2), dtype=np.int64)
        self._hashes = np.zeros(0, dtype=np.uint64)
        self._statics: snapshot.NodeStatics | None = None
        self._order: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self.generation = 0

    def __len__(self) -> int:
        return len(self._slot)

    def __contains__(self, name: object) -> bool:
        return name in self._slot

    def names(self) -> list[str]:
        return sorted(self._slot)

    def info(self, name: str) -> objects.NodeInfo | None:
        slot = self._slot.get(name)
        return None if slot is None else self._info[slot]

    def slot(self, name: str) -> int | None:
        return self._slot.get(name)

    @property
    def capacity(self) -> int:
        """Rows allocated (live or free); arrays indexed by slot have this length."""
        return len(self._info)

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
            self._statics = None
        return index

    def vector(self, amounts: Mapping[str, int]) -> npt.NDArray[np.int64]:
        """A request as a row over this table's columns (adding columns for new resources)."""
        columns = [(self.column(name), value) for name, value in amounts.items()]
        row = np.zeros(len(self.resources), dtype=np.int64)
        for index, value in columns:
            row[index] = value
        return row

    def upsert(self, node: objects.NodeInfo) -> bool:
        """Add a node or update it; what is requested on it is kept. False if nothing changed."""
        slot = self._slot.get(node.name)
        if slot is not None and self._info[slot] == node:
            return False
        if slot is None:
            slot = self._allocate(node.name)
        self._allocatable[slot] = self.vector(node.allocatable)
        self._info[slot] = node
        self._statics = None
        self.generation += 1
        return True

    def remove(self, name: str) -> None:
        slot = self._slot.pop(name, None)
        if slot is None:
            return
        self._info[slot] = None
        self._allocatable[slot] = 0
        self._requested[slot] = 0
        self._nonzero[slot] = 0
        self._free.append(slot)
        self._statics = None
        self.generation += 1

    def add_request(
        self,
        name: str,
        amounts: Mapping[str, int],
        sign: int,
        nonzero: tuple[int, int] | None = None,
    ) -> None:
        """Add (sign=1) or remove (sign=-1) one pod's request on a node; unknown nodes: no-op."""
        slot = self._slot.get(name)
        if slot is None:
            return
        row = self.vector(amounts)
        row[self._column[objects.PODS]] = 1
        self._requested[slot] += sign * row
        if nonzero is None:
            nonzero = (
                amounts.get(objects.CPU) or objects.DEFAULT_MILLI_CPU,
                amounts.get(objects.MEMORY) or objects.DEFAULT_MEMORY,
            )
        cpu, memory = nonzero
        self._nonzero[slot, 0] += sign * cpu
        self._nonzero[slot, 1] += sign * memory
        self.generation += 1

    def requested(self, name: str) -> dict[str, int]:
        slot = self._slot[name]
        return {r: int(self._requested[slot, i]) for i, r in enumerate(self.resources)}

    def allocatable(self, name: str) -> dict[str, int]:
        slot = self._slot[name]
        return {r: int(self._allocatable[slot, i]) for i, r in enumerate(self.resources)}

    def statics(self) -> snapshot.NodeStatics:
        """The name-ordered view of what changes only with nodes; rebuilt after a node change."""
        if self._statics is None:
            names = sorted(self._slot)
            self._order = np.array([self._slot[name] for name in names], dtype=np.int64)
            infos = [self._info[self._slot[name]] for name in names]
            self._statics = snapshot.NodeStatics(
                [info for info in infos if info is not None],
                self._hashes[self._order],
                self._allocatable[self._order],
            )
        return self._statics

    @property
    def order(self) -> npt.NDArray[np.int64]:
        """Slot of each node in name order (the row order of snapshots)."""
        self.statics()
        return self._order

    def snapshot(self) -> snapshot.Snapshot:
        """The statics plus a copy of the requested columns in name order."""
        statics = self.statics()
        requested = self._requested[self._order]
        nonzero = self._nonzero[self._order]
        requested.flags.writeable = False
        nonzero.flags.writeable = False
        return snapshot.Snapshot(
            generation=self.generation,
            statics=statics,
            resources=tuple(self.resources),
            requested=requested,
            nonzero_requested=nonzero,
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
            self._nonzero = np.vstack([self._nonzero, np.zeros((grow, 2), dtype=np.int64)])
            self._hashes = np.concatenate([self._hashes, np.zeros(grow, dtype=np.uint64)])
            self._info.extend([None] * grow)
            self._free.extend(range(start + grow - 1, start - 1, -1))
        slot = self._free.pop()
        self._slot[name] = slot
        self._hashes[slot] = hashing.stable_hash_u64(name)
        self._requested[slot] = 0
        self._nonzero[slot] = 0
        return slot
