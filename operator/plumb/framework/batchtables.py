"""The tables a batch is compiled into, one typed table per table of the kernel's Batch
(kernel/contract.py): rows appended pod by pod as framework/compiling.py fills them, then turned
into the contract's arrays (``arrays``). Plain data and numpy; nothing here reads the cache.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from plumb.backend.cache import countrows
from plumb.backend.records import hashing, objects, specs
from plumb.kernel import contract


@dataclasses.dataclass(frozen=True, slots=True)
class Verdicts:
    """Per node, for one pod: where TaintToleration and NodeAffinity reject it."""

    taint_fails: contract.B1
    affinity_fails: contract.B1


@dataclasses.dataclass(frozen=True, slots=True)
class StaticReason:
    plugin: str
    message: str
    unresolvable: bool


@dataclasses.dataclass(slots=True)
class PodTable:
    """Per pod of the batch (B rows, in queue order): its requests in the batch's columns and
    what the kernel reads of it besides its constraints."""

    column: Mapping[str, int]  # resource name to its request column
    balanced: tuple[str, ...]  # BalancedAllocation's resources
    hashes: list[int]
    requests: contract.I64
    nonzero: contract.I64
    static_row: contract.I32
    require_all: contract.B1
    affinity_self: contract.B1
    balanced_skip: contract.B1

    @classmethod
    def empty(cls, size: int, column: Mapping[str, int], balanced: Sequence[str]) -> PodTable:
        # Allocated whole and filled row by row: a (B, R) or (B, 2) array built from a list of
        # rows would lose its second axis in an empty batch.
        return cls(
            column=column,
            balanced=tuple(balanced),
            hashes=[],
            requests=np.zeros((size, len(column)), dtype=np.int64),
            nonzero=np.zeros((size, 2), dtype=np.int64),
            static_row=np.zeros(size, dtype=np.int32),
            require_all=np.ones(size, dtype=np.bool_),
            affinity_self=np.zeros(size, dtype=np.bool_),
            balanced_skip=np.zeros(size, dtype=np.bool_),
        )

    def append(
        self, pod: objects.PodInfo, *, static_row: int, require_all: bool, affinity_self: bool
    ) -> None:
        b = len(self.hashes)
        self.hashes.append(hashing.stable_hash(pod.uid))
        for name, amount in pod.requests.items():
            self.requests[b, self.column[name]] = amount
        self.requests[b, self.column[objects.PODS]] = 1
        self.nonzero[b] = pod.scored_nonzero
        self.static_row[b] = static_row
        self.require_all[b] = require_all
        self.affinity_self[b] = affinity_self
        # PreScore skips a pod requesting none of BalancedAllocation's resources.
        self.balanced_skip[b] = not any(pod.requests.get(name) for name in self.balanced)

    def arrays(self) -> dict[str, Any]:
        """The Batch fields of this table."""
        return {
            "pod_hashes": np.array(self.hashes, dtype=np.uint64),
            "requests": self.requests,
            "nonzero": self.nonzero,
            "static_row": self.static_row,
            "spread_require_all": self.require_all,
            "affinity_self": self.affinity_self,
            "balanced_skip": self.balanced_skip,
        }


_Spec = tuple[
    specs.Scheduling, str, tuple[str, ...], tuple[str, ...], frozenset[str], str, tuple[object, ...]
]


@dataclasses.dataclass(slots=True)
class StaticTable:
    """Per distinct pod spec (U rows): the static filters' verdicts and raw scores, which
    depend on the spec alone, so replicas share a row (read by the kernel from cache once).
    ``codes`` are the reasons of the filters checked first, ``lasts`` those of the one checked
    after every other filter (NodeDeclaredFeatures); the kernel's static_code holds both."""

    index: dict[_Spec, int] = dataclasses.field(default_factory=dict)
    verdicts: list[Verdicts] = dataclasses.field(default_factory=list)
    codes: list[contract.I32] = dataclasses.field(default_factory=list)
    lasts: list[contract.I32 | None] = dataclasses.field(default_factory=list)  # None: all 0
    taints: list[contract.I64] = dataclasses.field(default_factory=list)
    affinities: list[contract.I64] = dataclasses.field(default_factory=list)
    images: list[contract.I64] = dataclasses.field(default_factory=list)
    volumes: list[contract.I64] = dataclasses.field(default_factory=list)
    dras: list[contract.I64] = dataclasses.field(default_factory=list)
    # The Python plugins' weighted score sum per node, and each scoring plugin's normalised
    # score (in the profile's order, for the trace); None / () where no plugin scores.
    extensions: list[contract.I64 | None] = dataclasses.field(default_factory=list)
    extension_parts: list[tuple[contract.I64, ...]] = dataclasses.field(default_factory=list)

    def append(
        self,
        spec: _Spec,
        verdicts: Verdicts,
        *,
        code: contract.I32,
        last: contract.I32 | None,
        taint: contract.I64,
        affinity: contract.I64,
        image: contract.I64,
        volume: contract.I64,
        dra: contract.I64,
        extension: contract.I64 | None = None,
        extension_parts: tuple[contract.I64, ...] = (),
    ) -> int:
        u = self.index[spec] = len(self.verdicts)
        self.verdicts.append(verdicts)
        self.codes.append(code)
        self.lasts.append(last)
        self.taints.append(taint)
        self.affinities.append(affinity)
        self.images.append(image)
        self.volumes.append(volume)
        self.dras.append(dra)
        self.extensions.append(extension)
        self.extension_parts.append(extension_parts)
        return u

    def last_codes(self, nodes: int) -> contract.I32 | None:
        """The (U, N) reasons checked last, None when no row has one (most batches)."""
        if all(last is None for last in self.lasts):
            return None
        lasts = np.zeros((len(self.lasts), nodes), dtype=np.int32)
        for u, last in enumerate(self.lasts):
            if last is not None:
                lasts[u] = last
        return lasts

    def arrays(self, nodes: int) -> dict[str, Any]:
        """The Batch fields of this table: a reason checked last goes in negated, where no
        reason checked first is (kernel/contract.py)."""
        codes = rows_of(self.codes, np.int32, nodes)
        lasts = self.last_codes(nodes)
        return {
            "static_code": codes if lasts is None else np.where(codes != 0, codes, -lasts),
            "taint_raw": rows_of(self.taints, np.int64, nodes),
            "node_affinity_raw": rows_of(self.affinities, np.int64, nodes),
            "image_score": rows_of(self.images, np.int64, nodes),
            "volume_score": rows_of(self.volumes, np.int64, nodes),
            "dra_raw": rows_of(self.dras, np.int64, nodes),
            "extension_score": rows_of(
                [np.zeros(nodes, dtype=np.int64) if e is None else e for e in self.extensions],
                np.int64,
                nodes,
            ),
            "extension_scored": any(e is not None for e in self.extensions),
        }


