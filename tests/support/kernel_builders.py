"""Kernel inputs for tests, built directly as arrays (no framework): a chained case builder for
hand-checked examples, and the batch helpers the property tests need (one pod of a batch, a
placement applied to a cluster, results compared field by field)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Self

import numpy as np

from plumb.kernel import contract as c

# Columns as the node table has them in these tests.
CPU, MEMORY, PODS, GPU = range(4)
RESOURCES = 4
GI = 1 << 30
DEFAULT_WEIGHTS = (1, 1, 3, 2, 2, 2, 0, 1, 1, 2)
RESULT_FIELDS = ("chosen", "code", "detail", "total", "feasible", "top", "top_scores", "hinted")


@dataclasses.dataclass
class _Pod:
    requests: list[int]
    nonzero: list[int]
    hash: int
    static: list[int]
    taint: list[int]
    node_affinity: list[int]
    image: list[int] = dataclasses.field(default_factory=list)
    volume: list[int] = dataclasses.field(default_factory=list)
    dra: list[int] = dataclasses.field(default_factory=list)
    extension: list[int] = dataclasses.field(default_factory=list)
    member: dict[str, int] = dataclasses.field(default_factory=dict)
    spread: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    affinity: list[tuple[str, str, bool]] = dataclasses.field(default_factory=list)
    affinity_self: bool = False
    symmetric: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    preferred: list[tuple[str, str, int]] = dataclasses.field(default_factory=list)
    require_all: bool = True
    balanced_skip: bool = False
    continues: bool = False


class KernelCase:
    """A kernel input built by hand in chained steps: ``KernelCase(3).key("zone", [0, 0, 1])
    .row("web", [1, 0, 2]).pod(cpu=100).spread("web", "zone")``.

    Nodes have 4 cpu, 8Gi, 110 pods and no gpu unless told; a row counts pods per node; each
    ``pod()`` starts a new batch pod and the constraint methods after it apply to that pod.
    """

    def __init__(self, nodes: int) -> None:
        self.nodes = nodes
        self._allocatable = np.array([[4000, 8 * GI, 110, 0]] * nodes, dtype=np.int64)
        self._requested = np.zeros((nodes, RESOURCES), dtype=np.int64)
        self._nonzero = np.zeros((nodes, 2), dtype=np.int64)
        self._keys: dict[str, tuple[list[int], int]] = {}
        self._rows: dict[str, list[int]] = {}
        self._pods: list[_Pod] = []
        self._weights = list(DEFAULT_WEIGHTS)
        self._hashes = [1000 + n for n in range(nodes)]
        self._strategy = c.LEAST_ALLOCATED
        self._zone_score = [c.MAX_NODE_SCORE] * nodes
        self._resources = c.default_resources(CPU, MEMORY)

    # Nodes ------------------------------------------------------------------------------------

    def allocatable(self, column: int, values: Sequence[int]) -> Self:
        self._allocatable[:, column] = values
        return self

    def requested(self, column: int, values: Sequence[int]) -> Self:
        """Requests already placed; cpu and memory also count as the non-zero requests."""
        self._requested[:, column] = values
        if column in (CPU, MEMORY):
            self._nonzero[:, column] = values
        return self

    def nonzero(self, column: int, values: Sequence[int]) -> Self:
        self._nonzero[:, column] = values
        return self

    def hashes(self, values: Sequence[int]) -> Self:
        self._hashes = list(values)
        return self

    def key(self, name: str, values: Sequence[int], domains: int | None = None) -> Self:
        """Domain ids of a topology key per node (-1: label missing)."""
        self._keys[name] = (list(values), domains if domains is not None else max(values) + 1)
        return self

    def row(self, name: str, values: Sequence[int]) -> Self:
        self._rows[name] = list(values)
        return self

    def weights(self, *values: int) -> Self:
        """Weights in SCORE_PLUGINS order; the plugins not given weigh 0."""
        self._weights = [*values, *[0] * (len(c.SCORE_PLUGINS) - len(values))]
        return self

    def strategy(self, strategy: int) -> Self:
        """NodeResourcesFit's strategy for the batch (contract.LEAST_ALLOCATED ...)."""
        self._strategy = strategy
        return self

    def fit_resources(
        self,
        columns: Sequence[int],
        weights: Sequence[int],
        *,
        shape: Sequence[tuple[int, int]] = (),
        optional: Sequence[bool] | None = None,
    ) -> Self:
        """NodeResourcesFit's resources (cpu and memory read their non-zero requests) and, for
        RequestedToCapacityRatio, its shape as (utilization, score 0-100) points."""
        self._resources["fit_columns"] = np.array(columns, dtype=np.int32)
        self._resources["fit_weights"] = np.array(weights, dtype=np.int64)
        self._resources["fit_nonzero"] = np.array(
            [column if column in (CPU, MEMORY) else c.NO_NONZERO for column in columns],
            dtype=np.int32,
        )
        flags = optional if optional is not None else [col == GPU for col in columns]
        self._resources["fit_optional"] = np.array(flags, dtype=np.bool_)
        self._resources["fit_shape_utilization"] = np.array([u for u, _ in shape], dtype=np.int64)
        self._resources["fit_shape_score"] = np.array([s for _, s in shape], dtype=np.int64)
        return self

    def balanced_resources(self, columns: Sequence[int]) -> Self:
        """NodeResourcesBalancedAllocation's resources (the gpu column optional)."""
        self._resources["balanced_columns"] = np.array(columns, dtype=np.int32)
        self._resources["balanced_optional"] = np.array(
            [column == GPU for column in columns], dtype=np.bool_
        )
        return self

    def no_fit_filter(self) -> Self:
        """NodeResourcesFit disabled as a filter."""
        self._resources["fit_filter"] = False
        return self

    def zone_scores(self, values: Sequence[int]) -> Self:
        """ZoneHealth's score per node (100 unless told)."""
        self._zone_score = list(values)
        return self

    # Pods -------------------------------------------------------------------------------------

    def pod(self, cpu: int = 0, memory: int = 0, gpu: int = 0, pod_hash: int = 7) -> Self:
        requests = [0] * RESOURCES
        requests[CPU], requests[MEMORY], requests[PODS], requests[GPU] = cpu, memory, 1, gpu
        zeros = [0] * self.nodes
        self._pods.append(
            _Pod(
                requests=requests,
                nonzero=[cpu or 100, memory or 200 << 20],
                hash=pod_hash,
                static=list(zeros),
                taint=list(zeros),
                node_affinity=list(zeros),
                balanced_skip=cpu == 0 and memory == 0,
            )
        )
        return self

    @property
    def _pod(self) -> _Pod:
        return self._pods[-1]

    def static(self, codes: Sequence[int]) -> Self:
        self._pod.static = list(codes)
        return self

    def taints(self, raw: Sequence[int]) -> Self:
        self._pod.taint = list(raw)
        return self

    def node_affinity(self, raw: Sequence[int]) -> Self:
        self._pod.node_affinity = list(raw)
        return self

    def image(self, scores: Sequence[int]) -> Self:
        """ImageLocality's score of the pod per node (0 unless told)."""
        self._pod.image = list(scores)
        return self

    def continues(self) -> Self:
        """The pod continues the previous pod's OpportunisticBatching ranking (same
        signature, consecutive)."""
        self._pod.continues = True
        return self

    def volume(self, scores: Sequence[int]) -> Self:
        """VolumeBinding's storage-capacity score of the pod per node (0 unless told)."""
        self._pod.volume = list(scores)
        return self

    def dra(self, raw: Sequence[int]) -> Self:
        """DynamicResources' raw score of the pod per node (0 unless told)."""
        self._pod.dra = list(raw)
        return self

    def extension(self, scores: Sequence[int]) -> Self:
        """The Python score plugins' weighted sum for the pod per node (0 unless told); the
        batch is ``extension_scored`` once any pod has one."""
        self._pod.extension = list(scores)
        return self

    def member(self, row: str, value: int = 1) -> Self:
        self._pod.member[row] = value
        return self

    def spread(
        self,
        row: str,
        key: str,
        *,
        max_skew: int = 1,
        min_domains: int = 1,
        hard: bool = True,
        self_match: bool = True,
        hostname: bool = False,
        eligible: Sequence[bool] | None = None,
    ) -> Self:
        self._pod.spread.append(
            {
                "row": row,
                "key": key,
                "max_skew": max_skew,
                "min_domains": min_domains,
                "hard": hard,
                "self": self_match,
                "hostname": hostname,
                "eligible": list(eligible) if eligible is not None else [True] * self.nodes,
            }
        )
        return self

    def system_default_spread(self) -> Self:
        """Scoring keeps nodes that lack a soft key (only kube's system default constraints)."""
        self._pod.require_all = False
        return self

    def affinity(self, row: str, key: str, *, anti: bool = False) -> Self:
        self._pod.affinity.append((row, key, anti))
        return self

    def matches_own_affinity(self) -> Self:
        self._pod.affinity_self = True
        return self

    def symmetric(self, row: str, key: str) -> Self:
        self._pod.symmetric.append((row, key))
        return self

    def preferred(self, row: str, key: str, weight: int) -> Self:
        self._pod.preferred.append((row, key, weight))
        return self

    # Arrays -----------------------------------------------------------------------------------

    def build(self) -> tuple[c.Cluster, c.Batch]:
        keys = list(self._keys)
        rows = list(self._rows)
        cluster = c.Cluster(
            allocatable=self._allocatable.T.copy(),  # the kernel's layout: a row per resource
            requested=self._requested.T.copy(),
            nonzero_requested=self._nonzero.T.copy(),
            name_hashes=np.array(self._hashes, dtype=np.uint64),
            domains=np.array([self._keys[k][0] for k in keys], dtype=np.int32).reshape(
                len(keys), self.nodes
            ),
            domain_counts=np.array([self._keys[k][1] for k in keys], dtype=np.int32),
            counts=np.array([self._rows[r] for r in rows], dtype=np.int32).reshape(
                len(rows), self.nodes
            ),
            pods_column=PODS,
            cpu_column=CPU,
            memory_column=MEMORY,
        )
        pods = self._pods
        spread = [(b, s) for b, p in enumerate(pods) for s in p.spread]
        affinity = [(b, a) for b, p in enumerate(pods) for a in p.affinity]
        symmetric = [(b, s) for b, p in enumerate(pods) for s in p.symmetric]
        preferred = [(b, s) for b, p in enumerate(pods) for s in p.preferred]

        def i32(values: Sequence[int]) -> c.I32:
            return np.array(values, dtype=np.int32)

        def b1(values: Sequence[bool]) -> c.B1:
            return np.array(values, dtype=np.bool_)

        batch = c.Batch(
            pod_hashes=np.array([p.hash for p in pods], dtype=np.uint64),
            requests=np.array([p.requests for p in pods], dtype=np.int64),
            nonzero=np.array([p.nonzero for p in pods], dtype=np.int64),
            static_row=np.arange(len(pods), dtype=np.int32),
            static_code=np.array([p.static for p in pods], dtype=np.int32),
            taint_raw=np.array([p.taint for p in pods], dtype=np.int64),
            node_affinity_raw=np.array([p.node_affinity for p in pods], dtype=np.int64),
            image_score=np.array(
                [p.image or [0] * self.nodes for p in pods], dtype=np.int64
            ).reshape(len(pods), self.nodes),
            volume_score=np.array(
                [p.volume or [0] * self.nodes for p in pods], dtype=np.int64
            ).reshape(len(pods), self.nodes),
            dra_raw=np.array([p.dra or [0] * self.nodes for p in pods], dtype=np.int64).reshape(
                len(pods), self.nodes
            ),
            extension_score=np.array(
                [p.extension or [0] * self.nodes for p in pods], dtype=np.int64
            ).reshape(len(pods), self.nodes),
            extension_scored=any(p.extension for p in pods),
            member=np.array(
                [[p.member.get(r, 0) for r in rows] for p in pods], dtype=np.int32
            ).reshape(len(pods), len(rows)),
            spread_pod=i32([b for b, _ in spread]),
            spread_row=i32([rows.index(s["row"]) for _, s in spread]),
            spread_key=i32([keys.index(s["key"]) for _, s in spread]),
            spread_max_skew=i32([s["max_skew"] for _, s in spread]),
            spread_min_domains=i32([s["min_domains"] for _, s in spread]),
            spread_hard=b1([s["hard"] for _, s in spread]),
            spread_self=b1([s["self"] for _, s in spread]),
            spread_hostname=b1([s["hostname"] for _, s in spread]),
            spread_eligible=b1([s["eligible"] for _, s in spread]).reshape(len(spread), self.nodes),
            spread_require_all=b1([p.require_all for p in pods]),
            affinity_pod=i32([b for b, _ in affinity]),
            affinity_row=i32([rows.index(a[0]) for _, a in affinity]),
            affinity_key=i32([keys.index(a[1]) for _, a in affinity]),
            affinity_anti=b1([a[2] for _, a in affinity]),
            affinity_self=b1([p.affinity_self for p in pods]),
            symmetric_pod=i32([b for b, _ in symmetric]),
            symmetric_row=i32([rows.index(s[0]) for _, s in symmetric]),
            symmetric_key=i32([keys.index(s[1]) for _, s in symmetric]),
            preferred_pod=i32([b for b, _ in preferred]),
            preferred_row=i32([rows.index(s[0]) for _, s in preferred]),
            preferred_key=i32([keys.index(s[1]) for _, s in preferred]),
            preferred_weight=np.array([s[2] for _, s in preferred], dtype=np.int64),
            weights=np.array(self._weights, dtype=np.int64),
            balanced_skip=b1([p.balanced_skip for p in pods]),
            continues=b1([p.continues for p in pods]),
            fit_strategy=self._strategy,
            zone_score=np.array(self._zone_score, dtype=np.int64),
            **self._resources,
        )
        return cluster, batch


