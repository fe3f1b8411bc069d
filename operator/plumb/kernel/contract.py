"""The kernel's contract: plain arrays in, plain arrays out, nodes in name order, pods in order.

The framework compiles a batch of pods against a snapshot into a ``Batch`` over a ``Cluster``;
a kernel (``reference.run`` in Python, ``compiled.run`` in numba) filters and scores every node
for each pod in turn, picks one, and applies the placement to its working copy of the cluster
before the next pod, so a batch decides exactly as the same pods one at a time: ``part`` cuts
pods out of a batch and ``placed`` applies a decision, which is how that is checked. The one
thing a pod carries over from the pod before it is kube-scheduler's OpportunisticBatching
(``Batch.continues``): the ranking that pod was scored with, which only a batch keeps.

Everything that counts pods is a *count row*: row t of ``Cluster.counts`` holds, per node, how
many placed pods belong to row t (pods matching a selection, or pods carrying an affinity term).
When a batch pod is placed on node n, ``counts[t, n] += Batch.member[b, t]``. Topology domains
are ``Cluster.domains[k, n]``: the value id of topology key k on node n, -1 where the node lacks
the label. Every constraint names a row and a key; the kernel sums the row per domain.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
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
# ZoneHealth is plumb's own (a SchedulingPolicy's zone factors): ``Batch.zone_score``;
# ImageLocality's and VolumeBinding's scores are the framework's too (``Batch.image_score``,
# ``Batch.volume_score``), none normalised. DynamicResources' raw score (its prioritized lists'
# preference, ``Batch.dra_raw``) is normalised over the feasible nodes, as NodeAffinity's is.
FIT, BALANCED, TAINT, NODE_AFFINITY, SPREAD, INTER_POD, ZONE_HEALTH, IMAGE_LOCALITY = range(8)
VOLUME_BINDING, DYNAMIC_RESOURCES = 8, 9
SCORE_PLUGINS = (
    "NodeResourcesFit",
    "NodeResourcesBalancedAllocation",
    "TaintToleration",
    "NodeAffinity",
    "PodTopologySpread",
    "InterPodAffinity",
    "ZoneHealth",
    "ImageLocality",
    "VolumeBinding",
    "DynamicResources",
)

# NodeResourcesFit's scoring strategy (``Batch.fit_strategy``) over the resources of
# ``Batch.fit_columns`` (each weighing ``fit_weights``): per resource a score from what the
# node has requested with the pod's requests added, then the weighted mean of the resources
# scored (integer division; RequestedToCapacityRatio rounds half away from zero, as Go's
# math.Round). A resource is left out where the node has none of it, and where it is optional
# (``fit_optional``: an extended resource) and the pod does not request it. cpu and memory read
# the non-zero requests (``fit_nonzero`` names the row: 100m / 200Mi for a request-less
# container), as kube-scheduler's do. BalancedAllocation makes the score
# NodeResourcesBalancedAllocation's own (0 for a pod it skips).
LEAST_ALLOCATED = 0  # per resource (allocatable - requested) * 100 // allocatable, 0 if over
MOST_ALLOCATED = 1  # per resource min(requested, allocatable) * 100 // allocatable
BALANCED_ALLOCATION = 2
# Per resource the broken linear function of ``fit_shape_*`` at utilization
# requested * 100 // allocatable (100 when over); only resources scoring above 0 count.
REQUESTED_TO_CAPACITY_RATIO = 3
FIT_STRATEGIES = (LEAST_ALLOCATED, MOST_ALLOCATED, BALANCED_ALLOCATION, REQUESTED_TO_CAPACITY_RATIO)
NO_NONZERO = -1  # ``fit_nonzero``: the resource reads its plain requests
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
    #                   NodeAffinity, NodePorts and the volume filters; c > 0: fails the
    #                   framework's reason c, checked first; -c: fails the reason c checked
    #                   after every other filter (NodeDeclaredFeatures, kube-scheduler's last):
    #                   a node failing nothing else fails it (code STATIC, detail c)
    taint_raw: I64  # (U, N) PreferNoSchedule taints not tolerated
    node_affinity_raw: I64  # (U, N) sum of matched preferred node-affinity weights
    image_score: I64  # (U, N) ImageLocality's score, already 0-100 (not normalised)
    volume_score: I64  # (U, N) VolumeBinding's storage-capacity score, 0-100 (not normalised)
    dra_raw: I64  # (U, N) DynamicResources' raw score (>= 0), normalised to 0-100 by the
    #               highest over the feasible nodes (0 everywhere: all score 0)
    extension_score: I64  # (U, N) the profile's Python score plugins (framework/compiling.py):
    #                       the sum of weight x normalised score, added to each feasible node's
    #                       total as it is (any int64, negative too; read only when
    #                       ``extension_scored``); not one of SCORE_PLUGINS (no weight, no
    #                       ``top_scores`` column: the compile step reports each plugin's score)
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

    weights: I64  # (10,) in SCORE_PLUGINS order
    balanced_skip: B1  # (B,) pod requests none of the balanced resources: BalancedAllocation
    #                    skips it (score 0)
    fit_strategy: int  # one of FIT_STRATEGIES
    zone_score: I64  # (N,) ZoneHealth's score per node, already 0-100 (100: neutral)

    # NodeResourcesFit's filter: False skips the resource check (placements still add the
    # requests). Its score's resources (F rows, see FIT_STRATEGIES) and, for
    # RequestedToCapacityRatio, its shape (S points in increasing utilization, scores 0-100).
    fit_filter: bool
    fit_columns: I32  # (F,) request column
    fit_weights: I64  # (F,)
    fit_nonzero: I32  # (F,) row of the non-zero requests it reads (0 cpu, 1 memory) or NO_NONZERO
    fit_optional: B1  # (F,) left out when the pod does not request it
    fit_shape_utilization: I64  # (S,)
    fit_shape_score: I64  # (S,)
    # NodeResourcesBalancedAllocation's resources (G rows): plain requests, no weights (its
    # score ignores them); ``balanced_optional`` as ``fit_optional``.
    balanced_columns: I32  # (G,)
    balanced_optional: B1  # (G,)
    # kube-scheduler's OpportunisticBatching (framework/signatures.py says which pods): pod b
    # may take the next node of the last full cycle's ranking. When pod b-1 was placed and its
    # node now fails pod b, the best node left of the ranking kept from the last pod scored in
    # full (its totals as they were then, ties by that pod's hash) is taken off it, and chosen
    # if it passes pod b's filters; otherwise pod b is scored in full and its ranking, less
    # its node, is kept in turn. The first pod of a batch continues nothing.
    continues: B1  # (B,)
    # Its score from v1.36 (balanced_allocation.go, #135573): the change in balance the pod
    # brings, 50 + (50 + with - without) / 2 (Go's division, towards zero), "without" over
    # the same resources, 100 on a node with nothing requested. False: the balance with the
    # pod, up to v1.35.
    balanced_change: bool = False
    # Whether any row of ``extension_score`` is not all zeros: False (no Python plugin scores,
    # the common case), and the kernels do not read it.
    extension_scored: bool = False

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
    total: I64  # (B, N) weighted score sum plus the extension score (0 where infeasible)
    feasible: I32  # (B,)
    top: I32  # (B, TOP) best candidates by (total, tie-break), -1 padding
    top_scores: I64  # (B, TOP, 9) normalised per-plugin scores of those candidates
    hinted: B1  # (B,) chosen from the kept ranking (Batch.continues), not by its own scores


def default_resources(cpu_column: int, memory_column: int) -> dict[str, Any]:
    """The Batch fields of kube-scheduler's default resource scoring and filtering: cpu and
    memory weighing 1 for both resource plugins (the non-zero requests for NodeResourcesFit),
    no shape, the filter on."""
    columns = np.array([cpu_column, memory_column], dtype=np.int32)
    return {
        "fit_filter": True,
        "fit_columns": columns,
        "fit_weights": np.ones(2, dtype=np.int64),
        "fit_nonzero": np.array([0, 1], dtype=np.int32),
        "fit_optional": np.zeros(2, dtype=np.bool_),
        "fit_shape_utilization": np.zeros(0, dtype=np.int64),
        "fit_shape_score": np.zeros(0, dtype=np.int64),
        "balanced_columns": columns.copy(),
        "balanced_optional": np.zeros(2, dtype=np.bool_),
    }


_SHARED = (
    "weights",
    "fit_strategy",
    "zone_score",
    "static_code",
    "taint_raw",
    "node_affinity_raw",
    "image_score",
    "volume_score",
    "dra_raw",
    "extension_score",
    "extension_scored",
    "fit_filter",
    "fit_columns",
    "fit_weights",
    "fit_nonzero",
    "fit_optional",
    "fit_shape_utilization",
    "fit_shape_score",
    "balanced_columns",
    "balanced_optional",
    "balanced_change",
)
"""The Batch fields every pod of a batch shares (``part`` keeps them whole)."""


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
    "continues",
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
    for name in _SHARED:
        fields[name] = getattr(batch, name)
    return Batch(**fields)


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


Kernel = Callable[[Cluster, Batch], Result]
"""A kernel: ``reference.run``, ``compiled.run``; it blocks while it decides."""

KernelRunner = Callable[[Cluster, Batch], Awaitable[Result]]
"""A kernel as the scheduling loop awaits it (``executor.KernelExecutor.run``): off the loop."""
