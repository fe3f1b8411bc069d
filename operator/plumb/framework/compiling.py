"""A batch of pods compiled against a snapshot into the kernel's arrays (kernel/contract.py).

Static filters (NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, NodePorts) and the
raw static scores (TaintToleration, NodeAffinity, ImageLocality) are evaluated here with numpy,
per pod over every node; what changes as pods are placed (resources, spread and affinity
counts) becomes count rows and constraint tables the kernel evaluates and updates pod after pod.

The batch's ``scoring.Profile`` decides which filters run (a filter it does not enable is left
out: static ones here, NodeResourcesFit by ``Batch.fit_filter``, PodTopologySpread's hard
constraints and InterPodAffinity's required terms by not being compiled), the score weights,
the resource plugins' resources and strategy, and the plugin arguments (PodTopologySpread's
default constraints, InterPodAffinity's hardPodAffinityWeight, NodeAffinity's addedAffinity).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from plumb.backend import cache as cache_module
from plumb.backend import countrows, hashing, objects, snapshot, specs
from plumb.framework import scoring
from plumb.framework.plugins import (
    imagelocality,
    interpodaffinity,
    nodeaffinity,
    nodename,
    nodeports,
    noderesourcesfit,
    nodeunschedulable,
    podtopologyspread,
    tainttoleration,
)
from plumb.framework.plugins import volumeverdicts as volume_plugins
from plumb.kernel import contract

# The kernel reports insufficient resources as one bit per column of an int64.
MAX_COLUMNS = 63


@dataclasses.dataclass(frozen=True, slots=True)
class StaticReason:
    plugin: str
    message: str
    unresolvable: bool


@dataclasses.dataclass(frozen=True, kw_only=True)
class Compiled:
    """The kernel's input for a batch, and what is needed to explain its output."""

    pods: tuple[objects.PodInfo, ...]
    names: tuple[str, ...]
    resources: tuple[str, ...]  # request columns of this batch
    static_reasons: tuple[StaticReason, ...]  # code c is static_reasons[c - 1]
    cluster: contract.Cluster
    batch: contract.Batch
    deferred: tuple[objects.PodInfo, ...] = ()  # did not fit this batch's columns; try again
    row_keys: tuple[countrows.RowKey, ...] = ()  # what each of the cluster's count rows counts

    @property
    def index(self) -> Mapping[str, int]:
        """Node name to its column (names are the snapshot's, in name order)."""
        return {name: n for n, name in enumerate(self.names)}


@dataclasses.dataclass(frozen=True, slots=True)
class _Verdicts:
    """Per node, for one pod: where TaintToleration and NodeAffinity reject it."""

    taint_fails: contract.B1
    affinity_fails: contract.B1


@dataclasses.dataclass(frozen=True, slots=True)
class _Filters:
    """Which static filters the profile enables, and where its addedAffinity's required terms
    match (None: it has none)."""

    unschedulable: bool
    node_name: bool
    taints: bool
    node_affinity: bool
    ports: bool
    volumes: frozenset[str]  # the volume plugins enabled as filters
    enforced: contract.B1 | None

    @classmethod
    def of(cls, profile: scoring.Profile, statics: snapshot.NodeStatics) -> _Filters:
        enabled = profile.filters
        added = profile.added_required
        return cls(
            unschedulable=nodeunschedulable.NAME in enabled,
            node_name=nodename.NAME in enabled,
            taints=tainttoleration.NAME in enabled,
            node_affinity=nodeaffinity.NAME in enabled,
            ports=nodeports.NAME in enabled,
            volumes=enabled & frozenset(volume_plugins.PLUGINS),
            enforced=None if added is None else nodeaffinity.matches_terms(added, statics),
        )


