"""An immutable view of the cluster for one scheduling cycle: nodes in name order, as arrays.

A snapshot has two parts. ``NodeStatics`` changes only when a node is added, removed or
changed (labels, taints, cordon, allocatable), so it is shared by every cycle between node
events and builds its label columns lazily. The requested resources and pod counts change with
every placement and are copied per cycle.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from plumb.backend.records import objects, specs

Int64Array = npt.NDArray[np.int64]
Int32Array = npt.NDArray[np.int32]
UInt64Array = npt.NDArray[np.uint64]
BoolArray = npt.NDArray[np.bool_]
ABSENT = -1  # the value id of a label a node does not have
UNSEEN = -2  # the value id of a value no node has (matches nothing)


A = TypeVar("A", bound="np.ndarray[Any, Any]")


def _frozen(array: A) -> A:
    array.flags.writeable = False
    return array


class NodeStatics:
    """Nodes in name order with what rarely changes: allocatable, labels, taints, cordon.

    Label columns are built on first use and kept: ``label_ids(key)`` gives each node's value
    id for ``key`` (ABSENT where the node lacks it); ``value_id(key, value)`` the id of one
    value (UNSEEN if no node has it).
    """

    def __init__(
        self, nodes: Sequence[objects.NodeInfo], hashes: UInt64Array, allocatable: Int64Array
    ) -> None:
        self.nodes = tuple(nodes)
        self.names = tuple(node.name for node in nodes)
        self.index = {name: i for i, name in enumerate(self.names)}
        self.name_hashes = _frozen(hashes)
        self.allocatable = _frozen(allocatable)
        self.unschedulable = _frozen(np.array([n.unschedulable for n in nodes], dtype=np.bool_))
        # Built on first use per key and kept for this statics object's life (per-instance
        # memos: a functools.cache on methods would keep every old NodeStatics alive).
        self._values: dict[str, dict[str, int]] = {}
        self._ids: dict[str, Int32Array] = {}
        self._numbers: dict[str, tuple[Int64Array, BoolArray]] = {}
        self._texts: dict[tuple[str, str], npt.NDArray[np.object_]] = {}

    def __len__(self) -> int:
        return len(self.names)

    def label_ids(self, key: str) -> Int32Array:
        cached = self._ids.get(key)
        if cached is not None:
            return cached
        values: dict[str, int] = {}
        ids = np.full(len(self.nodes), ABSENT, dtype=np.int32)
        for i, node in enumerate(self.nodes):
            value = node.labels.get(key)
            if value is not None:
                ids[i] = values.setdefault(value, len(values))
        self._values[key] = values
        self._ids[key] = _frozen(ids)
        return ids

    def value_id(self, key: str, value: str) -> int:
        self.label_ids(key)
        return self._values[key].get(value, UNSEEN)

    def values(self, key: str) -> tuple[str, ...]:
        """The distinct values of ``key`` the nodes carry, indexed by their value id."""
        self.label_ids(key)
        return tuple(self._values[key])

    def domain_count(self, key: str) -> int:
        """How many distinct values of ``key`` the nodes carry (ids are 0..count-1)."""
        self.label_ids(key)
        return len(self._values[key])

    def label_numbers(self, key: str) -> tuple[Int64Array, BoolArray]:
        """Each node's value for ``key`` as an int64, and where it is one (present and parsed
        as Go's strconv.ParseInt would)."""
        cached = self._numbers.get(key)
        if cached is not None:
            return cached
        values = np.zeros(len(self.nodes), dtype=np.int64)
        valid = np.zeros(len(self.nodes), dtype=np.bool_)
        for i, node in enumerate(self.nodes):
            text = node.labels.get(key)
            number = None if text is None else specs.parse_int64(text)
            if number is not None:
                values[i], valid[i] = number, True
        result = (_frozen(values), _frozen(valid))
        self._numbers[key] = result
        return result

    def label_texts(self, key: str) -> npt.NDArray[np.object_]:
        """Each node's value of label ``key`` as a string array, "" where absent (the Python
        plugins' NodeView reads it; built from the label ids, kept for this statics' life)."""
        cached = self._texts.get(("label", key))
        if cached is None:
            lookup = np.array([*self.values(key), ""], dtype=np.object_)
            cached = self._texts[("label", key)] = _frozen(lookup[self.label_ids(key)])
        return cached

    def annotation_texts(self, key: str) -> npt.NDArray[np.object_]:
        """Each node's value of annotation ``key``, "" where absent (kept as label_texts)."""
        cached = self._texts.get(("annotation", key))
        if cached is None:
            column = np.array([n.annotations.get(key, "") for n in self.nodes], dtype=np.object_)
            cached = self._texts[("annotation", key)] = _frozen(column)
        return cached

    @functools.cached_property
    def images(self) -> dict[str, tuple[int, Int32Array]]:
        """Per image name any node holds: its size (the first node's in name order to list
        it) and the nodes holding it, built on first use (ImageLocality)."""
        sizes: dict[str, int] = {}
        holders: dict[str, list[int]] = {}
        for i, node in enumerate(self.nodes):
            for name, size in node.images:
                sizes.setdefault(name, size)
                where = holders.setdefault(name, [])
                if not where or where[-1] != i:  # a name listed twice counts its node once
                    where.append(i)
        return {
            name: (sizes[name], _frozen(np.array(where, dtype=np.int32)))
            for name, where in holders.items()
        }

    @functools.cached_property
    def distinct_taints(self) -> tuple[specs.Taint, ...]:
        seen: dict[specs.Taint, None] = {}
        for node in self.nodes:
            for taint in node.taints:
                seen.setdefault(taint)
        return tuple(seen)

    @functools.cached_property
    def taint_matrix(self) -> BoolArray:
        """(nodes x distinct_taints): whether node i carries taint j."""
        column = {taint: j for j, taint in enumerate(self.distinct_taints)}
        matrix = np.zeros((len(self.nodes), len(column)), dtype=np.bool_)
        for i, node in enumerate(self.nodes):
            for taint in node.taints:
                matrix[i, column[taint]] = True
        return _frozen(matrix)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Snapshot:
    """The cluster for one cycle; row i of every array is node ``names[i]``.

    ``allocatable`` and ``requested`` are (nodes x resources) in the units of ``resources``
    (cpu in millicores); ``requested`` counts pods in the ``pods`` column.
    ``nonzero_requested`` is (nodes x 2): cpu and memory with kube-scheduler's defaults for
    containers that request nothing (100m, 200Mi), which is what LeastAllocated scores.
    """

    generation: int
    statics: NodeStatics
    resources: tuple[str, ...]
    requested: Int64Array
    nonzero_requested: Int64Array

    @property
    def names(self) -> tuple[str, ...]:
        return self.statics.names

    @property
    def allocatable(self) -> Int64Array:
        return self.statics.allocatable

    @property
    def name_hashes(self) -> UInt64Array:
        return self.statics.name_hashes

    def __len__(self) -> int:
        return len(self.statics.names)