def only(plugin: int) -> tuple[int, ...]:
    """Weights that keep one score plugin."""
    return tuple(1 if p == plugin else 0 for p in range(len(c.SCORE_PLUGINS)))


def failure_case() -> KernelCase:
    """Eight nodes; node n fails with code n for a pod with a constraint of every kind."""
    return (
        KernelCase(8)
        .key("zone", [0, 0, 0, -1, 1, 0, 0, 0])
        .key("rack", [0, 0, 0, 0, 0, 1, 0, 0])
        .key("host", list(range(8)))
        .row("web", [0, 0, 0, 0, 1, 0, 0, 0])  # zone 1 has one more web pod than zone 0
        .row("db", [1, 0, 0, 0, 0, 0, 0, 0])  # the pod wants a db pod in its rack
        .row("batch", [0, 0, 0, 0, 0, 0, 1, 0])  # and no batch pod on its host
        .row("guard", [0, 0, 0, 0, 0, 0, 0, 1])  # whose term keeps our pod off its host
        .allocatable(CPU, [4000, 4000, 500, 4000, 4000, 4000, 4000, 4000])
        .requested(PODS, [0, 0, 110, 0, 0, 0, 0, 0])
        .pod(cpu=1000, memory=GI)
        .static([0, 4, 0, 0, 0, 0, 0, 0])
        .spread("web", "zone", max_skew=1)
        .affinity("db", "rack")
        .affinity("batch", "host", anti=True)
        .symmetric("guard", "host")
    )


# Batches ------------------------------------------------------------------------------------


def one_pod(batch: c.Batch, b: int) -> c.Batch:
    """Pod ``b`` of a batch as a batch of its own."""
    return c.part(batch, b, b + 1)


place = c.placed  # the cluster after pod b of a batch is placed on a node


def assert_same(got: c.Result, want: c.Result) -> None:
    """Every output array equal, dtype included."""
    for name in RESULT_FIELDS:
        mine, theirs = getattr(got, name), getattr(want, name)
        assert mine.dtype == theirs.dtype, (name, mine.dtype, theirs.dtype)
        np.testing.assert_array_equal(mine, theirs, err_msg=name)