class _Tables:
    """Row, key and reason interning plus the flat constraint tables, filled pod by pod."""

    def __init__(self) -> None:
        self.rows: dict[countrows.RowKey, int] = {}
        self.keys: dict[str, int] = {}
        self.reasons: dict[StaticReason, int] = {}
        self.spread: dict[str, list[object]] = {
            name: []
            for name in (
                "pod",
                "row",
                "key",
                "max_skew",
                "min_domains",
                "hard",
                "self",
                "hostname",
                "eligible",
            )
        }
        self.affinity: dict[str, list[object]] = {n: [] for n in ("pod", "row", "key", "anti")}
        self.symmetric: dict[str, list[object]] = {n: [] for n in ("pod", "row", "key")}
        self.preferred: dict[str, list[object]] = {n: [] for n in ("pod", "row", "key", "weight")}

    def row(self, key: countrows.RowKey) -> int:
        return self.rows.setdefault(key, len(self.rows))

    def key(self, name: str) -> int:
        return self.keys.setdefault(name, len(self.keys))

    def reason(self, plugin: str, message: str, unresolvable: bool) -> int:
        return (
            self.reasons.setdefault(StaticReason(plugin, message, unresolvable), len(self.reasons))
            + 1
        )


def _static(
    pod: objects.PodInfo,
    statics: snapshot.NodeStatics,
    cache: cache_module.Cache,
    tables: _Tables,
    verdicts: _Verdicts,
    filters: _Filters,
) -> np.ndarray:
    """Per node: 0 where every static filter the profile enables passes, else the first
    failing filter's reason."""
    code = np.zeros(len(statics), dtype=np.int32)

    def mark(fails: np.ndarray, reason: int) -> None:
        code[(code == 0) & fails] = reason

    pinned = nodeaffinity.prefilter_nodes(pod) if filters.node_affinity else None
    if pinned is not None:
        # NodeAffinity's PreFilter: a pod pinned to node names (DaemonSet pods) only visits
        # those; kube-scheduler reports every other node as not passing the plugin.
        outside = np.array([name not in pinned for name in statics.names], dtype=np.bool_)
        message = nodeaffinity.NOT_PREFILTERED if pinned else nodeaffinity.CONFLICT
        mark(outside, tables.reason(nodeaffinity.NAME, message, nodeaffinity.UNRESOLVABLE))
    if filters.unschedulable:
        mark(
            nodeunschedulable.filter(pod, statics),
            tables.reason(
                nodeunschedulable.NAME,
                nodeunschedulable.UNSCHEDULABLE,
                nodeunschedulable.UNRESOLVABLE,
            ),
        )
    if filters.node_name:
        mark(
            nodename.filter(pod, statics),
            tables.reason(nodename.NAME, nodename.MISMATCH, nodename.UNRESOLVABLE),
        )
    if filters.taints:
        mark(
            verdicts.taint_fails,
            tables.reason(
                tainttoleration.NAME, tainttoleration.UNTOLERATED, tainttoleration.UNRESOLVABLE
            ),
        )
    if filters.node_affinity:
        if filters.enforced is not None:  # the profile's addedAffinity, checked first
            mark(
                ~filters.enforced,
                tables.reason(nodeaffinity.NAME, nodeaffinity.ENFORCED, nodeaffinity.UNRESOLVABLE),
            )
        mark(
            verdicts.affinity_fails,
            tables.reason(nodeaffinity.NAME, nodeaffinity.MISMATCH, nodeaffinity.UNRESOLVABLE),
        )
    if filters.ports and pod.scheduling.host_ports:
        mark(
            nodeports.filter(pod, cache.used_ports(statics.names)),
            tables.reason(nodeports.NAME, nodeports.PORTS_IN_USE, nodeports.UNRESOLVABLE),
        )
    if filters.volumes and pod.claims:
        # VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone; kube-scheduler runs
        # them after NodeResourcesFit (see _resources_before_volumes).
        found = volume_plugins.verdicts(pod, statics, cache.volumes, cache.claim_use())
        for verdict in found.filters:
            if verdict.plugin in filters.volumes:
                mark(
                    verdict.fails,
                    tables.reason(verdict.plugin, verdict.reason, verdict.unresolvable),
                )
    return code


