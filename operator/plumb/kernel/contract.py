"""The kernel's contract: plain arrays in, plain arrays out, nodes in name order, pods in order.

The framework compiles a batch of pods against a snapshot into a ``Batch`` over a ``Cluster``;
a kernel (``reference.run`` in Python, ``compiled.run`` in numba) filters and scores every node
for each pod in turn, picks one, and applies the placement to its working copy of the cluster
before the next pod, so a batch decides exactly as the same pods one at a time: ``part`` cuts
pods out of a batch and ``placed`` applies a decision, which is how that is checked.

Everything that counts pods is a *count row*: row t of ``Cluster.counts`` holds, per node, how
many placed pods belong to row t (pods matching a selection, or pods carrying an affinity term).
When a batch pod is placed on node n, ``counts[t, n] += Batch.member[b, t]``. Topology domains
are ``Cluster.domains[k, n]``: the value id of topology key k on node n, -1 where the node lacks
the label. Every constraint names a row and a key; the kernel sums the row per domain.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import numpy.typing as npt

I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]
F64 = npt.NDArray[np.float64]
B1 = npt.NDArray[np.bool_]

MAX_NODE_SCORE = 100

# Why a node failed for a pod: the first failing filter, in kube-scheduler's plugin order.
PASS = 0
STATIC = 1  # detail: the framework's static reason code (NodeUnschedulable … NodePorts)
RESOURCES = 2  # detail: bitmask of the resource columns that do not fit
SPREAD_LABEL = 3  # a hard spread constraint's topology key is missing on the node
SPREAD_SKEW = 4
AFFINITY = 5
ANTI_AFFINITY = 6
EXISTING_ANTI_AFFINITY = 7

# Score plugins, in the order of ``Batch.weights`` and of the per-plugin score outputs.
# ZoneHealth is plumb's own (a SchedulingPolicy's zone factors): ``Batch.zone_score``.
FIT, BALANCED, TAINT, NODE_AFFINITY, SPREAD, INTER_POD, ZONE_HEALTH = range(7)
SCORE_PLUGINS = (
    "NodeResourcesFit",
    "NodeResourcesBalancedAllocation",
    "TaintToleration",
    "NodeAffinity",
    "PodTopologySpread",
    "InterPodAffinity",
    "ZoneHealth",
)

# NodeResourcesFit's scoring strategy (``Batch.fit_strategy``), over cpu and memory weighing 1
# each. Least and MostAllocated read the non-zero requests (100m / 200Mi for a request-less
# container) including the pod's, as kube-scheduler's do; BalancedAllocation makes the score
# NodeResourcesBalancedAllocation's own (0 for a pod it skips).
LEAST_ALLOCATED = 0  # per resource (allocatable - requested) * 100 // allocatable, 0 if over
MOST_ALLOCATED = 1  # per resource min(requested, allocatable) * 100 // allocatable
BALANCED_ALLOCATION = 2
FIT_STRATEGIES = (LEAST_ALLOCATED, MOST_ALLOCATED, BALANCED_ALLOCATION)
TOP = 3  # candidates reported per pod, with their per-plugin scores


@dataclasses.dataclass(frozen=True, kw_only=True)
class Cluster:
    """The nodes (N) and what is placed on them, as the batch starts. Per resource, a row over
    the nodes (what a pass over the nodes reads is contiguous)."""

    allocatable: I64  # (R, N)
    requested: I64  # (R, N); the ``pods_column`` counts pods
    nonzero_requested: I64  # (2, N): cpu, memory with 100m / 200Mi for request-less containers
    name_hashes: U64  # (N,)
    domains: I32  # (K, N) value id per topology key, -1 = label missing
    domain_counts: I32  # (K,) value ids of key k are 0 .. domain_counts[k]-1
    counts: I32  # (T, N) count rows
    pods_column: int
    cpu_column: int
    memory_column: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class Batch:
    """B pods in queue order and their constraints, flattened into tables keyed by pod index.

    Every table below is sorted by its ``*_pod`` column (the pod's index in the batch).
    """

    pod_hashes: U64  # (B,)
    requests: I64  # (B, R); pods column = 1; only columns > 0 (and pods) are checked
    nonzero: I64  # (B, 2)
    # Per node, what depends on the pod's spec alone, as U distinct rows: pod b's is row
    # static_row[b] (replicas share one, and the kernel reads it from cache once).
    static_row: I32  # (B,)
    static_code: I32  # (U, N) 0 = passes NodeUnschedulable, NodeName, TaintToleration,
    #                   NodeAffinity and NodePorts; else the framework's reason code
    taint_raw: I64  # (U, N) PreferNoSchedule taints not tolerated
    node_affinity_raw: I64  # (U, N) sum of matched preferred node-affinity weights
    member: I32  # (B, T) what placing pod b adds to each count row

    # PodTopologySpread constraints (C rows)
    spread_pod: I32
    spread_row: I32
    spread_key: I32
    spread_max_skew: I32
    spread_min_domains: I32
    spread_hard: B1
    spread_self: B1  # the pod matches its own selector (+1 in the candidate's domain)
    spread_hostname: B1  # the key is kubernetes.io/hostname (scored per node)
    spread_eligible: B1  # (C, N) nodes whose pods count (nodeAffinityPolicy/nodeTaintsPolicy)
    spread_require_all: B1  # (B,) scoring ignores nodes missing a soft key (False only for
    #                         the system default constraints)

    # InterPodAffinity: required terms of the incoming pod (A rows). For affinity, the row
    # counts pods matching ALL the pod's affinity terms, as kube-scheduler counts them.
    affinity_pod: I32
    affinity_row: I32
    affinity_key: I32
    affinity_anti: B1
    affinity_self: B1  # (B,) the pod matches all its own affinity terms (first-pod rule)

    # Existing pods' required anti-affinity terms that the incoming pod matches (S rows):
    # the row counts the pods carrying the term.
    symmetric_pod: I32
    symmetric_row: I32
    symmetric_key: I32

    # Preferred inter-pod terms in both directions, and existing pods' required affinity
    # (weight 1), each as (row, key, signed weight) (P rows).
    preferred_pod: I32
    preferred_row: I32
    preferred_key: I32
    preferred_weight: I64

    weights: I64  # (7,) in SCORE_PLUGINS order
    balanced_skip: B1  # (B,) pod requests neither cpu nor memory: BalancedAllocation skips it
    fit_strategy: int  # one of FIT_STRATEGIES
    zone_score: I64  # (N,) ZoneHealth's score per node, already 0-100 (100: neutral)

    @property
    def size(self) -> int:
        return int(self.pod_hashes.shape[0])


@dataclasses.dataclass(frozen=True, kw_only=True)
class Result:
    chosen: I32  # (B,) node index, -1 when no node is feasible
    code: npt.NDArray[np.int8]  # (B, N) PASS or the failure code
    detail: I64  # (B, N) for a pod no node fits: per node the static reason code (code
    #              STATIC) or the bitmask of the resources short (RESOURCES), else 0; all 0 for
    #              a pod placed (only a FailedScheduling message asks why nodes failed)
    total: I64  # (B, N) weighted score sum (0 where infeasible)
    feasible: I32  # (B,)
    top: I32  # (B, TOP) best candidates by (total, tie-break), -1 padding
    top_scores: I64  # (B, TOP, 7) normalised per-plugin scores of those candidates


def empty_i32(*shape: int) -> I32:
    return np.zeros(shape, dtype=np.int32)


def empty_i64(*shape: int) -> I64:
    return np.zeros(shape, dtype=np.int64)


def empty_bool(*shape: int) -> B1:
    return np.zeros(shape, dtype=np.bool_)


# Per-pod arrays of a Batch (first axis: the pod), and its tables by their pod column.
_PER_POD = (
    "pod_hashes",
    "requests",
    "nonzero",
    "static_row",
    "member",
    "spread_require_all",
    "affinity_self",
    "balanced_skip",
)
_TABLES = {
    "spread_pod": (
        "spread_row",
        "spread_key",
        "spread_max_skew",
        "spread_min_domains",
        "spread_hard",
        "spread_self",
        "spread_hostname",
        "spread_eligible",
    ),
    "affinity_pod": ("affinity_row", "affinity_key", "affinity_anti"),
    "symmetric_pod": ("symmetric_row", "symmetric_key"),
    "preferred_pod": ("preferred_row", "preferred_key", "preferred_weight"),
}


def part(batch: Batch, start: int, stop: int) -> Batch:
    """Pods ``start`` to ``stop`` (excluded) of a batch, as a batch of their own."""
    fields: dict[str, Any] = {name: getattr(batch, name)[start:stop] for name in _PER_POD}
    for pod_column, columns in _TABLES.items():
        pods = getattr(batch, pod_column)
        mine = (pods >= start) & (pods < stop)
        fields[pod_column] = (pods[mine] - start).astype(np.int32)
        for name in columns:
            fields[name] = getattr(batch, name)[mine]
    return Batch(
        weights=batch.weights,
        fit_strategy=batch.fit_strategy,
        zone_score=batch.zone_score,
        static_code=batch.static_code,
        taint_raw=batch.taint_raw,
        node_affinity_raw=batch.node_affinity_raw,
        **fields,
    )


def placed(cluster: Cluster, batch: Batch, b: int, node: int) -> Cluster:
    """The cluster after pod ``b`` of ``batch`` is placed on ``node``, as a kernel places it."""
    requested = cluster.requested.copy()
    nonzero = cluster.nonzero_requested.copy()
    counts = cluster.counts.copy()
    requested[:, node] += batch.requests[b]
    nonzero[:, node] += batch.nonzero[b]
    counts[:, node] += batch.member[b]
    return dataclasses.replace(
        cluster, requested=requested, nonzero_requested=nonzero, counts=counts
    )