@dataclasses.dataclass(slots=True)
class SpreadTable:
    """PodTopologySpread's constraints (C rows)."""

    pod: list[int] = dataclasses.field(default_factory=list)
    row: list[int] = dataclasses.field(default_factory=list)
    key: list[int] = dataclasses.field(default_factory=list)
    max_skew: list[int] = dataclasses.field(default_factory=list)
    min_domains: list[int] = dataclasses.field(default_factory=list)
    hard: list[bool] = dataclasses.field(default_factory=list)
    self_match: list[bool] = dataclasses.field(default_factory=list)
    hostname: list[bool] = dataclasses.field(default_factory=list)
    eligible: list[contract.B1] = dataclasses.field(default_factory=list)

    def append(
        self,
        *,
        pod: int,
        row: int,
        key: int,
        max_skew: int,
        min_domains: int,
        hard: bool,
        self_match: bool,
        hostname: bool,
        eligible: contract.B1,
    ) -> None:
        self.pod.append(pod)
        self.row.append(row)
        self.key.append(key)
        self.max_skew.append(max_skew)
        self.min_domains.append(min_domains)
        self.hard.append(hard)
        self.self_match.append(self_match)
        self.hostname.append(hostname)
        self.eligible.append(eligible)

    def arrays(self, nodes: int) -> dict[str, Any]:
        """The Batch fields of this table."""
        return {
            "spread_pod": _i32(self.pod),
            "spread_row": _i32(self.row),
            "spread_key": _i32(self.key),
            "spread_max_skew": _i32(self.max_skew),
            "spread_min_domains": _i32(self.min_domains),
            "spread_hard": _bool(self.hard),
            "spread_self": _bool(self.self_match),
            "spread_hostname": _bool(self.hostname),
            "spread_eligible": rows_of(self.eligible, np.bool_, nodes),
        }