def _spread(
    b: int,
    pod: objects.PodInfo,
    statics: snapshot.NodeStatics,
    cache: cache_module.Cache,
    tables: _Tables,
    verdicts: _Verdicts,
    profile: scoring.Profile,
) -> bool:
    """Add the pod's spread constraints (hard ones only when PodTopologySpread filters);
    returns whether nodes missing a key are ignored when scoring (False only for the system
    default constraints)."""
    constraints = pod.scheduling.spread
    require_all = True
    if not constraints:
        constraints, require_all = _default_spread(pod, cache, profile)
    filtering = podtopologyspread.NAME in profile.filters
    scoring_soft = profile.weights[contract.SPREAD] != 0  # weighing 0, soft ones cost nothing
    constraints = tuple(
        constraint for constraint in constraints if (filtering if constraint.hard else scoring_soft)
    )
    honour_affinity = ~verdicts.affinity_fails
    tolerated = ~verdicts.taint_fails
    everywhere = np.ones(len(statics), dtype=np.bool_)
    for constraint in constraints:
        eligible = everywhere.copy()
        if constraint.node_affinity_policy == "Honor":
            eligible &= honour_affinity
        if constraint.node_taints_policy == "Honor":
            eligible &= tolerated
        selector = podtopologyspread.effective_selector(constraint, pod)
        t = tables.spread
        t["pod"].append(b)
        t["row"].append(tables.row(podtopologyspread.selection(constraint, pod)))
        t["key"].append(tables.key(constraint.topology_key))
        t["max_skew"].append(constraint.max_skew)
        t["min_domains"].append(constraint.min_domains)
        t["hard"].append(constraint.hard)
        t["self"].append(selector is not None and selector.matches(pod.labels))
        t["hostname"].append(constraint.topology_key == podtopologyspread.HOSTNAME)
        t["eligible"].append(eligible)
    return require_all


def _default_spread(
    pod: objects.PodInfo, cache: cache_module.Cache, profile: scoring.Profile
) -> tuple[tuple[specs.SpreadConstraint, ...], bool]:
    """PodTopologySpread's default constraints for a pod without constraints of its own, and
    whether scoring requires all their keys on a node.

    kube-scheduler's buildDefaultConstraints: the profile's constraints ("System": the built-in
    ones; "List": ``spread_defaults``) with the selector of the pod's Services and workloads
    in place of theirs (their matchLabelKeys merged into a selector that is then replaced: no
    effect); none when that selector is empty. Only the system defaults score nodes missing a
    key (requireAllTopologies is false only for them)."""
    if profile.spread_defaulting == "List" and not profile.spread_defaults:
        return (), True
    selector = cache.workloads.default_selector(pod)
    if selector is None:
        return (), True
    if profile.spread_defaulting == "List":
        listed = tuple(
            dataclasses.replace(constraint, selector=selector, match_label_keys=())
            for constraint in profile.spread_defaults
        )
        return listed, True
    return podtopologyspread.default_constraints(selector), False


def _inter_pod(
    b: int,
    pod: objects.PodInfo,
    carriers: Sequence[countrows.Carrier],
    cache: cache_module.Cache,
    tables: _Tables,
    profile: scoring.Profile,
) -> bool:
    """Add the pod's inter-pod terms and the carried terms it matches (the required ones and
    existing pods' anti-affinity only when InterPodAffinity filters); returns the first-pod
    rule's "the pod matches all its own affinity terms"."""
    namespaces = cache.namespace_labels
    s = pod.scheduling
    self_match = False
    filtering = interpodaffinity.NAME in profile.filters
    hard_weight = profile.hard_pod_affinity_weight
    if s.required_affinity and filtering:
        matchers = tuple(countrows.Matcher.of_term(term) for term in s.required_affinity)
        row = tables.row(countrows.Selection(matchers))
        for term in s.required_affinity:
            for name, value in (
                ("pod", b),
                ("row", row),
                ("key", tables.key(term.topology_key)),
                ("anti", False),
            ):
                tables.affinity[name].append(value)
        self_match = all(m.matches(pod, namespaces) for m in matchers)
    for term in s.required_anti_affinity if filtering else ():
        row = tables.row(countrows.Selection((countrows.Matcher.of_term(term),)))
        for name, value in (
            ("pod", b),
            ("row", row),
            ("key", tables.key(term.topology_key)),
            ("anti", True),
        ):
            tables.affinity[name].append(value)

    # A score weighing 0 costs nothing: its terms get no count row and no table entry.
    scored = profile.weights[contract.INTER_POD] != 0

    def prefer(row: countrows.RowKey, topology_key: str, weight: int) -> None:
        for name, value in (
            ("pod", b),
            ("row", tables.row(row)),
            ("key", tables.key(topology_key)),
            ("weight", weight),
        ):
            tables.preferred[name].append(value)

    for weighted in s.preferred_affinity if scored else ():
        prefer(
            countrows.Selection((countrows.Matcher.of_term(weighted.term),)),
            weighted.term.topology_key,
            weighted.weight,
        )
    for weighted in s.preferred_anti_affinity if scored else ():
        prefer(
            countrows.Selection((countrows.Matcher.of_term(weighted.term),)),
            weighted.term.topology_key,
            -weighted.weight,
        )
    for carrier in carriers:
        if carrier.kind == countrows.REQUIRED_ANTI_AFFINITY:
            if not filtering:
                continue
        elif not scored or (carrier.kind == countrows.REQUIRED_AFFINITY and hard_weight <= 0):
            continue  # (kube-scheduler leaves required terms out at hardPodAffinityWeight 0)
        if not countrows.Matcher.of_term(carrier.term).matches(pod, namespaces):
            continue
        key = carrier.term.topology_key
        if carrier.kind == countrows.REQUIRED_ANTI_AFFINITY:
            for name, value in (("pod", b), ("row", tables.row(carrier)), ("key", tables.key(key))):
                tables.symmetric[name].append(value)
        elif carrier.kind == countrows.REQUIRED_AFFINITY:
            prefer(carrier, key, hard_weight)
        elif carrier.kind == countrows.PREFERRED_AFFINITY:
            prefer(carrier, key, carrier.weight)
        else:
            prefer(carrier, key, -carrier.weight)
    return self_match


def _resources_before_volumes(
    pods: Sequence[objects.PodInfo],
    static_row: contract.I32,
    static_rows: list[np.ndarray],
    tables: _Tables,
    requests: contract.I64,
    requested: contract.I64,
    allocatable: contract.I64,
) -> None:
    """kube-scheduler runs the volume filters after NodeResourcesFit, so a node short of
    resources reports that, whatever its volumes: clear the volume reason there and let the
    kernel find the shortage. A pod with claims is decided alone (``Scheduler``), so the
    resources it meets are these."""
    volume_codes = [
        code
        for code, reason in enumerate(tables.reasons, 1)
        if reason.plugin in volume_plugins.PLUGINS
    ]
    if not volume_codes:
        return
    for b, pod in enumerate(pods):
        if not pod.claims:
            continue
        asked = requests[b] > 0
        short = (requested[asked] + requests[b][asked][:, None] > allocatable[asked]).any(axis=0)
        row = static_rows[int(static_row[b])]
        row[np.isin(row, volume_codes) & short] = 0


def _rows_of(rows: list[np.ndarray], dtype: type, nodes: int) -> np.ndarray:
    """Per-node rows stacked into a (rows, nodes) array of ``dtype``."""
    if not rows:
        return np.zeros((0, nodes), dtype=dtype)
    return np.array(rows, dtype=dtype)


def _i32(values: list[object]) -> contract.I32:
    return np.array(values, dtype=np.int32)


def _bool(values: list[object]) -> contract.B1:
    return np.array(values, dtype=np.bool_)


_FIT_STRATEGIES = {
    scoring.LEAST_ALLOCATED: contract.LEAST_ALLOCATED,
    scoring.MOST_ALLOCATED: contract.MOST_ALLOCATED,
    scoring.BALANCED_ALLOCATION: contract.BALANCED_ALLOCATION,
    scoring.REQUESTED_TO_CAPACITY_RATIO: contract.REQUESTED_TO_CAPACITY_RATIO,
}