@dataclasses.dataclass(slots=True)
class AffinityTable:
    """The incoming pods' required inter-pod terms (A rows)."""

    pod: list[int] = dataclasses.field(default_factory=list)
    row: list[int] = dataclasses.field(default_factory=list)
    key: list[int] = dataclasses.field(default_factory=list)
    anti: list[bool] = dataclasses.field(default_factory=list)

    def append(self, *, pod: int, row: int, key: int, anti: bool) -> None:
        self.pod.append(pod)
        self.row.append(row)
        self.key.append(key)
        self.anti.append(anti)

    def arrays(self) -> dict[str, Any]:
        """The Batch fields of this table."""
        return {
            "affinity_pod": _i32(self.pod),
            "affinity_row": _i32(self.row),
            "affinity_key": _i32(self.key),
            "affinity_anti": _bool(self.anti),
        }


@dataclasses.dataclass(slots=True)
class SymmetricTable:
    """Existing pods' required anti-affinity terms the incoming pods match (S rows)."""

    pod: list[int] = dataclasses.field(default_factory=list)
    row: list[int] = dataclasses.field(default_factory=list)
    key: list[int] = dataclasses.field(default_factory=list)

    def append(self, *, pod: int, row: int, key: int) -> None:
        self.pod.append(pod)
        self.row.append(row)
        self.key.append(key)

    def arrays(self) -> dict[str, Any]:
        """The Batch fields of this table."""
        return {
            "symmetric_pod": _i32(self.pod),
            "symmetric_row": _i32(self.row),
            "symmetric_key": _i32(self.key),
        }


@dataclasses.dataclass(slots=True)
class PreferredTable:
    """Preferred inter-pod terms both ways and existing pods' required affinity (P rows)."""

    pod: list[int] = dataclasses.field(default_factory=list)
    row: list[int] = dataclasses.field(default_factory=list)
    key: list[int] = dataclasses.field(default_factory=list)
    weight: list[int] = dataclasses.field(default_factory=list)

    def append(self, *, pod: int, row: int, key: int, weight: int) -> None:
        self.pod.append(pod)
        self.row.append(row)
        self.key.append(key)
        self.weight.append(weight)

    def arrays(self) -> dict[str, Any]:
        """The Batch fields of this table."""
        return {
            "preferred_pod": _i32(self.pod),
            "preferred_row": _i32(self.row),
            "preferred_key": _i32(self.key),
            "preferred_weight": np.array(self.weight, dtype=np.int64),
        }


@dataclasses.dataclass(slots=True)
class Tables:
    """A batch's tables, filled pod by pod, and the count rows, topology keys and static
    reasons their entries name (interned: the index of each is its first use)."""

    pods: PodTable
    statics: StaticTable = dataclasses.field(default_factory=StaticTable)
    spread: SpreadTable = dataclasses.field(default_factory=SpreadTable)
    affinity: AffinityTable = dataclasses.field(default_factory=AffinityTable)
    symmetric: SymmetricTable = dataclasses.field(default_factory=SymmetricTable)
    preferred: PreferredTable = dataclasses.field(default_factory=PreferredTable)
    rows: dict[countrows.RowKey, int] = dataclasses.field(default_factory=dict)
    keys: dict[str, int] = dataclasses.field(default_factory=dict)
    reasons: dict[StaticReason, int] = dataclasses.field(default_factory=dict)

    def row(self, key: countrows.RowKey) -> int:
        return self.rows.setdefault(key, len(self.rows))

    def key(self, name: str) -> int:
        return self.keys.setdefault(name, len(self.keys))

    def reason(self, plugin: str, message: str, unresolvable: bool) -> int:
        return (
            self.reasons.setdefault(StaticReason(plugin, message, unresolvable), len(self.reasons))
            + 1
        )

    def arrays(self, nodes: int) -> dict[str, Any]:
        """The Batch fields of every table."""
        return {
            **self.pods.arrays(),
            **self.statics.arrays(nodes),
            **self.spread.arrays(nodes),
            **self.affinity.arrays(),
            **self.symmetric.arrays(),
            **self.preferred.arrays(),
        }


def rows_of(rows: Sequence[np.ndarray], dtype: type, nodes: int) -> np.ndarray:
    """Per-node rows stacked into a (rows, nodes) array of ``dtype``."""
    if not rows:
        return np.zeros((0, nodes), dtype=dtype)
    return np.array(rows, dtype=dtype)


def _i32(values: Sequence[int]) -> contract.I32:
    return np.array(values, dtype=np.int32)


def _bool(values: Sequence[bool]) -> contract.B1:
    return np.array(values, dtype=np.bool_)