def _scored(resources: Sequence[tuple[str, int]]) -> list[tuple[str, int, bool]]:
    """The (name, weight, optional) of a resource plugin's resources a score can read (see
    noderesourcesfit.score_kind: the others are never scored and are left out)."""
    out = []
    for name, weight in resources:
        kind = noderesourcesfit.score_kind(name)
        if kind is not None:
            out.append((name, weight, kind == noderesourcesfit.IF_REQUESTED))
    return out


def _resource_fields(profile: scoring.Profile, column: Mapping[str, int]) -> dict[str, Any]:
    """The Batch fields of the resource plugins' arguments (kernel/contract.py)."""
    fit = _scored(profile.fit_resources)
    balanced = _scored(profile.balanced_resources)
    nonzero = {objects.CPU: 0, objects.MEMORY: 1}  # NodeResourcesFit reads non-zero requests
    shape = profile.fit_shape if profile.strategy == scoring.REQUESTED_TO_CAPACITY_RATIO else ()
    scale = contract.MAX_NODE_SCORE // noderesourcesfit.MAX_CUSTOM_PRIORITY_SCORE
    return {
        "fit_filter": noderesourcesfit.NAME in profile.filters,
        "fit_columns": np.array([column[name] for name, _, _ in fit], dtype=np.int32),
        "fit_weights": np.array([weight for _, weight, _ in fit], dtype=np.int64),
        "fit_nonzero": np.array(
            [nonzero.get(name, contract.NO_NONZERO) for name, _, _ in fit], dtype=np.int32
        ),
        "fit_optional": np.array([optional for _, _, optional in fit], dtype=np.bool_),
        "fit_shape_utilization": np.array([u for u, _ in shape], dtype=np.int64),
        "fit_shape_score": np.array([score * scale for _, score in shape], dtype=np.int64),
        "balanced_columns": np.array([column[name] for name, _, _ in balanced], dtype=np.int32),
        "balanced_optional": np.array([optional for _, _, optional in balanced], dtype=np.bool_),
    }


def zone_scores(profile: scoring.Profile, snap: snapshot.Snapshot) -> contract.I64:
    """ZoneHealth's score per node: round(100 * the factor of the node's zone), 100 (neutral)
    for a node without the zone label or in a zone the profile has no factor for."""
    nodes = len(snap.statics)
    scores = np.full(nodes, contract.MAX_NODE_SCORE, dtype=np.int64)
    if not profile.zone_key or not profile.zone_factors:
        return scores
    ids = snap.statics.label_ids(profile.zone_key)
    per_zone = np.array(
        [
            round(contract.MAX_NODE_SCORE * profile.zone_factors.get(zone, 1.0))
            for zone in snap.statics.values(profile.zone_key)
        ],
        dtype=np.int64,
    )
    present = ids >= 0
    scores[present] = per_zone[ids[present]]
    return scores


def compile_batch(
    pods: Sequence[objects.PodInfo],
    snap: snapshot.Snapshot,
    cache: cache_module.Cache,
    *,
    profile: scoring.Profile = scoring.DEFAULT,
    nominated: Sequence[tuple[objects.PodInfo, str]] = (),
) -> Compiled:
    """Compile ``pods`` (in queue order) for the kernel against ``snap``, scored by
    ``profile``. ``nominated`` pods count as placed on their node (room held for them)."""
    statics = snap.statics
    nodes = len(statics)
    base = [objects.CPU, objects.MEMORY, objects.PODS]
    # The resources the profile scores are columns whatever the pods request (a node's
    # ephemeral-storage is scored for a pod asking for none).
    for name, _weight, _optional in _scored((*profile.fit_resources, *profile.balanced_resources)):
        if name not in base:
            base.append(name)
    columns = list(base)
    taken: list[objects.PodInfo] = []
    deferred: list[objects.PodInfo] = []
    for pod in pods:
        extra = [name for name in sorted(pod.requests) if name not in columns]
        if len(columns) + len(extra) > MAX_COLUMNS:
            deferred.append(pod)
            continue
        columns.extend(extra)
        taken.append(pod)
    tables = _Tables()
    held = [(pod, node) for pod, node in nominated if node in snap.statics.index]
    carriers = list(
        dict.fromkeys(
            [
                *cache.carriers(),
                *(c for pod, _node in held for c in countrows.carried(pod)),
                *(c for pod in taken for c in countrows.carried(pod)),
            ]
        )
    )
    size = len(taken)
    requests = np.zeros((size, len(columns)), dtype=np.int64)
    nonzero = np.zeros((size, 2), dtype=np.int64)
    require_all = np.ones(size, dtype=np.bool_)
    affinity_self = np.zeros(size, dtype=np.bool_)
    balanced_skip = np.zeros(size, dtype=np.bool_)
    static_row = np.zeros(size, dtype=np.int32)
    # The static filters' verdicts and raw scores depend on the pod's spec alone: replicas
    # share one row of each, evaluated once (and read by the kernel from cache). A score
    # weighing 0 is not computed (its row stays 0).
    distinct: dict[tuple[specs.Scheduling, str, tuple[str, ...], str], int] = {}
    verdict_rows: list[_Verdicts] = []
    static_rows: list[np.ndarray] = []
    taint_rows: list[np.ndarray] = []
    affinity_rows: list[np.ndarray] = []
    image_rows: list[np.ndarray] = []
    column = {name: i for i, name in enumerate(columns)}
    filters = _Filters.of(profile, statics)
    weights = profile.weights
    zeros = np.zeros(nodes, dtype=np.int64)
    added_preferred = (
        nodeaffinity.preferred_raw(profile.added_preferred, statics)
        if profile.added_preferred and weights[contract.NODE_AFFINITY]
        else None
    )
    balanced_names = [name for name, _weight in profile.balanced_resources]
    for b, pod in enumerate(taken):
        # Replicas share a row, unless they claim volumes (each its own claims).
        spec = (pod.scheduling, pod.node_name, pod.images, pod.uid if pod.claims else "")
        u = distinct.get(spec)
        if u is None:
            # TaintToleration's and NodeAffinity's verdicts serve both the filters and
            # PodTopologySpread's nodeTaintsPolicy / nodeAffinityPolicy: evaluate them once.
            u = distinct[spec] = len(verdict_rows)
            verdicts = _Verdicts(
                taint_fails=tainttoleration.filter(pod, statics)[0],
                affinity_fails=nodeaffinity.filter(pod, statics),
            )
            verdict_rows.append(verdicts)
            static_rows.append(_static(pod, statics, cache, tables, verdicts, filters))
            taint_rows.append(
                tainttoleration.score_raw(pod, statics) if weights[contract.TAINT] else zeros
            )
            preferred = (
                nodeaffinity.score_raw(pod, statics) if weights[contract.NODE_AFFINITY] else zeros
            )
            if added_preferred is not None:
                preferred = preferred + added_preferred
            affinity_rows.append(preferred)
            image_rows.append(
                imagelocality.score(pod, statics) if weights[contract.IMAGE_LOCALITY] else zeros
            )
        static_row[b] = u
        for name, amount in pod.requests.items():
            requests[b, column[name]] = amount
        requests[b, column[objects.PODS]] = 1
        nonzero[b] = pod.scored_nonzero
        # PreScore skips a pod requesting none of BalancedAllocation's resources.
        balanced_skip[b] = not any(pod.requests.get(name) for name in balanced_names)
        require_all[b] = _spread(b, pod, statics, cache, tables, verdict_rows[u], profile)
        affinity_self[b] = _inter_pod(b, pod, carriers, cache, tables, profile)

    row_keys = list(tables.rows)
    member = np.zeros((size, len(row_keys)), dtype=np.int32)
    for b, pod in enumerate(taken):
        for t, key in enumerate(row_keys):
            member[b, t] = cache.rows.belongs(key, pod)
    key_names = list(tables.keys)
    domains = np.full((len(key_names), nodes), -1, dtype=np.int32)
    domain_counts = np.zeros(len(key_names), dtype=np.int32)
    for k, name in enumerate(key_names):
        domains[k] = statics.label_ids(name)
        domain_counts[k] = statics.domain_count(name)
    snap_column = {name: i for i, name in enumerate(snap.resources)}
    # The kernel's layout is a row per resource (the snapshot's a row per node).
    allocatable = np.zeros((len(columns), nodes), dtype=np.int64)
    requested = np.zeros((len(columns), nodes), dtype=np.int64)
    for i, name in enumerate(columns):
        if name in snap_column:
            allocatable[i] = snap.allocatable[:, snap_column[name]]
            requested[i] = snap.requested[:, snap_column[name]]
    nonzero_requested = np.array(snap.nonzero_requested.T, dtype=np.int64, order="C")
    counts = cache.count_rows(row_keys)
    for pod, node in held:
        n = statics.index[node]
        for name, amount in pod.requests.items():
            if name in column:
                requested[column[name], n] += amount
        requested[column[objects.PODS], n] += 1
        nonzero_requested[:, n] += pod.nonzero
        for t, key in enumerate(row_keys):
            counts[t, n] += cache.rows.belongs(key, pod)
    if noderesourcesfit.NAME in profile.filters:
        _resources_before_volumes(
            taken, static_row, static_rows, tables, requests, requested, allocatable
        )
    cluster = contract.Cluster(
        allocatable=allocatable,
        requested=requested,
        nonzero_requested=nonzero_requested,
        name_hashes=np.array(snap.name_hashes, dtype=np.uint64),
        domains=domains,
        domain_counts=domain_counts,
        counts=counts,
        pods_column=column[objects.PODS],
        cpu_column=column[objects.CPU],
        memory_column=column[objects.MEMORY],
    )
    sp, af, sy, pr = tables.spread, tables.affinity, tables.symmetric, tables.preferred
    eligible = (
        np.array(sp["eligible"], dtype=np.bool_)
        if sp["eligible"]
        else np.zeros((0, nodes), dtype=np.bool_)
    )
    batch = contract.Batch(
        pod_hashes=np.array([hashing.stable_hash(p.uid) for p in taken], dtype=np.uint64),
        requests=requests,
        nonzero=nonzero,
        static_row=static_row,
        static_code=_rows_of(static_rows, np.int32, nodes),
        taint_raw=_rows_of(taint_rows, np.int64, nodes),
        node_affinity_raw=_rows_of(affinity_rows, np.int64, nodes),
        image_score=_rows_of(image_rows, np.int64, nodes),
        member=member,
        spread_pod=_i32(sp["pod"]),
        spread_row=_i32(sp["row"]),
        spread_key=_i32(sp["key"]),
        spread_max_skew=_i32(sp["max_skew"]),
        spread_min_domains=_i32(sp["min_domains"]),
        spread_hard=_bool(sp["hard"]),
        spread_self=_bool(sp["self"]),
        spread_hostname=_bool(sp["hostname"]),
        spread_eligible=eligible,
        spread_require_all=require_all,
        affinity_pod=_i32(af["pod"]),
        affinity_row=_i32(af["row"]),
        affinity_key=_i32(af["key"]),
        affinity_anti=_bool(af["anti"]),
        affinity_self=affinity_self,
        symmetric_pod=_i32(sy["pod"]),
        symmetric_row=_i32(sy["row"]),
        symmetric_key=_i32(sy["key"]),
        preferred_pod=_i32(pr["pod"]),
        preferred_row=_i32(pr["row"]),
        preferred_key=_i32(pr["key"]),
        preferred_weight=np.array(pr["weight"], dtype=np.int64),
        weights=np.array(profile.weights, dtype=np.int64),
        balanced_skip=balanced_skip,
        fit_strategy=_FIT_STRATEGIES[profile.strategy],
        zone_score=zone_scores(profile, snap),
        **_resource_fields(profile, column),
    )
    return Compiled(
        pods=tuple(taken),
        names=statics.names,
        resources=tuple(columns),
        static_reasons=tuple(tables.reasons),
        cluster=cluster,
        batch=batch,
        deferred=tuple(deferred),
        row_keys=tuple(row_keys),
    )
